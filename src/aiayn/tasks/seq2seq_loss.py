"""The seq2seq task's loss (§5.4): label-smoothed cross-entropy over the target tokens, as
aiayn.tasks.seq2seq trains and validates with it, and as the benchmarks time an update.

    loss_fn = seq2seq_loss(0.1)
    loss, n_tokens, sums = loss_fn(model, batch)   # summed loss; sums: {"nll", "accuracy"}
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn

from aiayn.data.batching import Batch
from aiayn.training.losses import smoothed_cross_entropy


def seq2seq_loss(eps: float, counted_once: Sequence[int] = ()
                 ) -> Callable[[nn.Module, Batch], tuple[torch.Tensor, Any, dict]]:
    """§5.4 label-smoothed cross-entropy, summed over non-pad target tokens. `counted_once`: ids
    left out of the softmax, whose row another id repeats (an imported T5's or Marian's <pad>,
    also its <s>: hf_original.repeated_ids): the original's own loss. None for aiayn's models.
    No host sync, one graph for torch.compile: only the rows at Batch.tgt_index (found on the
    host) are projected, else (Batch.padded) all, the padding masked; the accuracy a tensor."""
    kept: dict = {}  # (V, device) -> ((V',) the other columns, (V,) their new ids)

    def loss_fn(model: nn.Module, batch: Batch):
        target = batch.tgt_out.reshape(-1)  # (B*T,)
        keep = None if batch.tgt_index is not None else target != batch.pad_id
        if keep is None:  # (N, V): the non-pad targets' rows alone
            width, index = batch.tgt_out.shape[1], batch.tgt_index
            logits = model(batch.src, batch.tgt_in, select=(index // width, index % width))
            target = target[index]
        else:  # (B*T, V): every position, the padding masked below
            logits = model(batch.src, batch.tgt_in).flatten(0, 1)
        if counted_once:  # (N, V') the other columns; the targets (never those ids) renumbered
            key = (logits.shape[-1], logits.device)
            if key not in kept:  # built once: no host sync per batch
                others = [i for i in range(key[0]) if i not in counted_once]
                renumber = torch.zeros(key[0], dtype=torch.long)
                renumber[others] = torch.arange(len(others))
                kept[key] = (torch.tensor(others, device=key[1]), renumber.to(key[1]))
            logits, target = logits[:, kept[key][0]], kept[key][1][target]
        # in fp32 whatever the autocast dtype; the prediction for the accuracy comes with it
        loss, nll, predicted = smoothed_cross_entropy(logits, target, eps)
        hit = predicted == target
        if keep is None:
            return loss.sum(), len(target), {"nll": nll.sum(), "accuracy": hit.sum()}
        return ((loss * keep).sum(), keep.sum(),
                {"nll": (nll * keep).sum(), "accuracy": (hit & keep).sum()})

    return loss_fn


__all__ = ["seq2seq_loss"]
