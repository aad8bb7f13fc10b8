"""One step interface for every model family: step(new_tokens, cache) -> logits (N, T_new, V).

EncoderDecoderStep runs the encoder once (§3.1) and binds what every decoder step reads from the
source, memory and its padding mask, into the cache (SourceCache), so that reordering beams or
dropping finished sentences keeps them aligned with the decoder's keys and values row for row.

DecoderLMStep runs a decoder-only language model, with two extras:
  - left-padded prompts of different lengths in one batch: padding is masked out of attention and
    each row's first real token is position 0 (so a row gives what it would give alone);
  - sliding_window: past the model's max_len, the input is cropped to the last max_len tokens and
    recomputed at every step (nanoGPT's rule; absolute positions move, so nothing cached stays
    valid), for sinusoidal and learned positions alike.
"""

from __future__ import annotations

import torch
from torch import Tensor

from aiayn.masks import padding_mask


class SourceCache:
    """The decoder's KV cache plus memory (n, S, D) and src_mask (n, 1, 1, S): one row per live
    sentence, which its `group` decoder rows (beams) all read. The decoder's self-attention
    keys/values have one row per decoder row (N = n x group); the cross-attention ones, like
    memory, one per sentence (MultiHeadAttention reads a key row with g query rows)."""

    def __init__(self, kv, memory: Tensor, src_mask: Tensor):
        self.kv, self.memory, self.src_mask = kv, memory, src_mask
        self.group = 1  # decoder rows per sentence now
        self.beam = 1  # decoder rows per sentence after the first step

    def repeat(self, k: int) -> None:
        """k decoder rows per sentence (beams) from the second step on: the first step runs one
        row per sentence (all beams start alike, from BOS), and its reorder makes k. Afterwards
        `reorder` must keep each sentence's rows together and in sentence order (beam search does)."""
        self.beam = k

    def reorder(self, indices: Tensor) -> None:
        """Keep decoder rows `indices` (N',), in that order, `beam` per sentence."""
        split = hasattr(self.kv, "reorder_cross_attention")
        if split:
            self.kv.reorder_self_attention(indices)
        else:  # a cache that does not tell its parts apart (test doubles): all per decoder row
            self.kv.reorder(indices)
        sentences = indices.view(-1, self.beam)[:, 0] // self.group  # (n',) of the kept rows
        self.group = self.beam
        if self.beam > 1 and sentences.numel() == self.memory.shape[0]:
            return  # every sentence stays, in its place (beam search keeps the order)
        self.memory = self.memory.index_select(0, sentences)
        self.src_mask = self.src_mask.index_select(0, sentences)
        if split:
            self.kv.reorder_cross_attention(sentences)


class EncoderDecoderStep:
    """step() of an encoder-decoder. The model needs encode(src, src_mask) -> memory,
    new_cache() -> a cache with reorder(indices), and decode(tgt_new, memory, src_mask, cache)
    -> logits (aiayn.models.Transformer has them; so can test doubles)."""

    def __init__(self, model):
        self.model = model

    def start(self, src: Tensor, pad_id: int) -> SourceCache:
        """src (B, S) -> a cache holding its encoding; the decoder has seen nothing yet."""
        src_mask = padding_mask(src, pad_id)  # (B, 1, 1, S)
        return SourceCache(self.model.new_cache(), self.model.encode(src, src_mask), src_mask)

    def __call__(self, new_tokens: Tensor, cache: SourceCache) -> Tensor:
        return self.model.decode(new_tokens, cache.memory, cache.src_mask, cache.kv)


class LMCache:
    """A language model's KV cache plus what left padding and the sliding window need:
    real (N, T) which positions so far are tokens, not padding (None: no padding);
    history (N, <= max_len) the latest tokens (None: no sliding window)."""

    def __init__(self, kv, real: Tensor | None, history: Tensor | None):
        self.kv, self.real, self.history = kv, real, history
        self.length = 0  # positions seen so far (padding included)
        self.sliding = False  # past max_len: every step recomputes the window

    def reorder(self, indices: Tensor) -> None:
        if self.kv is not None:
            self.kv.reorder(indices)
        if self.real is not None:
            self.real = self.real.index_select(0, indices)
        if self.history is not None:
            self.history = self.history.index_select(0, indices)


class DecoderLMStep:
    """step() of a decoder-only LM: model(tokens_new, cache) -> logits, and with left padding
    model(tokens_new, cache, positions=(N, T_new), mask=(N, 1, 1, T_k)) (aiayn.models.DecoderLM)."""

    def __init__(self, model, max_len: int | None = None, sliding_window: bool = False):
        self.model = model
        self.max_len = max_len
        self.sliding_window = sliding_window and max_len is not None

    def start(self, prompt: Tensor, prompt_mask: Tensor | None, max_new_tokens: int) -> LMCache:
        """An empty cache for `prompt` (B, T); prompt_mask (B, T) True = a real token (left padding)."""
        window = self.sliding_window and prompt.shape[1] + max_new_tokens > self.max_len
        if prompt_mask is not None and bool(prompt_mask.all()):
            prompt_mask = None  # no padding: the plain causal path
        # `real` starts as the prompt's mask: the first step is the prompt (prefill).
        return LMCache(self.model.new_cache(), prompt_mask, prompt[:, :0] if window else None)

    def __call__(self, new_tokens: Tensor, cache: LMCache) -> Tensor:
        t_new = new_tokens.shape[1]
        if cache.real is not None and cache.length > 0:  # generated tokens are all real
            cache.real = torch.cat([cache.real, cache.real.new_ones(cache.real.shape[0], t_new)],
                                   dim=1)  # (N, T_k)
        if cache.history is not None:
            cache.history = torch.cat([cache.history, new_tokens], dim=1)[:, -self.max_len:]
        cache.length += t_new
        if cache.history is not None and (cache.sliding or cache.length > self.max_len):
            # Past the context: the last max_len tokens, recomputed from scratch (nanoGPT).
            cache.sliding, cache.kv = True, None
            if cache.real is not None:
                cache.real = cache.real[:, -self.max_len:]
            return self._forward(cache.history, None, cache.real)[:, -t_new:]
        return self._forward(new_tokens, cache.kv, cache.real)

    def _forward(self, tokens: Tensor, kv, real: Tensor | None) -> Tensor:
        if real is None:
            return self.model(tokens, kv)
        # A row's first real token is position 0: the positions it would have alone.
        positions = (real.long().cumsum(1) - 1).clamp(min=0)[:, -tokens.shape[1]:]  # (N, T_new)
        # Keys that are tokens: aiayn.masks.padding_mask's (N, 1, 1, T_k), True = may attend, built
        # from `real` because a generated token may have the padding id.
        return self.model(tokens, kv, positions=positions, mask=real[:, None, None, :])


__all__ = ["DecoderLMStep", "EncoderDecoderStep", "LMCache", "SourceCache"]
