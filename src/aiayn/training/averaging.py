"""A running average of the weights, kept during training: what checkpoints and the folder hold.

§6.1 translates with "a single model obtained by averaging the last 5 checkpoints, which were
written at 10-minute intervals": weights from the last stretch of a run, averaged, make a better
model than the last of them. `aiayn average` does exactly that after a run. This module keeps
such an average while the run goes, so that every checkpoint holds one, not only the end of a run:

    avg_t = beta_t * avg_(t-1) + (1 - beta_t) * theta_t,    beta_t = (1 - 1/t) ** (gamma + 1)

the "power function EMA" of Karras et al. (2024, "Analyzing and Improving the Training Dynamics
of Diffusion Models", §3.1, eq. 3). After T updates it is sum_t w_t theta_t with
w_t = (t/T)^(gamma+1) - ((t-1)/T)^(gamma+1): the weights of the whole run under a profile that
grows as t^gamma, so its width scales with the run. `width` is that profile's standard deviation
as a fraction of T (their sigma_rel): 0.02 weighs mostly the last ~5% of the updates.

Where it departs from §6.1: a smooth window that grows with the run instead of 5 snapshots at
fixed times (a run of 600 updates and one of 100k both get a window of their size), and it is on
by default (train.average_width; 0 = the last update's weights, the paper's single checkpoint).
Training itself is unchanged: the optimizer updates the model's own weights, which the train state
keeps for an exact resume.
"""

from __future__ import annotations

import copy
import math

import torch
from torch import nn

# The widest average: sigma_rel of the profile t^gamma tends to 1 / sqrt(12) (a uniform average of
# the whole run) as gamma -> 0.
from aiayn.config.train import MAX_AVERAGE_WIDTH as MAX_WIDTH


def width_of(gamma: float) -> float:
    """sigma_rel of the power profile t^gamma (Karras et al. 2024, eq. 4)."""
    return math.sqrt(gamma + 1) / ((gamma + 2) * math.sqrt(gamma + 3))


def gamma_for(width: float) -> float:
    """The exponent gamma whose profile has relative width `width` (0 < width < 1/sqrt(12))."""
    if not 0 < width < MAX_WIDTH:
        raise ValueError(f"width must be in (0, {MAX_WIDTH:.4f}), got {width}")
    low, high = 0.0, 1.0
    while width_of(high) > width:  # width_of falls as gamma grows
        high *= 2
    for _ in range(200):
        mid = (low + high) / 2
        low, high = (mid, high) if width_of(mid) > width else (low, mid)
    return (low + high) / 2


class WeightAverage:
    """A copy of `model` whose floating-point parameters follow the power-function average of
    `model`'s after each update (`update(step)`)."""

    def __init__(self, model: nn.Module, width: float):
        self.width, self.gamma = width, gamma_for(width)
        self.model = copy.deepcopy(model).eval().requires_grad_(False)
        pairs = [(a, p) for a, p in zip(self.model.parameters(), model.parameters(), strict=True)
                 if p.is_floating_point()]
        self._avg = [a for a, _ in pairs]
        self._src = [p for _, p in pairs]
        self._source = model

    @torch.no_grad()
    def update(self, step: int) -> None:
        """Fold in the weights after update `step` (1, 2, ...): at step 1 the average is them."""
        beta = (1 - 1 / step) ** (self.gamma + 1)
        torch._foreach_lerp_(self._avg, self._src, 1 - beta)

    @torch.no_grad()
    def averaged(self) -> nn.Module:
        """The averaged model, its buffers (not trained: positions, masks) brought up to date."""
        for mine, theirs in zip(self.model.buffers(), self._source.buffers(), strict=True):
            mine.copy_(theirs)
        return self.model

    @torch.no_grad()
    def copy_to_model(self) -> None:
        """Give the followed model the averaged weights (at the end of training)."""
        for avg, p in zip(self._avg, self._src, strict=True):
            p.copy_(avg)


__all__ = ["MAX_WIDTH", "WeightAverage", "gamma_for", "width_of"]
