"""Sampling filters: pure functions from logits to logits, and one sampler that applies them.

Every filter takes logits (..., V) and returns new logits of the same shape, with the tokens it
rules out set to -inf. Each one keeps at least one token per row, so a softmax over its output is
always finite (no row is ever fully masked, the case where -inf would turn into NaN).

Order in ``sample``: temperature, then top-k, then top-p (the order of HF transformers and
nanoGPT), then a draw from the softmax. Temperature 0 means greedy (argmax, no randomness).
"""

from __future__ import annotations

import torch
from torch import Tensor

from aiayn.errors import ConfigError


def check_options(t: float = 1.0, k: int | None = None, p: float | None = None) -> None:
    """ValueError (ConfigError) for a setting no filter accepts (t < 0, k < 1, p outside (0, 1])."""
    if t < 0:
        raise ConfigError(f"temperature={t}: must be >= 0 (0 = greedy)")
    if k is not None and k <= 0:
        raise ConfigError(f"top_k={k}: must be a positive integer")
    if p is not None and not 0 < p <= 1:
        raise ConfigError(f"top_p={p}: must be in (0, 1]")


def temperature(logits: Tensor, t: float) -> Tensor:
    """logits / t. t < 1 sharpens the distribution, t > 1 flattens it; t must be > 0."""
    if t <= 0:
        raise ConfigError(f"temperature={t}: must be positive (use 0 only for greedy decoding)")
    return logits / t


def top_k(logits: Tensor, k: int) -> Tensor:
    """Keep exactly the k highest logits of each row (exactly k even when values tie at the
    boundary: torch.topk picks k indices), set the rest to -inf. k >= V keeps everything."""
    if k <= 0:
        raise ConfigError(f"top_k={k}: must be a positive integer")
    if k >= logits.shape[-1]:
        return logits
    kept = torch.topk(logits, k, dim=-1).indices
    out = torch.full_like(logits, float("-inf"))
    return out.scatter(-1, kept, logits.gather(-1, kept))


def top_p(logits: Tensor, p: float) -> Tensor:
    """Nucleus filter (Holtzman et al. 2020): keep the smallest set of most probable tokens whose
    total probability reaches p (>= p), set the rest to -inf. p = 1 keeps every token."""
    if not 0 < p <= 1:
        raise ConfigError(f"top_p={p}: must be in (0, 1]")
    if p == 1:
        return logits
    sorted_logits, order = torch.sort(logits, dim=-1, descending=True, stable=True)
    probs = torch.softmax(sorted_logits.float(), dim=-1)
    # The total before each token: a token is needed while the tokens above it sum to less than
    # p. The first token's is 0, so every row keeps at least one.
    before = torch.cumsum(probs, dim=-1) - probs
    keep_sorted = before < p
    keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
    return logits.masked_fill(~keep, float("-inf"))


def filter_logits(logits: Tensor, t: float = 1.0, k: int | None = None,
                  p: float | None = None) -> Tensor:
    """Temperature, then top-k (when k is set), then top-p (when p is set)."""
    logits = temperature(logits, t)
    if k is not None:
        logits = top_k(logits, k)
    if p is not None:
        logits = top_p(logits, p)
    return logits


def sample(logits: Tensor, t: float = 1.0, k: int | None = None, p: float | None = None,
           generator: torch.Generator | None = None) -> Tensor:
    """logits (B, V) -> token ids (B,). t = 0: greedy argmax. Otherwise one draw from
    softmax(filter_logits(logits)), reproducible when `generator` is seeded."""
    if t == 0:
        return logits.argmax(dim=-1)
    probs = torch.softmax(filter_logits(logits, t, k, p).float(), dim=-1)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


__all__ = ["check_options", "filter_logits", "sample", "temperature", "top_k", "top_p"]
