"""Key/value cache for incremental decoding.

Self-attention keys/values grow by the new positions at each step; cross-attention keys/values
depend only on the source, so they are computed once per source and reused. ``reorder`` selects
batch rows (beam search keeps the surviving hypotheses' caches).
"""

from __future__ import annotations

import torch
from torch import Tensor


class AttentionCache:
    """Keys and values of one attention module, (B, H, T_k, Dh) each.

    A self-attention cache appends into buffers with spare room, doubled when full, so a decoding
    step copies only its new positions instead of the whole cache (amortised O(1) per position;
    `torch.cat` at every step would copy O(T) each time). While autograd records a graph through
    the keys and values, it concatenates instead: in-place writes would break the backward pass.
    """

    def __init__(self, static: bool = False):
        self.static = static
        self._k: Tensor | None = None  # (B, H, capacity, Dh); the first `_len` positions are used
        self._v: Tensor | None = None
        self._len = 0

    @property
    def k(self) -> Tensor | None:
        return self._used(self._k)

    @property
    def v(self) -> Tensor | None:
        return self._used(self._v)

    def _used(self, buf: Tensor | None) -> Tensor | None:
        if buf is None or buf.shape[-2] == self._len:
            return buf
        return buf[..., : self._len, :]

    def update(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Store new keys/values (appended for self-attention) and return all of them."""
        if self.static:  # contiguous: every later step reads them as they are
            self._k, self._v, self._len = k.contiguous(), v.contiguous(), k.shape[-2]
        elif self._k is None:
            self._k, self._v, self._len = k, v, k.shape[-2]
        elif torch.is_grad_enabled() and (k.requires_grad or self._k.requires_grad):
            self._k = torch.cat([self.k, k], dim=-2)
            self._v = torch.cat([self.v, v], dim=-2)
            self._len = self._k.shape[-2]
        else:
            n = self._len + k.shape[-2]
            if n > self._k.shape[-2]:
                capacity = max(n, 2 * self._k.shape[-2])
                self._k, self._v = self._grow(self.k, capacity), self._grow(self.v, capacity)
            self._k[..., self._len : n, :] = k
            self._v[..., self._len : n, :] = v
            self._len = n
        return self.k, self.v

    @staticmethod
    def _grow(used: Tensor, capacity: int) -> Tensor:
        buf = used.new_empty(*used.shape[:-2], capacity, used.shape[-1])
        buf[..., : used.shape[-2], :] = used
        return buf

    @property
    def length(self) -> int:
        return self._len

    def reorder(self, indices: Tensor) -> None:
        if self._k is not None:
            self._k = self._k.index_select(0, indices)
            self._v = self._v.index_select(0, indices)


class KVCache:
    """The cache of a whole decoder: per layer, a growing self-attention cache and (for an
    encoder-decoder) a static cross-attention cache."""

    def __init__(self, n_layers: int, cross: bool = True):
        self.self_attn = [AttentionCache() for _ in range(n_layers)]
        self.cross_attn = [AttentionCache(static=True) for _ in range(n_layers)] if cross else None

    @property
    def length(self) -> int:
        """Number of target positions already cached (the position of the next token)."""
        return self.self_attn[0].length if self.self_attn else 0

    def reorder(self, indices: Tensor) -> None:
        """Keep batch rows `indices` (B_new,) of every cached tensor, in that order."""
        for entry in self.self_attn + (self.cross_attn or []):
            entry.reorder(indices)

    def reorder_self_attention(self, indices: Tensor) -> None:
        """Like `reorder`, for the growing self-attention caches only (one row per decoder row)."""
        for entry in self.self_attn:
            entry.reorder(indices)

    def reorder_cross_attention(self, indices: Tensor) -> None:
        """Like `reorder`, for the cross-attention caches only. For beam search they hold one row
        per sentence, which all its beams read (see MultiHeadAttention), so they follow the
        sentences, not the decoder rows."""
        for entry in self.cross_attn or []:
            entry.reorder(indices)
