"""One CPU training step of the gettext-small Transformer, aiayn's loss and dropout against the
textbook ones, interleaved in one process.

    python benchmarks/cpu_train_step.py                 # 8 rounds of 4 steps each way
    python benchmarks/cpu_train_step.py --rounds 4 --threads 1

"textbook": the label-smoothed loss as the autograd graph log_softmax -> gather -> mean (+ an
argmax for the accuracy) and torch's F.dropout (bernoulli_ masks), what aiayn ran before issue
11's training-step work and what fairseq runs. "aiayn": `smoothed_cross_entropy` (one autograd
function) and `aiayn.nn.dropout` (15-bit masks). Same model, weights, batch and optimizer; only
those two pieces are switched, so the ratio is theirs. Prints the median step time of each and
the per-round ratios (rounds alternate which goes first).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch
import torch.nn.functional as F

import aiayn.nn.dropout  # noqa: F401  (the module, reached through sys.modules below)
from aiayn.config import TransformerConfig
from aiayn.models.transformer import Transformer
from aiayn.training.losses import smoothed_cross_entropy

DROPOUT = sys.modules["aiayn.nn.dropout"]  # aiayn.nn exports the class Dropout, not the module
FAST_DROPOUT = DROPOUT.dropout


def textbook_loss(logits, target, eps):
    logp = F.log_softmax(logits.float(), dim=-1)
    nll = -logp.gather(-1, target.unsqueeze(-1)).squeeze(-1)
    return (1 - eps) * nll - eps * logp.mean(-1), nll.detach(), logits.argmax(-1)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--steps", type=int, default=4, help="steps per round and way")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    # the gettext-small shape (vs_fairseq.py's recipe) and a batch of its size: ~2,000 target
    # tokens of 160 sentences, vocabulary 8000
    cfg = TransformerConfig(vocab_size=8000, d_model=256, n_heads=4, d_ff=1024,
                            n_encoder_layers=3, n_decoder_layers=3, dropout=0.1, max_len=160)
    model = Transformer(cfg).train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)
    src = torch.randint(4, 8000, (160, 12))
    tgt_in, tgt_out = torch.randint(4, 8000, (160, 13)), torch.randint(4, 8000, (160, 13))
    keep = tgt_out != cfg.pad_id

    def step(ours: bool) -> None:
        DROPOUT.dropout = FAST_DROPOUT if ours else (
            lambda x, p, training=True: F.dropout(x, p, training))
        loss_fn = smoothed_cross_entropy if ours else textbook_loss
        loss, _, _ = loss_fn(model(src, tgt_in, select=keep), tgt_out[keep], 0.1)
        opt.zero_grad()
        (loss.sum() / keep.sum()).backward()
        opt.step()

    times: dict[bool, list[float]] = {False: [], True: []}
    for ours in (False, True):  # warm up both
        step(ours)
    for r in range(args.rounds):
        for ours in ((False, True) if r % 2 == 0 else (True, False)):
            start = time.perf_counter()
            for _ in range(args.steps):
                step(ours)
            times[ours].append((time.perf_counter() - start) / args.steps)
    DROPOUT.dropout = FAST_DROPOUT
    old, new = statistics.median(times[False]), statistics.median(times[True])
    ms = {k: [round(t * 1e3) for t in v] for k, v in times.items()}
    print(f"textbook loss + F.dropout: {old * 1e3:.0f} ms per step "
          f"({min(ms[False])}-{max(ms[False])})")
    print(f"aiayn loss + dropout:      {new * 1e3:.0f} ms per step ({min(ms[True])}-{max(ms[True])})")
    ratios = [round(a / b, 3) for a, b in zip(times[False], times[True], strict=True)]
    print(f"speed-up {old / new:.3f}x (median); per round {ratios}")
    return {"textbook_ms": old * 1e3, "aiayn_ms": new * 1e3, "ratios": ratios}


if __name__ == "__main__":
    main()
