"""Text generation from a decoder-only language model, over the one decode loop.

The prompt is run once (prefill), filling the cache with its keys and values; then each step feeds
only the newest token, whose attention reads every earlier position from the cache (§3.2.3's
causal masking is what makes this exact: earlier positions never see later ones, so their keys and
values do not change). Tokens are yielded as they are produced, for streaming.

Prompts of different lengths share a batch left-padded (`left_pad`): every row's next token is
then in the same column; padding is masked out of attention and positions count from each row's
first real token, so a row gives what it would give alone. A row that has produced EOS leaves the
batch (its later tokens are reported as padding). With `sliding_window`, generation may run past
the model's max_len: the input is cropped to the last max_len tokens and recomputed (nanoGPT).

The model interface used here (aiayn.models.DecoderLM has it):
    model.new_cache() -> a KVCache;  model(tokens_new, cache) -> logits (B, T_new, V)
    with left padding also model(tokens_new, cache, positions=(B, T_new), mask=(B, 1, 1, T_k))
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import torch
from torch import Tensor

from aiayn.errors import ConfigError, UserError
from aiayn.generation.config import GenerationConfig
from aiayn.generation.loop import decode_loop
from aiayn.generation.ngrams import with_padding_marked
from aiayn.generation.steps import DecoderLMStep
from aiayn.generation.strategies import Sampler


def left_pad(prompts: Sequence[Sequence[int] | Tensor], pad_id: int = 0,
             device: str | torch.device | None = None) -> tuple[Tensor, Tensor]:
    """Prompts of different lengths (each >= 1 token) -> tokens (B, T_max) padded on the left,
    and mask (B, T_max), True at real tokens."""
    rows = [torch.as_tensor(p, dtype=torch.long).flatten() for p in prompts]
    if not rows or min(len(r) for r in rows) == 0:
        raise ConfigError("prompt: every prompt needs at least one token")
    width = max(len(r) for r in rows)
    tokens = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros(len(rows), width, dtype=torch.bool)
    for i, r in enumerate(rows):  # once per prompt, before decoding
        tokens[i, width - len(r):], mask[i, width - len(r):] = r, True
    return tokens.to(device), mask.to(device)


def _device(model) -> torch.device:
    param = next(iter(model.parameters()), None) if hasattr(model, "parameters") else None
    return param.device if param is not None else torch.device("cpu")


def _as_batch(model, prompt, prompt_mask: Tensor | None,
              pad_id: int) -> tuple[Tensor, Tensor | None]:
    if not isinstance(prompt, Tensor):  # a list of token lists, possibly ragged
        return left_pad(prompt, pad_id, _device(model))
    if prompt.dim() != 2 or prompt.shape[1] == 0:
        raise ConfigError(f"prompt must be (batch, length) with length >= 1, got {tuple(prompt.shape)}")
    if prompt_mask is not None:
        if prompt_mask.shape != prompt.shape:
            raise ConfigError(f"prompt_mask {tuple(prompt_mask.shape)} must have the prompt's "
                              f"shape {tuple(prompt.shape)}")
        if not bool(prompt_mask[:, -1].all()):
            raise ConfigError("prompt_mask: prompts must be left-padded (every row's last token real)")
    return prompt, prompt_mask


def _check_length(model, prompt_len: int, config: GenerationConfig) -> None:
    cfg = getattr(model, "config", None)
    if (cfg is not None and cfg.positions == "learned" and not config.sliding_window
            and prompt_len + config.max_new_tokens > cfg.max_len):
        raise UserError(f"prompt ({prompt_len} tokens) + max_new_tokens={config.max_new_tokens} "
                        f"exceeds the model's max_len={cfg.max_len} (learned positions cannot go "
                        f"further; sliding_window=True crops to the last max_len tokens)")


def stream_config(model, prompt: Tensor | Sequence[Sequence[int]], config: GenerationConfig,
                  prompt_mask: Tensor | None = None) -> Iterator[Tensor]:
    """An iterator over the next token of every row, (B,), up to config.max_new_tokens times:
    greedy (temperature 0) or sampled. prompt (B, T), left-padded with prompt_mask (B, T) True at
    real tokens, or a list of token lists. A row that has produced config.eos_id yields pad_id
    afterwards; the loop ends when every row has. Checked here, before any token is computed."""
    if not isinstance(config, GenerationConfig):
        raise TypeError(f"config must be a GenerationConfig, got {type(config).__name__}")
    if config.max_new_tokens is None:
        raise ConfigError("max_new_tokens=None: a language model needs a limit")
    if config.beam > 1:
        raise ConfigError(f"beam={config.beam}: language models decode greedily or by sampling")
    prompt, prompt_mask = _as_batch(model, prompt, prompt_mask, config.pad_id)
    longest = prompt.shape[1] if prompt_mask is None else int(prompt_mask.sum(1).max())
    _check_length(model, longest, config)
    generator = None
    if config.seed is not None:
        generator = torch.Generator(device=prompt.device).manual_seed(config.seed)
    return _decode(model, prompt, prompt_mask, config, generator)


@torch.no_grad()
def _decode(model, prompt: Tensor, prompt_mask: Tensor | None, config: GenerationConfig,
            generator) -> Iterator[Tensor]:
    if config.max_new_tokens == 0:
        return
    cfg = getattr(model, "config", None)
    step = DecoderLMStep(model, getattr(cfg, "max_len", None), config.sliding_window)
    cache = step.start(prompt, prompt_mask, config.max_new_tokens)
    limit = torch.full((prompt.shape[0],), config.max_new_tokens, device=prompt.device)
    # A repeated n-gram counts across the prompt too (HF's rule for decoder-only models).
    prefix = with_padding_marked(prompt, prompt_mask) if config.no_repeat_ngram_size else None
    sampler = Sampler(limit, config, config.banned, generator=generator, prefix=prefix)
    for _ in decode_loop(step, cache, sampler, prompt):  # the first step is the prefill
        yield sampler.last


def stream(model, prompt: Tensor | Sequence[Sequence[int]], max_new_tokens: int, *,
           temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None,
           seed: int | None = None, eos_id: int | None = None, pad_id: int = 0,
           banned: Sequence[int] = (), prompt_mask: Tensor | None = None,
           sliding_window: bool = False, min_length: int = 0,
           no_repeat_ngram_size: int = 0) -> Iterator[Tensor]:
    """An iterator over the next token of every row, (B,), up to max_new_tokens times.

    prompt (B, T) with T >= 1 (left-padded rows with `prompt_mask`, or a list of token lists of
    any lengths). temperature 0 = greedy; otherwise a draw after top-k / top-p filtering
    (aiayn.generation.sampling), reproducible for a given `seed`. A row that has produced `eos_id`
    yields `pad_id` afterwards; the loop ends when every row has. `banned` tokens are never
    produced (e.g. padding and BOS). sliding_window: past the model's max_len, crop to the last
    max_len tokens and recompute. no_repeat_ngram_size n > 0: no n-gram twice in a row's prompt
    and output together. The arguments are checked here (ValueError / UserError),
    before any token is computed (so a caller can fail before printing anything).
    """
    config = GenerationConfig(temperature=temperature, top_k=top_k, top_p=top_p, seed=seed,
                              max_new_tokens=max_new_tokens, min_length=min_length, eos_id=eos_id,
                              pad_id=pad_id, banned=tuple(banned), sliding_window=sliding_window,
                              no_repeat_ngram_size=no_repeat_ngram_size)
    return stream_config(model, prompt, config, prompt_mask)


def generate(model, prompt: Tensor | Sequence[Sequence[int]], max_new_tokens: int,
             **options) -> Tensor:
    """prompt (B, T) -> (B, T + n): the prompt followed by the n <= max_new_tokens new tokens.
    A list of prompts of different lengths is left-padded first (with options' pad_id).
    Options as for `stream`."""
    if not isinstance(prompt, Tensor):
        prompt, options["prompt_mask"] = left_pad(prompt, options.get("pad_id", 0), _device(model))
    new = list(stream(model, prompt, max_new_tokens, **options))
    return torch.cat([prompt, torch.stack(new, dim=1)], dim=1) if new else prompt


__all__ = ["generate", "left_pad", "stream", "stream_config"]
