"""Summarization: does denoising pretraining pay for its CPU time? On stdlib-docstrings, at equal
training time (same threads, so equal CPU time), three systems:

  (a) scratch     summarize-small (the 2017 Transformer, preset small) trained on the pairs for
                  the whole budget;
  (b) pretrained  the same model pretrained with span corruption (or --objective infill) on the
                  corpus's own training bodies for --pretrain-share of the budget (the built-in
                  config pretrain-span), then fine-tuned on the pairs for the rest (model.init);
  (c) lead-1      the document's first sentence (aiayn.summarization.lead): no training.

Reported: ROUGE-1/2/L F-measures with stemming (rouge-score, mean over pairs) of each system's
summaries of the --split's bodies, beam search as `aiayn eval` does it.

    python benchmarks/summarize_pretraining.py --minutes 60 --out runs/bench-pretrain
    python benchmarks/summarize_pretraining.py --minutes 1 --pairs 50 --out /tmp/b \\
        --set model.d_model=64 --set model.d_ff=128       # a check that it runs, not a result
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from aiayn.data.corpora import load_corpus
from aiayn.summarization import lead, rouge_scores
from aiayn.tasks import translation

CORPUS = "stdlib-docstrings"


def run(config: str, overrides: list[str], out: Path, minutes: float) -> tuple[Path, float]:
    """Train the built-in `config` for `minutes` into `out` -> (folder, seconds)."""
    start = time.perf_counter()
    exp = translation.experiment(config, [*overrides, f"train.max_minutes={minutes}",
                                          "train.progress=false", "train.tensorboard=false"],
                                 out=out)
    result = translation.train(exp, say=lambda m: print(f"  {out.name}: {m}", flush=True))
    return result.folder, time.perf_counter() - start


def summarize(folder: Path, bodies: list[str], beam: int) -> list[str]:
    return translation.Translator.load(folder).translate(bodies, beam=beam, workers=1)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--minutes", type=float, default=60.0,
                   help="training time of each trained system (default 60)")
    p.add_argument("--pretrain-share", type=float, default=0.5,
                   help="(b): the share of --minutes spent pretraining (default 0.5)")
    p.add_argument("--objective", choices=("span", "infill"), default="span")
    p.add_argument("--out", required=True, help="folder for the three model folders (new)")
    p.add_argument("--split", default="test", choices=("valid", "test"))
    p.add_argument("--pairs", type=int, default=None, help="score the first N pairs only")
    p.add_argument("--beam", type=int, default=4, help="beam size (default 4, §6.1)")
    p.add_argument("--threads", type=int, default=None, help="train.threads (default: torch's)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="an override for every run (model.d_model=64), e.g. for a quick check")
    args = p.parse_args()

    out = Path(args.out)
    common = [*args.set, *([f"train.threads={args.threads}"] if args.threads else [])]
    pre_minutes = args.minutes * args.pretrain_share
    scratch, t_scratch = run("summarize-small", common, out / "scratch", args.minutes)
    pretrained, t_pre = run("pretrain-span", [*common, f"data.objective={args.objective}"],
                            out / "pretrain", pre_minutes)
    tuned, t_tune = run("summarize-small", [*common, f"model.init={pretrained}"],
                        out / "finetuned", args.minutes - pre_minutes)

    pairs = load_corpus(CORPUS)[args.split][:args.pairs]
    bodies, refs = [b for b, _ in pairs], [s for _, s in pairs]
    rows = [("(a) scratch", t_scratch, summarize(scratch, bodies, args.beam)),
            (f"(b) {args.objective} pretrained + fine-tuned", t_pre + t_tune,
             summarize(tuned, bodies, args.beam)),
            ("(c) lead-1", 0.0, [lead(b) for b in bodies])]
    print()
    print(f"{CORPUS} {args.split}, {len(pairs):,} pairs; training budget {args.minutes:g} min "
          f"each ((b): {pre_minutes:g} pretraining + {args.minutes - pre_minutes:g} fine-tuning), "
          f"beam {args.beam}")
    print()
    print("| system | wall s (train + load) | ROUGE-1 | ROUGE-2 | ROUGE-L |")
    print("|---|---:|---:|---:|---:|")
    for name, seconds, hyps in rows:
        s = rouge_scores(hyps, refs)
        print(f"| {name} | {seconds:.0f} | {s['rouge1']:.2f} | {s['rouge2']:.2f} | "
              f"{s['rougeL']:.2f} |")


if __name__ == "__main__":
    main()
