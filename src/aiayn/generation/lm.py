"""Text generation from a decoder-only language model: one loop that owns the KV cache.

The prompt is run once (prefill), filling the cache with its keys and values; then each step feeds
only the newest token, whose attention reads every earlier position from the cache (§3.2.3's
causal masking is what makes this exact: earlier positions never see later ones, so their keys and
values do not change). Tokens are yielded as they are produced, for streaming.

The model interface used here (aiayn.models.DecoderLM has it):
    model.new_cache() -> a KVCache;  model(tokens_new, cache) -> logits (B, T_new, V)
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import torch
from torch import Tensor

from aiayn.errors import UserError
from aiayn.generation.sampling import check_options, sample


def _check_length(model, prompt_len: int, max_new_tokens: int) -> None:
    cfg = getattr(model, "config", None)
    if cfg is not None and cfg.positions == "learned" and prompt_len + max_new_tokens > cfg.max_len:
        raise UserError(f"prompt ({prompt_len} tokens) + max_new_tokens={max_new_tokens} exceeds "
                        f"the model's max_len={cfg.max_len} (learned positions cannot go further)")


def stream(model, prompt: Tensor, max_new_tokens: int, *, temperature: float = 1.0,
           top_k: int | None = None, top_p: float | None = None, seed: int | None = None,
           eos_id: int | None = None, pad_id: int = 0, banned: Sequence[int] = ()) -> Iterator[Tensor]:
    """An iterator over the next token of every row, (B,), up to max_new_tokens times.

    prompt (B, T) with T >= 1 (rows of equal length). temperature 0 = greedy; otherwise a draw
    after top-k / top-p filtering (aiayn.generation.sampling), reproducible for a given `seed`.
    A row that has produced `eos_id` yields `pad_id` afterwards; the loop ends when every row has.
    `banned` tokens are never produced (e.g. padding and BOS). The arguments are checked here,
    before any token is computed (so a caller can fail before printing anything).
    """
    if prompt.dim() != 2 or prompt.shape[1] == 0:
        raise UserError(f"prompt must be (batch, length) with length >= 1, got {tuple(prompt.shape)}")
    if max_new_tokens < 0:
        raise UserError(f"max_new_tokens={max_new_tokens}: must be non-negative")
    check_options(temperature, top_k, top_p)
    _check_length(model, prompt.shape[1], max_new_tokens)
    generator = None
    if seed is not None:
        generator = torch.Generator(device=prompt.device).manual_seed(seed)
    return _decode(model, prompt, max_new_tokens, (temperature, top_k, top_p), generator,
                   eos_id, pad_id, list(banned))


@torch.no_grad()
def _decode(model, prompt: Tensor, max_new_tokens: int, options: tuple, generator,
            eos_id: int | None, pad_id: int, banned: list[int]) -> Iterator[Tensor]:
    cache = model.new_cache()
    running = torch.ones(prompt.shape[0], dtype=torch.bool, device=prompt.device)
    logits = model(prompt, cache)[:, -1]  # prefill: the whole prompt at once -> (B, V)
    for step in range(max_new_tokens):
        if banned:
            logits[:, banned] = float("-inf")
        token = sample(logits, *options, generator=generator)  # (B,)
        token = token.masked_fill(~running, pad_id)
        yield token
        if eos_id is not None:
            running &= token != eos_id
            if not running.any():
                return
        if step + 1 < max_new_tokens:
            logits = model(token[:, None], cache)[:, -1]  # one new position; the rest is cached


def generate(model, prompt: Tensor, max_new_tokens: int, **options) -> Tensor:
    """prompt (B, T) -> (B, T + n): the prompt followed by the n <= max_new_tokens new tokens.
    Options as for `stream`."""
    new = list(stream(model, prompt, max_new_tokens, **options))
    return torch.cat([prompt, torch.stack(new, dim=1)], dim=1) if new else prompt


__all__ = ["generate", "stream"]
