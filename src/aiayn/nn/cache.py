"""Key/value cache for incremental decoding.

Self-attention keys/values grow by the new positions at each step; cross-attention keys/values
depend only on the source, so they are computed once per source and reused. ``reorder`` selects
batch rows (beam search keeps the surviving hypotheses' caches).
"""

from __future__ import annotations

import torch
from torch import Tensor


class AttentionCache:
    """Keys and values of one attention module, (B, H, T_k, Dh) each."""

    def __init__(self, static: bool = False):
        self.static = static
        self.k: Tensor | None = None
        self.v: Tensor | None = None

    def update(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Store new keys/values (appended for self-attention) and return all of them."""
        if self.k is not None and not self.static:
            k = torch.cat([self.k, k], dim=-2)
            v = torch.cat([self.v, v], dim=-2)
        self.k, self.v = k, v
        return k, v

    @property
    def length(self) -> int:
        return 0 if self.k is None else self.k.shape[-2]

    def reorder(self, indices: Tensor) -> None:
        if self.k is not None:
            self.k = self.k.index_select(0, indices)
            self.v = self.v.index_select(0, indices)


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
