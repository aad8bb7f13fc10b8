"""The normalisation of each sub-layer: §3.1's LayerNorm, or T5's RMSNorm.

    LayerNorm(x) = (x - mean(x)) / sqrt(var(x) + eps) * g + b        (§3.1, Ba et al. 2016)
    RMSNorm(x)   = x / sqrt(mean(x^2) + eps) * g                      (Zhang & Sennrich 2019)

T5 (Raffel et al. 2020) uses the second ("T5LayerNorm"): no mean subtraction and no bias, and the
mean of squares is taken in fp32 whatever the input's dtype.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


class RMSNorm(nn.Module):
    """x / sqrt(mean(x^2) + eps) * weight, the mean of squares in fp32 (as transformers'
    T5LayerNorm); the result is cast to the weight's dtype when that is fp16 / bf16."""

    def __init__(self, d_model: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d_model))
        self.eps = eps

    def forward(self, x: Tensor) -> Tensor:
        variance = x.to(torch.float32).pow(2).mean(-1, keepdim=True)
        x = x * torch.rsqrt(variance + self.eps)
        if self.weight.dtype in (torch.float16, torch.bfloat16):
            x = x.to(self.weight.dtype)
        return self.weight * x


def make_norm(config, d_model: int | None = None) -> nn.Module:
    """The config's normalisation over d_model features: `norm` is a TransformerConfig option
    (T5's "rms_norm"); every other family's config has §3.1's LayerNorm."""
    d = config.d_model if d_model is None else d_model
    kind = getattr(config, "norm", "layer_norm")
    if kind == "rms_norm":
        return RMSNorm(d, eps=config.layer_norm_eps)
    if kind == "layer_norm":
        return nn.LayerNorm(d, eps=config.layer_norm_eps)
    raise ValueError(f"invalid config: norm={kind!r}: must be one of layer_norm, rms_norm")


__all__ = ["RMSNorm", "make_norm"]
