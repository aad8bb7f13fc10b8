"""Attention masks: the only place in aiayn where masks are built.

Convention, everywhere in the package: a boolean tensor broadcastable to (B, H, T_q, T_k);
True at (i, j) means query i may attend to key j. Other libraries' conventions (torch's
nn.MultiheadAttention uses True = ignore) are converted only at their boundary.
"""

from __future__ import annotations

import torch
from torch import Tensor


def padding_mask(tokens: Tensor, pad_id: int) -> Tensor:
    """Keys that are real tokens. tokens (B, T_k) -> (B, 1, 1, T_k), True = not padding."""
    return (tokens != pad_id)[:, None, None, :]


def causal_mask(t_q: int, t_k: int | None = None, device: torch.device | str | None = None) -> Tensor:
    """§3.2.3: position i may attend to positions <= i. Returns (1, 1, T_q, T_k).

    With t_k > t_q the queries are the last t_q positions of a length-t_k sequence (incremental
    decoding with a KV cache holding t_k - t_q earlier positions).
    """
    t_k = t_q if t_k is None else t_k
    if t_k < t_q:
        raise ValueError(f"causal_mask: t_k={t_k} must be >= t_q={t_q}")
    q_pos = torch.arange(t_k - t_q, t_k, device=device)[:, None]
    k_pos = torch.arange(t_k, device=device)[None, :]
    return (k_pos <= q_pos)[None, None]


def combine(*masks: Tensor | None) -> Tensor | None:
    """Logical AND of masks (None = no restriction); the result broadcasts over all inputs."""
    result: Tensor | None = None
    for mask in masks:
        if mask is None:
            continue
        result = mask if result is None else result & mask
    return result

