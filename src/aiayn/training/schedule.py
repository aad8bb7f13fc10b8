"""The optimizer and learning-rate schedules (§5.3).

The learning rate is a pure function of the step, recomputed and written into the optimizer
before every update: the step number is the whole schedule state, so a resumed run follows exactly
the same curve.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from aiayn.config.train import TrainConfig


def noam_lr(step: int, d_model: int, warmup: int) -> float:
    """§5.3: lrate = d_model^-0.5 * min(step^-0.5, step * warmup^-1.5), step counted from 1.

    It rises linearly for `warmup` steps, peaks at d_model^-0.5 * warmup^-0.5, then decays as
    step^-0.5.
    """
    step = max(step, 1)
    return d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)


def learning_rate(step: int, cfg: TrainConfig, d_model: int, elapsed: float | None = None) -> float:
    """The learning rate for update number `step` (1-based); `elapsed` (seconds of training)
    moves a cosine on with a max_minutes budget."""
    step = max(step, 1)
    warm = cfg.warmup_steps
    if cfg.lr_schedule == "noam":
        lr = noam_lr(step, d_model, warm)
        if cfg.lr is not None:  # the same shape, rescaled so that the peak equals cfg.lr
            lr *= cfg.lr / noam_lr(warm, d_model, warm)
        return lr * cfg.lr_scale
    peak = cfg.lr * cfg.lr_scale
    if warm and step < warm:
        return peak * step / warm
    if cfg.lr_schedule == "constant":
        return peak
    # "cosine": from the peak at the end of warmup down to min_lr at max_steps, or at the end of
    # the time budget when that comes first (the warmup counted in steps either way).
    progress = min(1.0, (step - warm) / max(1, cfg.max_steps - warm))
    if cfg.max_minutes is not None and elapsed is not None:
        progress = max(progress, min(1.0, elapsed / (cfg.max_minutes * 60)))
    return cfg.min_lr + (peak - cfg.min_lr) * 0.5 * (1.0 + math.cos(math.pi * progress))


def make_optimizer(model: nn.Module, cfg: TrainConfig,
                   device: torch.device | str = "cpu") -> torch.optim.Optimizer:
    """§5.3: Adam(beta1 = 0.9, beta2 = 0.98, eps = 1e-9); AdamW when weight_decay > 0.

    On a GPU the fused kernel. The CPU keeps the default kernel: the fused one makes the step
    3.5x faster there (7.6M parameters, ~3% of a training step), but rounds differently, and
    every CPU result in this project (tests and benchmarks) was measured with the default.

    Weight decay (not in the paper) skips biases and LayerNorm gains, and embeddings unless
    decay_embeddings is set.
    """
    betas = (cfg.adam_beta1, cfg.adam_beta2)
    fused = torch.device(device).type == "cuda"
    params = [p for p in model.parameters() if p.requires_grad]
    if cfg.weight_decay == 0:
        return _fused(torch.optim.Adam, params, fused, lr=0.0, betas=betas, eps=cfg.adam_eps)
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if p.requires_grad:
            matrix = p.dim() >= 2 and (cfg.decay_embeddings or "embed" not in name)
            (decay if matrix else no_decay).append(p)
    groups = [{"params": decay, "weight_decay": cfg.weight_decay},
              {"params": no_decay, "weight_decay": 0.0}]
    return _fused(torch.optim.AdamW, groups, fused, lr=0.0, betas=betas, eps=cfg.adam_eps)


def _fused(cls: type[torch.optim.Optimizer], params, fused: bool, **kw) -> torch.optim.Optimizer:
    """The optimizer with its fused kernel (one pass over all parameters) when `fused`, or its
    default one where the parameters' device or dtype has none."""
    if fused:
        try:
            return cls(params, fused=True, **kw)
        except (RuntimeError, ValueError):
            pass
    return cls(params, **kw)


def set_lr(optimizer: torch.optim.Optimizer, lr: float) -> None:
    for group in optimizer.param_groups:
        group["lr"] = lr
