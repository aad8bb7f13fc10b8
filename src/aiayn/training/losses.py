"""Label-smoothed cross-entropy (§5.4), summed over non-pad target tokens.

The trainer divides the summed loss of a whole update (all accumulated batches) by its number of
non-pad target tokens, so the loss is normalised per token as in the paper, whatever the batching.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def label_smoothed_nll(logits: Tensor, target: Tensor, eps: float = 0.1,
                       pad_id: int | None = 0) -> tuple[Tensor, Tensor, int]:
    """§5.4 label smoothing with eps_ls = eps.

    logits (..., V), target (...) -> (loss_sum, nll_sum, n_tokens) over positions whose target is
    not `pad_id`. The smoothed target puts 1 - eps on the reference token and spreads eps
    uniformly over all V classes (so the reference gets 1 - eps + eps/V), the form of
    tensor2tensor and torch's `label_smoothing`:

        loss = (1 - eps) * -log p(y) + eps * mean_v(-log p(v))

    `nll_sum` is the plain cross-entropy (for perplexity), also summed.
    """
    logp = F.log_softmax(logits.float(), dim=-1)  # (..., V), in fp32 whatever the model dtype
    nll = -logp.gather(-1, target.unsqueeze(-1)).squeeze(-1)  # (...)
    smooth = -logp.mean(dim=-1)  # (...)
    loss = (1.0 - eps) * nll + eps * smooth
    if pad_id is not None:
        keep = target != pad_id
        loss = loss.masked_fill(~keep, 0.0)
        nll = nll.masked_fill(~keep, 0.0)
        n_tokens = int(keep.sum())
    else:
        n_tokens = target.numel()
    return loss.sum(), nll.sum().detach(), n_tokens


def token_accuracy(logits: Tensor, target: Tensor, pad_id: int | None = 0) -> tuple[int, int]:
    """(correct, total) argmax predictions over non-pad target positions."""
    with torch.no_grad():
        hit = logits.argmax(-1) == target
        if pad_id is not None:
            keep = target != pad_id
            return int((hit & keep).sum()), int(keep.sum())
        return int(hit.sum()), target.numel()


def classification_loss(logits: Tensor, labels: Tensor,
                        label_smoothing: float = 0.0) -> tuple[Tensor, int, dict[str, int]]:
    """Class logits (B, C) and labels (B,) -> (cross-entropy summed over the batch, examples,
    {"accuracy": correct count}): the Trainer divides the sums by the example count."""
    loss = F.cross_entropy(logits.float(), labels, label_smoothing=label_smoothing, reduction="sum")
    return loss, len(labels), {"accuracy": int((logits.argmax(-1) == labels).sum())}
