"""Translation quality on real text: English -> German UI messages (the OS's gettext catalogs).

Trains configs/gettext-small.yaml (the CPU-sized Transformer: d_model 256, 3+3 layers, 8k BPE)
for a fixed wall-clock budget, then translates the held-out test split with §6.1's beam search
(beam 4, alpha 0.6, GNMT length penalty) and reports sacreBLEU and chrF (with signatures), the
exact-match rate and decoding speed. Optionally averages the last checkpoints first (§6.1).

    python benchmarks/gettext_en_de.py                     # 30 minutes of training
    python benchmarks/gettext_en_de.py --minutes 5 --record  # append a section to RESULTS.md

The score is the model's, not a ceiling: these are short, varied messages (menu labels,
error strings with %s placeholders) and 41k pairs is a small corpus for a 10M-parameter model.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import shutil
import sys
import time
from pathlib import Path

import torch

from aiayn.folder.checkpoint import average_checkpoints
from aiayn.tasks.seq2seq import (
    Translator,
    experiment,
    load_pairs,
    score_translations,
    train,
)

ROOT = Path(__file__).resolve().parent.parent
CONFIG = "gettext-small"  # the built-in config (aiayn/configs/gettext-small.yaml)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=30.0, help="training budget (default 30)")
    parser.add_argument("--out", default="runs/bench-gettext", help="model folder (replaced)")
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--average", type=int, default=0, metavar="N",
                        help="also score the average of the last N checkpoints (§6.1)")
    parser.add_argument("--record", action="store_true", help="append the result to RESULTS.md")
    parser.add_argument("overrides", nargs="*", metavar="key=value",
                        help="config overrides, e.g. train.max_tokens=3000")
    args = parser.parse_args(argv)

    out = Path(args.out)
    averaged = out.with_name(out.name + "-avg")
    for folder in (out, averaged):
        if folder.exists():
            shutil.rmtree(folder)
    exp = experiment(CONFIG, [f"train.max_minutes={args.minutes}", "train.progress=false",
                                   *args.overrides])
    result = train(exp, out=out, say=lambda m: print(m, flush=True))
    threads = exp.train.threads or torch.get_num_threads()
    torch.set_num_threads(threads)  # decode with the threads training used
    test = load_pairs(exp.data)["test"]
    report = {"command": "python benchmarks/gettext_en_de.py " + " ".join(argv or sys.argv[1:]),
              "train_minutes": round(result.seconds / 60, 1), "steps": result.step,
              "train_tokens": result.tokens, "test_sentences": len(test), "beam": args.beam,
              "cpu": f"{platform.processor() or platform.machine()}, {threads} thread(s)",
              "date": datetime.date.today().isoformat()}
    folders = {"last": out}
    if args.average:
        steps = average_checkpoints(out, args.average, averaged)
        folders[f"avg{len(steps)}"] = averaged
    for name, folder in folders.items():
        translator = Translator.load(folder)
        start = time.perf_counter()
        hyps = translator.translate([s for s, _ in test], beam=args.beam)
        seconds = time.perf_counter() - start
        scores = score_translations(hyps, [t for _, t in test])
        report[name] = {**scores, "sentences_per_s": round(len(test) / seconds, 1)}
        print(f"{name}: BLEU {scores['bleu']:.2f} chrF {scores['chrf']:.2f} exact match "
              f"{scores['exact_match']:.1f}% ({len(test) / seconds:.1f} sentences/s)", flush=True)
    print(json.dumps(report, indent=2, ensure_ascii=False))
    if args.record:
        record(report)
    return report


def record(report: dict) -> None:
    path = ROOT / "benchmarks" / "RESULTS.md"
    last = report["last"]
    lines = [
        "",
        f"## Translation: gettext EN->DE, CPU-sized Transformer ({report['date']})",
        "",
        f"Command: `{report['command']}` (configs/gettext-small.yaml; {report['cpu']}).",
        f"Trained {report['train_minutes']} min, {report['steps']} steps, "
        f"{report['train_tokens']:,} target tokens; test split of {report['test_sentences']} "
        f"sentences, beam {report['beam']} (alpha 0.6, GNMT penalty).",
        "",
        "| weights | sacreBLEU | chrF | exact match | sentences/s |",
        "|---|---|---|---|---|",
    ]
    for name in [k for k in report if k == "last" or k.startswith("avg")]:
        r = report[name]
        lines.append(f"| {name} | {r['bleu']:.2f} | {r['chrf']:.2f} | {r['exact_match']:.1f}% | "
                     f"{r['sentences_per_s']} |")
    lines += ["", f"BLEU signature: `{last['bleu_signature']}`; chrF: `{last['chrf_signature']}`.", ""]
    with path.open("a", encoding="utf-8") as f:
        f.write("\n".join(lines))


if __name__ == "__main__":
    main()
