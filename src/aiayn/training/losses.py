"""Label-smoothed cross-entropy (§5.4), summed over non-pad target tokens.

The trainer divides the summed loss of a whole update (all accumulated batches) by its number of
non-pad target tokens, so the loss is normalised per token as in the paper, whatever the batching.
Every count and sum here stays a tensor on the logits' device: reading one as a Python number
(int(), float(), .item()) would make the host wait for the GPU; the trainer reads them when it
logs, and takes the units it divides by from the batch, counted on the host (stream.host_units).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.autograd.function import once_differentiable

CHUNK_ELEMENTS = 1 << 20  # on a CPU the forward's exp works on blocks of ~4 MB, not all (N, V)


class _SmoothedCrossEntropy(torch.autograd.Function):
    """Per-row label-smoothed cross-entropy of logits (N, V), its plain NLL and the argmax, with
    the gradient written in one buffer from the saved logits and log-sum-exp:

        loss = lse - (1 - eps) * z[y] - eps * mean(z),   d loss / d z = softmax(z) - (1 - eps) * onehot(y) - eps / V

    The autograd graph of log_softmax -> gather -> mean (the same numbers, the reference in
    tests) allocates, writes and reads four (N, V) tensors more; at V = 8000 and ~2,000 tokens
    per batch each is 64 MB of fresh pages, and with the argmax for the accuracy that was ~10%
    of a CPU training step. Here the forward's exp works a block of rows at a time and the
    backward allocates only the gradient."""

    @staticmethod
    def forward(ctx, logits: Tensor, target: Tensor, eps: float):
        best, argmax = logits.max(dim=-1)  # (N,): the max for a stable exp, and the prediction
        lse = torch.empty_like(best)  # (N,)
        # On a CPU a block of rows at a time (fresh pages cost there); elsewhere one block: each
        # costs three kernel launches, and at V = 37,000 a 6,000-token batch would be 214 blocks
        rows = max(1, CHUNK_ELEMENTS // logits.shape[-1]) if logits.device.type == "cpu" \
            else max(1, logits.shape[0])
        for i in range(0, logits.shape[0], rows):  # exp(z - max), block by block
            block = torch.sub(logits[i:i + rows], best[i:i + rows].unsqueeze(-1)).exp_()
            torch.log(block.sum(-1), out=lse[i:i + rows])
        lse.add_(best)
        nll = lse - logits.gather(-1, target.unsqueeze(-1)).squeeze(-1)
        loss = torch.lerp(nll, lse - logits.mean(dim=-1), eps)  # (1 - eps) nll + eps smooth
        ctx.save_for_backward(logits, lse, target)
        ctx.eps = eps
        ctx.mark_non_differentiable(nll, argmax)
        return loss, nll, argmax

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_loss: Tensor, _nll: Tensor, _argmax: Tensor):
        logits, lse, target = ctx.saved_tensors
        eps = ctx.eps
        grad = torch.sub(logits, lse.unsqueeze(-1)).exp_().sub_(eps / logits.shape[-1])  # (N, V)
        grad.scatter_add_(-1, target.unsqueeze(-1), torch.full_like(lse, eps - 1.0).unsqueeze(-1))
        return grad.mul_(grad_loss.unsqueeze(-1)), None, None


def smoothed_cross_entropy(logits: Tensor, target: Tensor,
                           eps: float = 0.1) -> tuple[Tensor, Tensor, Tensor]:
    """logits (..., V), target (...) -> (label-smoothed loss, plain NLL, argmax), each (...), in
    fp32 whatever the logits' dtype; only the loss carries a gradient. The smoothed target as in
    `label_smoothed_nll`."""
    shape = target.shape
    rows, target = logits.float().reshape(-1, logits.shape[-1]), target.reshape(-1)
    if torch.compiler.is_compiling():  # the plain form: the compiler fuses it (no block loop)
        logp = rows.log_softmax(-1)
        nll = -logp.gather(-1, target.unsqueeze(-1)).squeeze(-1)
        loss, nll, argmax = torch.lerp(nll, -logp.mean(-1), eps), nll.detach(), rows.argmax(-1)
    else:
        loss, nll, argmax = _SmoothedCrossEntropy.apply(rows, target, float(eps))
    return loss.view(shape), nll.view(shape), argmax.view(shape)


def label_smoothed_nll(logits: Tensor, target: Tensor, eps: float = 0.1,
                       pad_id: int | None = 0) -> tuple[Tensor, Tensor, Tensor | int]:
    """§5.4 label smoothing with eps_ls = eps.

    logits (..., V), target (...) -> (loss_sum, nll_sum, n_tokens) over positions whose target is
    not `pad_id`. The smoothed target puts 1 - eps on the reference token and spreads eps
    uniformly over all V classes (so the reference gets 1 - eps + eps/V), the form of
    tensor2tensor and torch's `label_smoothing`:

        loss = (1 - eps) * -log p(y) + eps * mean_v(-log p(v))

    (fairseq spreads eps over the V - 1 other classes: the same loss to within eps / V.)
    `nll_sum` is the plain cross-entropy (for perplexity), also summed. `n_tokens` is a 0-dim
    tensor on the target's device (counted there, without a host sync), or the int
    target.numel() when pad_id is None.
    """
    loss, nll, _ = smoothed_cross_entropy(logits, target, eps)
    if pad_id is not None:
        keep = target != pad_id
        loss = loss.masked_fill(~keep, 0.0)
        nll = nll.masked_fill(~keep, 0.0)
        n_tokens = keep.sum()
    else:
        n_tokens = target.numel()
    return loss.sum(), nll.sum(), n_tokens


def classification_loss(logits: Tensor, labels: Tensor,
                        label_smoothing: float = 0.0) -> tuple[Tensor, int, dict[str, Tensor]]:
    """Class logits (B, C) and labels (B,) -> (cross-entropy summed over the batch, examples,
    {"accuracy": correct count, a 0-dim tensor}): the Trainer divides the sums by the example
    count."""
    loss = F.cross_entropy(logits.float(), labels, label_smoothing=label_smoothing, reduction="sum")
    return loss, len(labels), {"accuracy": (logits.argmax(-1) == labels).sum()}
