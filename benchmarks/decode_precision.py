"""aiayn's own decoding in fp32, bf16 and int8 side by side: `aiayn eval --precision P --json`.

Each measurement is a fresh `aiayn eval` process (its decode time, as it reports it: the default
mode, `--workers auto`, unless --workers is given), the precisions interleaved within each of
--repeats rounds. Reported: sentences/s (median, min-max), the median of each round's ratio to
fp32 in the same round, BLEU and chrF (the same every round: decoding is deterministic).

    python benchmarks/decode_precision.py --model runs/gettext-small \\
        --src data/gettext-de/test.src --ref data/gettext-de/test.tgt --repeats 3
    python benchmarks/decode_precision.py ... --beam 1 --workers 1 --precisions fp32 int8
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys

import torch


def cpu_name() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    except OSError:
        return platform.processor() or "unknown CPU"
    name = next((line.split(":", 1)[1].strip() for line in out.splitlines()
                 if line.startswith("Model name")), "unknown CPU")
    flags = next((line for line in out.splitlines() if line.startswith("Flags")), "")
    extra = [f for f in ("amx_bf16", "amx_int8", "avx512_bf16", "avx512_vnni") if f" {f}" in flags]
    return f"{name} ({', '.join(extra) or 'no bf16/int8 instructions'})"


def run(args: argparse.Namespace, precision: str) -> dict:
    argv = [sys.executable, "-m", "aiayn", "eval", "--model", args.model, "--src", args.src,
            "--ref", args.ref, "--json", "--device", "cpu", "--precision", precision,
            "--beam", str(args.beam), "--batch-size", str(args.batch)]
    if args.workers:
        argv += ["--workers", args.workers]
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"aiayn eval --precision {precision} failed:\n{done.stderr}")
    return json.loads(done.stdout)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", required=True, help="a translation model folder")
    p.add_argument("--src", required=True)
    p.add_argument("--ref", required=True)
    p.add_argument("--precisions", nargs="+", default=["fp32", "bf16", "int8"])
    p.add_argument("--beam", type=int, default=4)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--workers", default=None, help="eval's --workers (default: its own, auto)")
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    speed: dict[str, list[float]] = {k: [] for k in args.precisions}
    ratio: dict[str, list[float]] = {k: [] for k in args.precisions}
    last: dict[str, dict] = {}
    for r in range(args.repeats):
        for precision in args.precisions:
            last[precision] = run(args, precision)
            speed[precision].append(last[precision]["sentences_per_s"])
            print(f"round {r + 1} {precision}: {speed[precision][-1]:.1f} sentences/s, BLEU "
                  f"{last[precision]['bleu']:.2f}", file=sys.stderr, flush=True)
        if "fp32" in speed:
            for precision in args.precisions:
                ratio[precision].append(speed[precision][-1] / speed["fp32"][-1])
    first = last[args.precisions[0]]
    layout = f"{first['workers']} worker processes of one thread" if first["workers"] > 1 \
        else f"one process of {first['threads']} thread(s)"
    print(f"{first['sentences']} sentences, beam {args.beam}, batch {args.batch}, {layout}, "
          f"torch {torch.__version__}, "
          f"{cpu_name()}, {args.repeats} rounds\n")
    print("| precision | sentences/s (median, min-max) | vs fp32 (median of rounds) | BLEU | chrF |")
    print("|---|---:|---:|---:|---:|")
    for precision in args.precisions:
        s = speed[precision]
        vs = f"{statistics.median(ratio[precision]):.2f}x" if ratio[precision] else "-"
        print(f"| {precision} | {statistics.median(s):.1f} ({min(s):.1f}-{max(s):.1f}) | {vs} | "
              f"{last[precision]['bleu']:.2f} | {last[precision]['chrf']:.2f} |")


if __name__ == "__main__":
    main()
