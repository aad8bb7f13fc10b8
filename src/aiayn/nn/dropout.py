"""Dropout (§5.4: P_drop on each sub-layer output and on the embedding sums; also on attention
probabilities where a model asks for it), with a faster mask on the CPU.

On the CPU, torch draws dropout masks with `bernoulli_`, one double-precision uniform per
element: at the CPU-sized recipe (17 dropouts of ~2,000 x 256 per step) that is ~6% of a training
step, more than the layer norms and the optimizer together. Here the mask comes from 15 random
bits per element instead (`random_` on int64 gives 63 uniform bits, read as four 15-bit levels),
~4x faster, from the same generator: `torch.manual_seed` fixes it, and the trainer's saved RNG
state resumes it.

Where this departs from torch: the drop probability is rounded to a multiple of 1/32768 (0.1
becomes 0.0999756), and kept values are scaled by 1 / (1 - that rounded p), so the expectation is
exact. Elsewhere (CUDA, where the fused kernel is fast; under torch.compile; p of 1) it is
`F.dropout`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.autograd.function import once_differentiable

LEVELS = 1 << 15  # random levels per element: the resolution of p


def keep_mask(shape: torch.Size, p: float, device: torch.device | str = "cpu") -> tuple[Tensor, float]:
    """A boolean mask of `shape`, each element True with probability 1 - p' where p' is p rounded
    to a multiple of 1/32768, and the scale 1 / (1 - p') for kept values."""
    dropped = round(p * LEVELS)
    n = shape.numel()
    # random_() on int64 draws uniformly from 0 .. 2**63 - 1: of each value's four 16-bit parts,
    # the top one has its sign bit clear, so every part keeps its low 15 bits (whatever the
    # byte order)
    bits = torch.empty((n + 3) // 4, dtype=torch.int64, device=device).random_()
    level = bits.view(torch.int16).bitwise_and_(LEVELS - 1)[:n].view(shape)  # 0 .. 32767
    return level >= dropped, LEVELS / (LEVELS - dropped)


class _MaskedScale(torch.autograd.Function):
    """x * keep * scale; saves the boolean mask (1 byte per element) for the backward."""

    @staticmethod
    def forward(ctx, x: Tensor, keep: Tensor, scale: float) -> Tensor:
        ctx.save_for_backward(keep)
        ctx.scale = scale
        return torch.where(keep, x, 0.0).mul_(scale)  # (x.mul(keep) is 4x slower: it casts)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: Tensor):
        (keep,) = ctx.saved_tensors
        return torch.where(keep, grad, 0.0).mul_(ctx.scale), None, None


def dropout(x: Tensor, p: float, training: bool = True) -> Tensor:
    """F.dropout(x, p, training), with the 15-bit mask on the CPU (see the module docstring)."""
    if not training or p == 0.0:
        return x
    if x.device.type != "cpu" or p >= 1.0 or torch.compiler.is_compiling():
        return F.dropout(x, p, True)  # (compiled, the compiler fuses its own masks)
    keep, scale = keep_mask(x.shape, p, x.device)
    return _MaskedScale.apply(x, keep, scale)


class Dropout(nn.Module):
    """nn.Dropout(p) through `dropout` above (same state dict: none)."""

    def __init__(self, p: float = 0.5):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p

    def forward(self, x: Tensor) -> Tensor:
        return dropout(x, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}"
