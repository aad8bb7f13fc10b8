"""T5's bucketed relative position bias (Raffel et al. 2020, §2.1), in place of §3.5's positions.

§3.5 adds a position vector to each token embedding. T5 adds nothing to the embeddings; instead
each attention score gets a learned scalar per head that depends only on the key's offset from
the query, j - i, put into one of `num_buckets` buckets:

    scores[b, h, i, j] = q_i . k_j + bias[h, bucket(j - i)]

Half the buckets are exact offsets (0, 1, 2, ...), the other half grow logarithmically up to
`max_distance`; every offset beyond shares the last bucket. The encoder's buckets are
bidirectional (half for keys before the query, half after); the decoder's are causal (keys
after the query are masked anyway, so all buckets go to offsets <= 0). One table per stack,
computed once per forward pass and shared by all its layers (transformers keeps it in the first
layer's self-attention); cross-attention gets no bias.

Shapes: bias (1, H, T_q, T_k), added to the scores as a float tensor (see nn/attention.py).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn


def relative_position_bucket(relative_position: Tensor, bidirectional: bool, num_buckets: int,
                             max_distance: int) -> Tensor:
    """The bucket (long, same shape) of each offset key - query, as Mesh TensorFlow's
    `_relative_position_bucket` (and transformers' T5Attention) computes it, operation for
    operation, so that the buckets are the same at every offset."""
    buckets = torch.zeros_like(relative_position)
    if bidirectional:
        num_buckets //= 2
        buckets = buckets + (relative_position > 0).to(torch.long) * num_buckets
        distance = torch.abs(relative_position)
    else:
        distance = -torch.min(relative_position, torch.zeros_like(relative_position))
    max_exact = num_buckets // 2  # distances 0 .. max_exact - 1 each have a bucket
    is_small = distance < max_exact
    large = max_exact + (torch.log(distance.float() / max_exact) / math.log(max_distance / max_exact)
                         * (num_buckets - max_exact)).to(torch.long)
    large = torch.min(large, torch.full_like(large, num_buckets - 1))
    return buckets + torch.where(is_small, distance, large)


class RelativePositionBias(nn.Module):
    """A learned scalar per (bucket, head): the additive attention bias of one stack."""

    def __init__(self, n_heads: int, num_buckets: int, max_distance: int, bidirectional: bool):
        super().__init__()
        if num_buckets < (4 if bidirectional else 2) or max_distance <= num_buckets // (
                4 if bidirectional else 2):
            raise ValueError(f"invalid config: relative_attention_num_buckets={num_buckets}, "
                             f"relative_attention_max_distance={max_distance}: need at least "
                             "2 exact buckets and a max distance beyond them")
        self.num_buckets, self.max_distance = num_buckets, max_distance
        self.bidirectional = bidirectional
        self.weight = nn.Parameter(torch.empty(num_buckets, n_heads))  # (buckets, H)
        nn.init.normal_(self.weight, std=1.0)

    def buckets(self, t_q: int, t_k: int, offset: int = 0) -> Tensor:
        """(T_q, T_k) bucket ids: queries at positions offset .. offset + T_q - 1 (incremental
        decoding: `offset` positions are cached), keys at 0 .. T_k - 1."""
        device = self.weight.device
        query = torch.arange(t_q, dtype=torch.long, device=device)[:, None] + offset
        key = torch.arange(t_k, dtype=torch.long, device=device)[None, :]
        return relative_position_bucket(key - query, self.bidirectional, self.num_buckets,
                                        self.max_distance)

    def forward(self, t_q: int, t_k: int, offset: int = 0) -> Tensor:
        """-> bias (1, H, T_q, T_k), in the weight's dtype."""
        values = self.weight[self.buckets(t_q, t_k, offset)]  # (T_q, T_k, H)
        return values.permute(2, 0, 1).unsqueeze(0)


def make_relative_bias(config, bidirectional: bool) -> RelativePositionBias | None:
    """The stack's relative bias when the config asks for one (relative_attention_num_buckets > 0,
    a TransformerConfig option), else None."""
    buckets = getattr(config, "relative_attention_num_buckets", 0)
    if not buckets:
        return None
    return RelativePositionBias(config.n_heads, buckets, config.relative_attention_max_distance,
                                bidirectional)


__all__ = ["RelativePositionBias", "make_relative_bias", "relative_position_bucket"]
