"""The seq2seq task's loss (§5.4): label-smoothed cross-entropy over the target tokens, as
aiayn.tasks.seq2seq trains and validates with it, and as the benchmarks time an update.

    loss_fn = seq2seq_loss(0.1)
    loss, n_tokens, sums = loss_fn(model, batch)   # summed loss; sums: {"nll", "accuracy"}

With `rdrop` > 0 (not in the paper; R-Drop, Liang et al. 2021, "R-Drop: Regularized Dropout for
Neural Networks", NeurIPS) a model in training mode reads each batch twice, under two dropout
masks, and the loss per target token is the mean of the two label-smoothed cross-entropies plus
rdrop / 4 x the symmetric KL divergence of the two predictions: the paper's CE1 + CE2 +
alpha / 2 (KL(P1||P2) + KL(P2||P1)), halved, so that the loss and NLL stay per token. An update
costs about twice the compute. In evaluation mode (validation) the model reads it once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn

from aiayn.data.batching import Batch
from aiayn.training.losses import smoothed_cross_entropy


def seq2seq_loss(eps: float, counted_once: Sequence[int] = (), rdrop: float = 0.0
                 ) -> Callable[[nn.Module, Batch], tuple[torch.Tensor, Any, dict]]:
    """§5.4 label-smoothed cross-entropy, summed over non-pad target tokens. `counted_once`: ids
    left out of the softmax, whose row another id repeats (an imported T5's or Marian's <pad>,
    also its <s>: hf_original.repeated_ids): the original's own loss. None for aiayn's models.
    `rdrop`: R-Drop's alpha (the module's docstring), 0 = off.
    No host sync, one graph for torch.compile: only the rows at Batch.tgt_index (found on the
    host) are projected, else (Batch.padded) all, the padding masked; the accuracy a tensor."""
    kept: dict = {}  # (V, device) -> ((V',) the other columns, (V,) their new ids)

    def scores(model: nn.Module, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        """(N, V) logits and (N,) targets: the non-pad rows (Batch.tgt_index), else every one."""
        target = batch.tgt_out.reshape(-1)  # (B*T,)
        if batch.tgt_index is not None:  # (N, V): the non-pad targets' rows alone
            width, index = batch.tgt_out.shape[1], batch.tgt_index
            logits = model(batch.src, batch.tgt_in, select=(index // width, index % width))
            target = target[index]
        else:  # (B*T, V): every position, the padding masked by the caller
            logits = model(batch.src, batch.tgt_in).flatten(0, 1)
        if counted_once:  # (N, V') the other columns; the targets (never those ids) renumbered
            key = (logits.shape[-1], logits.device)
            if key not in kept:  # built once: no host sync per batch
                others = [i for i in range(key[0]) if i not in counted_once]
                renumber = torch.zeros(key[0], dtype=torch.long)
                renumber[others] = torch.arange(len(others))
                kept[key] = (torch.tensor(others, device=key[1]), renumber.to(key[1]))
            logits, target = logits[:, kept[key][0]], kept[key][1][target]
        return logits, target

    def loss_fn(model: nn.Module, batch: Batch):
        logits, target = scores(model, batch)
        # in fp32 whatever the autocast dtype; the prediction for the accuracy comes with it
        loss, nll, predicted = smoothed_cross_entropy(logits, target, eps)
        if rdrop and model.training:  # R-Drop: a second read under other dropout masks
            again, _ = scores(model, batch)
            loss2, nll2, _ = smoothed_cross_entropy(again, target, eps)
            p, q = logits.float().log_softmax(-1), again.float().log_softmax(-1)
            kl = ((p.exp() - q.exp()) * (p - q)).sum(-1)  # KL(P||Q) + KL(Q||P), per row
            loss, nll = (loss + loss2) / 2 + rdrop / 4 * kl, (nll + nll2) / 2
        hit = predicted == target
        if batch.tgt_index is not None:
            return loss.sum(), len(target), {"nll": nll.sum(), "accuracy": hit.sum()}
        keep = batch.tgt_out.reshape(-1) != batch.pad_id
        return ((loss * keep).sum(), keep.sum(),
                {"nll": (nll * keep).sum(), "accuracy": (hit & keep).sum()})

    return loss_fn


__all__ = ["seq2seq_loss"]
