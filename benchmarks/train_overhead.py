"""The Trainer's cost per update: Trainer.fit beside a bare loop over the same batches, model,
loss and optimizer, interleaved in one process (issue 38: the trainer's updates/s >= 0.9x the
bare loop's on a tiny model, where any per-update overhead shows most).

    python benchmarks/train_overhead.py                   # 7 rounds of 200 updates each way
    python benchmarks/train_overhead.py --rounds 3 --updates 50 --d-model 64

Both start from the same weights (one seed) and take the same collated batches (a fixed list, one
epoch of them, reshuffled per epoch by the stream's plan in both) and the same optimizer
(schedule.make_optimizer) with the same learning rate per step; both divide the gradients by the
update's target tokens (§5.4). The bare loop is the ceiling: its batches collated before its clock
starts, then zero_grad, forward + loss, backward, divide, step; it reads nothing from the device. The trainer adds what
`aiayn train` does per update: its batch thread (train.prefetch), a boundary mark for
resume, the running weight average (train.average_width, on by default), the window of sums read
every log_every updates. Timed: from the start of the trainer's first update (after `--warmup`
updates) to the end of its last, so neither the folder's setup nor the final save counts.
Rounds alternate which goes first; printed: each round's ratio, their median and spread.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import tempfile
import time

import torch

from aiayn import Transformer, preset
from aiayn.config import TrainConfig
from aiayn.data.batching import collate
from aiayn.training.losses import label_smoothed_nll
from aiayn.training.schedule import learning_rate, make_optimizer, set_lr
from aiayn.training.stream import BatchStream
from aiayn.training.trainer import Trainer, seed_everything

PAD = 0


def loss_fn(model, batch):
    loss, nll, n = label_smoothed_nll(model(batch.src, batch.tgt_in), batch.tgt_out, 0.1, PAD)
    return loss, n, {"nll": nll}


def make_stream(n_batches: int, batch: int, vocab: int, seed: int = 0) -> BatchStream:
    """A copy task's batches: sequences of 6 to 16 tokens, the epoch's order from seed + epoch."""
    g = torch.Generator().manual_seed(seed)
    seqs = [torch.randint(4, vocab, (int(k),), generator=g).tolist()
            for k in torch.randint(6, 17, (n_batches * batch,), generator=g)]

    def plan(epoch: int) -> list[list[int]]:
        order = torch.randperm(len(seqs), generator=torch.Generator().manual_seed(seed + epoch))
        return [order[i:i + batch].tolist() for i in range(0, len(seqs), batch)]

    return BatchStream(plan, lambda idx: collate([(seqs[i], seqs[i]) for i in idx], PAD))


def make_model(args) -> Transformer:
    seed_everything(0)
    return Transformer(preset("tiny", vocab_size=args.vocab, d_model=args.d_model,
                              d_ff=4 * args.d_model, n_layers=args.layers, dropout=0.1))


def config(args, steps: int) -> TrainConfig:
    return TrainConfig(max_steps=steps, lr=1e-3, warmup_steps=10, eval_every=0, save_every=0,
                       log_every=args.log_every, tensorboard=False, progress=False,
                       threads=args.threads, precision="fp32", device="cpu",
                       average_width=args.average_width, prefetch=args.prefetch)


def time_trainer(args, folder: str) -> float:
    """Updates per second of Trainer.fit, after `warmup` updates."""
    steps = args.warmup + args.updates
    trainer = Trainer(make_model(args), config(args, steps), make_stream(args.batches, args.batch,
                      args.vocab), loss_fn, folder, family="transformer")
    update, marks = trainer._update, {}

    def timed():
        if trainer.step == args.warmup:
            marks["start"] = time.perf_counter()
        result = update()
        marks["end"] = time.perf_counter()
        return result

    trainer._update = timed
    trainer.fit()
    return args.updates / (marks["end"] - marks["start"])


def time_bare(args) -> float:
    """Updates per second of the hand-written loop over the same batches, model and optimizer."""
    cfg = config(args, args.warmup + args.updates)
    model = make_model(args)
    stream = make_stream(args.batches, args.batch, args.vocab)
    batches = [next(stream) for _ in range(args.warmup + args.updates)]  # built before the clock
    optimizer = make_optimizer(model, cfg, "cpu")
    threads = torch.get_num_threads()
    torch.set_num_threads(args.threads)
    model.train()
    start = 0.0
    try:
        for step, batch in enumerate(batches):
            if step == args.warmup:
                start = time.perf_counter()
            optimizer.zero_grad(set_to_none=True)
            loss, _, _ = loss_fn(model, batch)
            loss.backward()
            for p in model.parameters():  # §5.4: per token (counted on the host)
                p.grad.div_(batch.tgt_count)
            set_lr(optimizer, learning_rate(step + 1, cfg, args.d_model))
            optimizer.step()
    finally:
        torch.set_num_threads(threads)
    return args.updates / (time.perf_counter() - start)


def spread(values: list[float]) -> str:
    return f"median {statistics.median(values):.3f} (min {min(values):.3f}, max {max(values):.3f})"


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--updates", type=int, default=200, help="timed updates per run")
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--d-model", type=int, default=32)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=64)
    ap.add_argument("--batch", type=int, default=32, help="sequences per batch")
    ap.add_argument("--batches", type=int, default=16, help="batches per epoch")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--log-every", type=int, default=50)
    ap.add_argument("--average-width", type=float, default=TrainConfig.average_width)
    ap.add_argument("--prefetch", type=int, default=TrainConfig.prefetch)
    args = ap.parse_args(argv)
    print(f"torch {torch.__version__} | {platform.processor() or platform.machine()} | "
          f"d_model {args.d_model}, {args.layers}+{args.layers} layers, {args.batch} sequences "
          f"a batch | {args.threads} thread(s) | prefetch {args.prefetch}", flush=True)
    trainer, bare, ratios = [], [], []
    for r in range(args.rounds):
        with tempfile.TemporaryDirectory() as folder:
            if r % 2 == 0:
                t, b = time_trainer(args, folder), time_bare(args)
            else:
                b, t = time_bare(args), time_trainer(args, folder)
        trainer.append(t)
        bare.append(b)
        ratios.append(t / b)
        print(f"round {r + 1}: trainer {t:.1f} updates/s, bare loop {b:.1f}, ratio {t / b:.3f}",
              flush=True)
    print(f"trainer updates/s {spread(trainer)}")
    print(f"bare loop updates/s {spread(bare)}")
    print(f"ratio trainer / bare {spread(ratios)}")
    return {"trainer": trainer, "bare": bare, "ratios": ratios}


if __name__ == "__main__":
    main()
