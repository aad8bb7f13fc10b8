"""BERT's masked-LM corruption (Devlin et al. 2019, §3.1 "Task #1: Masked LM").

Each ordinary token is chosen for prediction with probability ``rate`` (15%). A chosen token is
replaced by [MASK] 80% of the time, by a random token 10% of the time, and left as it is 10% of
the time; only chosen positions carry a label, so only they contribute to the loss (the others
hold IGNORE_INDEX, which ``aiayn.models.encoder.mlm_loss`` skips). Special tokens (padding,
[CLS], [SEP], ...) are never chosen.

Departure: BERT draws the random replacement from the whole vocabulary; here it is drawn from
the ordinary (non-special) tokens, so the model is never shown a stray [CLS] or padding id.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import Tensor

# The label of positions that carry no prediction: torch's cross_entropy skips it by default
# (ignore_index=-100), and so does aiayn.models.encoder.mlm_loss.
IGNORE_INDEX = -100


def mask_tokens(ids: Tensor, mask_id: int, vocab_size: int, special_ids: Iterable[int],
                generator: torch.Generator | None = None, rate: float = 0.15,
                mask_frac: float = 0.8, random_frac: float = 0.1) -> tuple[Tensor, Tensor]:
    """ids (B, T) -> (corrupted inputs (B, T), labels (B, T): the original id where chosen,
    IGNORE_INDEX elsewhere). ``ids`` is not modified."""
    if not 0.0 <= rate <= 1.0 or mask_frac < 0 or random_frac < 0 or mask_frac + random_frac > 1.0:
        raise ValueError(f"masking rates rate={rate}, mask_frac={mask_frac}, random_frac={random_frac} "
                         "must be in [0, 1] with mask_frac + random_frac <= 1")
    special = torch.tensor(sorted(set(special_ids) | {mask_id}), dtype=ids.dtype, device=ids.device)
    ordinary = ~torch.isin(ids, special)
    u = torch.rand(ids.shape, generator=generator, device=ids.device)
    chosen = ordinary & (u < rate)
    labels = torch.where(chosen, ids, torch.full_like(ids, IGNORE_INDEX))
    # One more uniform draw decides what a chosen token becomes: [0, mask) -> [MASK],
    # [mask, mask + random) -> a random ordinary token, the rest -> unchanged.
    v = torch.rand(ids.shape, generator=generator, device=ids.device)
    to_mask = chosen & (v < mask_frac)
    to_random = chosen & (v >= mask_frac) & (v < mask_frac + random_frac)
    candidates = _ordinary_ids(vocab_size, special)
    picks = candidates[torch.randint(len(candidates), ids.shape, generator=generator, device=ids.device)]
    inputs = torch.where(to_mask, torch.full_like(ids, mask_id), ids)
    inputs = torch.where(to_random, picks.to(ids.dtype), inputs)
    return inputs, labels


def _ordinary_ids(vocab_size: int, special: Tensor) -> Tensor:
    everything = torch.arange(vocab_size, device=special.device)
    ordinary = everything[~torch.isin(everything, special.to(everything.dtype))]
    if len(ordinary) == 0:
        raise ValueError(f"vocab_size={vocab_size}: no ordinary token to draw random replacements from")
    return ordinary


__all__ = ["IGNORE_INDEX", "mask_tokens"]
