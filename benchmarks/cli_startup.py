"""How fast the command line answers (issue 37): `aiayn --help`, every command's `--help`, and a
one-line `aiayn translate` with a small model, each a fresh process, wall clock.

Targets: help <= 0.5 s (no torch or matplotlib import to print it), a one-line translate <= 3 s
on 2 cores. Runs are interleaved and repeated; medians and the spread are reported.

    python benchmarks/cli_startup.py                 # trains a tiny model first (seconds)
    python benchmarks/cli_startup.py --model DIR     # or translate with this folder
    python benchmarks/cli_startup.py --repeat 7
"""

from __future__ import annotations

import argparse
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
AIAYN = [sys.executable, "-m", "aiayn"]


def cpu_name() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        return next(line.split(":", 1)[1].strip() for line in out.splitlines()
                    if line.startswith("Model name"))
    except (OSError, StopIteration):
        return platform.processor() or "unknown CPU"


def tiny_model(tmp: Path) -> Path:
    """A model trained for 20 updates on the digit task of the tests (a few seconds)."""
    sys.path.insert(0, str(ROOT))
    from tests.builders import write_config

    config = write_config(tmp)
    subprocess.run([*AIAYN, "train", str(config), "train.progress=false"], check=True,
                   capture_output=True)
    return tmp / "model"


def commands() -> list[str]:
    from aiayn.cli import build_parser

    parser = build_parser()
    return sorted(parser._subparsers._group_actions[0].choices)


def timed(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", type=Path, default=None, help="a translation model folder")
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        model = args.model or tiny_model(Path(tmp))
        cases = {"aiayn --help": [*AIAYN, "--help"]}
        cases.update({f"aiayn {c} --help": [*AIAYN, c, "--help"] for c in commands()})
        cases["aiayn translate (one line)"] = [*AIAYN, "translate", "--model", str(model),
                                               "1 2 3"]
        times: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(args.repeat):  # interleaved: each round runs every case once
            for name, argv in cases.items():
                times[name].append(timed(argv))
    print(f"{cpu_name()}, {args.repeat} runs each, seconds (median, min-max)")
    helps = [statistics.median(t) for n, t in times.items() if n.endswith("--help")]
    for name, t in times.items():
        print(f"  {name:32s} {statistics.median(t):.2f}  ({min(t):.2f}-{max(t):.2f})")
    print(f"slowest help (median): {max(helps):.2f} s; one-line translate (median): "
          f"{statistics.median(times['aiayn translate (one line)']):.2f} s")


if __name__ == "__main__":
    main()
