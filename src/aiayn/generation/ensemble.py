"""An ensemble of encoder-decoders that decodes as one model: its next-token distribution is
the mean of its members' (fairseq's EnsembleModel: log of the mean of the probabilities, not
the mean of the log-probabilities). The paper averages checkpoints of one run (§6.1), which
costs nothing at decoding; an ensemble of separately trained models costs one decoder pass per
member and usually gains more, most on small corpora, where single models plateau early.

Ensemble has the encoder-decoder interface the search reads (aiayn.generation.search):
    encode(src, src_mask) -> memory      the members' memories side by side on the last axis
    new_cache() -> EnsembleCache         one KVCache per member, reordered together
    decode(tgt_new, memory, src_mask, cache) -> log-probabilities (B, T_new, V)
and forward(src, tgt) -> log-probabilities, as scoring reads it. Log-probabilities are logits
whose log_softmax is themselves, so greedy, sampling and beam search run unchanged. The members
must share the vocabulary and special ids (the Translator that loads them checks the tokenizers).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import torch
from torch import Tensor, nn

from aiayn.errors import UserError


class EnsembleCache:
    """The members' KV caches (one each), reordered together."""

    def __init__(self, caches: list):
        self.caches = caches

    @property
    def length(self) -> int:
        return self.caches[0].length

    def reorder(self, indices: Tensor) -> None:
        for cache in self.caches:
            cache.reorder(indices)

    def reorder_self_attention(self, indices: Tensor) -> None:
        for cache in self.caches:
            cache.reorder_self_attention(indices)

    def reorder_cross_attention(self, indices: Tensor) -> None:
        for cache in self.caches:
            cache.reorder_cross_attention(indices)


class Ensemble(nn.Module):
    """Members (aiayn.models.Transformer) that decode as one model (module docstring)."""

    def __init__(self, members: Sequence[nn.Module]):
        super().__init__()
        if not members:
            raise UserError("an ensemble needs at least one model")
        vocab = {m.config.vocab_size for m in members}
        if len(vocab) > 1:
            raise UserError(f"the ensemble's models have different vocabularies "
                            f"({', '.join(str(m.config.vocab_size) for m in members)} tokens)")
        self.members = nn.ModuleList(members)
        # the shortest positions any member has: the search keeps within them
        self.config = dataclasses.replace(members[0].config,
                                          max_len=min(m.config.max_len for m in members))
        self.widths = [m.config.d_model for m in members]

    def src_mask(self, src: Tensor) -> Tensor:
        return self.members[0].src_mask(src)

    def new_cache(self) -> EnsembleCache:
        return EnsembleCache([m.new_cache() for m in self.members])

    def encode(self, src: Tensor, src_mask: Tensor | None = None) -> Tensor:
        """src (B, S) -> the members' memories (B, S, sum of d_model), side by side: one tensor,
        so that a beam search's reorder keeps them aligned row for row."""
        if src_mask is None:
            src_mask = self.src_mask(src)
        return torch.cat([m.encode(src, src_mask) for m in self.members], dim=-1)

    def decode(self, tgt: Tensor, memory: Tensor, src_mask: Tensor | None = None,
               cache: EnsembleCache | None = None) -> Tensor:
        """tgt (B, T) -> log of the mean of the members' next-token probabilities (B, T, V),
        in at least float32."""
        memories = memory.split(self.widths, dim=-1)
        caches = cache.caches if cache is not None else [None] * len(self.members)
        logits = [m.decode(tgt, mem, src_mask, c)
                  for m, mem, c in zip(self.members, memories, caches, strict=True)]
        return mean_distribution(logits)

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        """src (B, S), tgt (B, T) (shifted right) -> log-probabilities (B, T, V)."""
        src_mask = self.src_mask(src)
        return self.decode(tgt, self.encode(src, src_mask), src_mask)


def mean_distribution(logits: Sequence[Tensor]) -> Tensor:
    """log(mean_i softmax(logits_i)) over the last axis, in at least float32."""
    dtype = torch.promote_types(logits[0].dtype, torch.float32)
    lprobs = torch.stack([torch.log_softmax(x.to(dtype), dim=-1) for x in logits])
    if len(logits) == 1:
        return lprobs[0]
    return torch.logsumexp(lprobs, dim=0) - math.log(len(logits))


__all__ = ["Ensemble", "EnsembleCache", "mean_distribution"]
