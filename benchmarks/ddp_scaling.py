"""Data-parallel scaling: training tokens/s of 1 process and of N processes under torchrun.

Runs the real command line (`aiayn train CONFIG`, or `torchrun --nproc_per_node=N -m aiayn train
CONFIG`) for a fixed number of updates and reads the training throughput the run logs itself
(DIR/metrics.jsonl: target tokens per second, summed over processes; the first logged window,
which holds start-up, is dropped). Reported per setting: median tokens/s over the repeats and its
spread, and the scaling efficiency tokens/s(N processes) / (N x tokens/s(1 process, 1 thread)).
A third setting, one process with N threads, is what a user would run instead of N processes.
The settings are interleaved within each repeat, so a busy machine slows all of them alike.

    python benchmarks/ddp_scaling.py                          # demo config, 2 processes, 3 repeats
    python benchmarks/ddp_scaling.py --config gettext-small --steps 150 --repeats 3
    python benchmarks/ddp_scaling.py --device cuda --precision bf16 --nproc 1   # one GPU

Every process takes every N-th batch, so N processes with the same train.max_tokens do N times
the work of one per update: tokens/s, not updates/s, is the comparable figure.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path


def run(config: str, nproc: int, threads: int, steps: int, device: str, precision: str,
        extra: list[str]) -> float:
    """Median logged training tokens/s of one run (first window dropped)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run"
        args = ["train", config, "--out", str(out), f"train.max_steps={steps}",
                "train.max_minutes=null", "train.eval_every=0", "train.save_every=0",
                "train.log_every=10", "train.tensorboard=false", "train.progress=false",
                f"train.threads={threads}", f"train.device={device}",
                f"train.precision={precision}", "data.valid_pairs=8", *extra]
        if nproc > 1:
            cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
                   f"--nproc_per_node={nproc}", "-m", "aiayn", *args]
        else:
            cmd = [sys.executable, "-m", "aiayn", *args]
        env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
        rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
        speeds = [r["tokens_per_s"] for r in rows if "tokens_per_s" in r][1:]
        if not speeds:
            raise SystemExit("no throughput logged: raise --steps")
        return statistics.median(speeds)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="demo", help="built-in config or YAML file (translation)")
    ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--steps", type=int, default=300, help="updates per run")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--set", nargs="*", default=[], help="more KEY=VALUE overrides")
    args = ap.parse_args()
    settings = {"1 process, 1 thread": (1, 1)}
    if args.nproc > 1:
        settings[f"1 process, {args.nproc} threads"] = (1, args.nproc)
        settings[f"{args.nproc} processes, 1 thread each"] = (args.nproc, 1)
    results: dict[str, list[float]] = {name: [] for name in settings}
    for r in range(args.repeats):
        for name, (nproc, threads) in settings.items():
            speed = run(args.config, nproc, threads, args.steps, args.device, args.precision,
                        args.set)
            results[name].append(speed)
            print(f"repeat {r + 1}: {name}: {speed:,.0f} tok/s", file=sys.stderr)
    base = statistics.median(results["1 process, 1 thread"])
    print(f"\n`python benchmarks/ddp_scaling.py --config {args.config} --nproc {args.nproc} "
          f"--steps {args.steps} --repeats {args.repeats} --device {args.device} --precision "
          f"{args.precision}` on {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores\n")
    print("| setting | target tokens/s (median) | spread | vs 1 process, 1 thread | efficiency |")
    print("|---|---|---|---|---|")
    for name, (nproc, threads) in settings.items():
        xs = results[name]
        med = statistics.median(xs)
        workers = nproc * threads
        print(f"| {name} | {med:,.0f} | {min(xs):,.0f}-{max(xs):,.0f} | {med / base:.2f}x | "
              f"{med / (workers * base):.0%} |")


if __name__ == "__main__":
    main()
