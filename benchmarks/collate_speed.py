"""Building a training batch on the host (issue 38): collate() over Python lists beside
PackedPairs.collate (the training stream's, data/batching.py), interleaved in one process.

    python benchmarks/collate_speed.py                   # 7 rounds, batches of 1.5k to 50k tokens
    python benchmarks/collate_speed.py --rounds 3 --threads 2

The batch thread (training/stream.py) builds every batch while the main thread launches the
model's kernels; both run Python under one interpreter lock, so on a GPU the time a batch takes
to build is time the kernels are not launched. The pairs: --pairs random (source, target) id
lists of 1 to 40 tokens (the §5.1 buckets cut from them by token_batches, as training cuts them:
the demo's 1,500 tokens, gettext-small's 4,000, the base config's 50,000), the same batches for
both; each round times one pass over --batches of them per size, the two ways in alternating
order. Printed: each size's per-batch milliseconds, median (min, max) over the rounds, and the
median of the per-round ratios list / packed, and what planning an epoch (token_batches: the
shuffle, the sort by length, the cuts) costs per batch it gives.
"""

from __future__ import annotations

import argparse
import platform
import random
import statistics
import time

import numpy as np
import torch

from aiayn.data.batching import PackedPairs, collate, token_batches

SIZES = (1500, 4000, 50000)  # demo, gettext-small, transformer-base (tokens a batch)


def timed(build, batches) -> float:
    """Milliseconds a batch."""
    start = time.perf_counter()
    for b in batches:
        build(b)
    return (time.perf_counter() - start) / len(batches) * 1e3


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})"


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--pairs", type=int, default=40000)
    ap.add_argument("--batches", type=int, default=20, help="batches timed per size and round")
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    ap.add_argument("--sizes", type=int, nargs="*", default=list(SIZES))
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    rng = random.Random(0)
    pairs = [([rng.randint(4, 7999) for _ in range(rng.randint(1, 40))],
              [rng.randint(4, 7999) for _ in range(rng.randint(1, 40))])
             for _ in range(args.pairs)]
    start = time.perf_counter()
    packed = PackedPairs(pairs)
    packing_s = time.perf_counter() - start
    lengths = [(len(s), len(t) + 1) for s, t in pairs]
    cuts = {n: token_batches(lengths, n, True, 0)[:args.batches] for n in args.sizes}
    print(f"torch {torch.__version__} | {platform.processor() or platform.machine()} | "
          f"{args.threads} thread(s) | {args.pairs:,} pairs packed once in {packing_s:.2f} s",
          flush=True)
    ways = {"list": lambda b: collate([pairs[i] for i in b]), "packed": packed.collate}
    ms: dict[int, dict[str, list[float]]] = {n: {w: [] for w in ways} for n in args.sizes}
    for r in range(args.rounds):
        order = list(ways) if r % 2 == 0 else list(ways)[::-1]
        for n in args.sizes:
            for way in order:
                ms[n][way].append(timed(ways[way], cuts[n]))
    plan_ms = {n: [] for n in args.sizes}  # an epoch's token_batches, per batch it gives
    size = np.array(lengths, dtype=np.int64)
    for r in range(args.rounds):
        for n in args.sizes:
            start = time.perf_counter()
            cut = token_batches(size, n, True, r)
            plan_ms[n].append((time.perf_counter() - start) / len(cut) * 1e3)
    out = {}
    for n in args.sizes:
        ratios = [a / b for a, b in zip(ms[n]["list"], ms[n]["packed"], strict=True)]
        pairs_per = statistics.mean(len(b) for b in cuts[n])
        print(f"{n:>6,} tokens ({pairs_per:,.0f} pairs) a batch: list {spread(ms[n]['list'])} ms, "
              f"packed {spread(ms[n]['packed'])} ms, list / packed {spread(ratios)}; "
              f"the epoch's plan {spread(plan_ms[n])} ms a batch")
        out[n] = {**ms[n], "ratios": ratios, "plan": plan_ms[n]}
    return out


if __name__ == "__main__":
    main()
