"""Summarization: does denoising pretraining pay for its CPU time? On stdlib-docstrings, at equal
training time (same threads, so equal CPU time), three systems:

  (a) scratch     summarize-small (the 2017 Transformer, preset small) trained on the pairs for
                  the whole budget;
  (b) pretrained  the same model pretrained with span corruption (or --objective infill, ...) on the
                  corpus's own training bodies for --pretrain-share of the budget (the built-in
                  config pretrain-span), then fine-tuned on the pairs for the rest (model.init);
  (c) lead-1      the document's first sentence (aiayn.summarization.lead): no training.

Reported: ROUGE-1/2/L F-measures with stemming (rouge-score, mean over pairs) of each system's
summaries of the --split's bodies, beam search as `aiayn eval` does it.

    python benchmarks/summarize_pretraining.py --minutes 60 --out runs/bench-pretrain
    python benchmarks/summarize_pretraining.py --minutes 20 --threads 1 --together --out runs/b
    python benchmarks/summarize_pretraining.py --steps 3000 --threads 1 --together --out runs/b
    python benchmarks/summarize_pretraining.py --minutes 1 --pairs 50 --out /tmp/b \\
        --set model.d_model=64 --set model.d_ff=128       # a check that it runs, not a result
"""

from __future__ import annotations

import argparse
import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from aiayn.data.corpora import load_corpus
from aiayn.data.denoising import OBJECTIVES
from aiayn.summarization import lead, rouge_scores
from aiayn.tasks import seq2seq

CORPUS = "stdlib-docstrings"


def budget(minutes: float | None, steps: int | None) -> list[str]:
    """The overrides that stop a run after `minutes` (wall clock) or after `steps` updates."""
    if steps is not None:
        return [f"train.max_steps={steps}", "train.max_minutes=100000"]
    return [f"train.max_minutes={minutes}"]


def run(config: str, overrides: list[str], out: Path, stop: list[str]) -> tuple[Path, float, float]:
    """Train the built-in `config` into `out` until `stop` -> (folder, wall s, CPU s)."""
    start, cpu = time.perf_counter(), time.process_time()
    exp = seq2seq.experiment(config, [*overrides, *stop,
                                          "train.progress=false", "train.tensorboard=false"],
                                 out=out)
    result = seq2seq.train(exp, say=lambda m: print(f"  {out.name}: {m}", flush=True))
    return result.folder, time.perf_counter() - start, time.process_time() - cpu


def pretrain_then_tune(common: list[str], objective: str, out: Path, pre: list[str],
                       tune: list[str]) -> tuple[Path, float, float]:
    """(b): pretrain, then fine-tune from it -> (fine-tuned folder, wall s, CPU s) of both."""
    pretrained, w_pre, c_pre = run("pretrain-span", [*common, f"data.objective={objective}"],
                                   out / "pretrain", pre)
    tuned, w_tune, c_tune = run("summarize-small", [*common, f"model.init={pretrained}"],
                                out / "finetuned", tune)
    return tuned, w_pre + w_tune, c_pre + c_tune


def summarize(folder: Path, bodies: list[str], beam: int) -> list[str]:
    return seq2seq.Translator.load(folder).translate(bodies, beam=beam, workers=1)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--minutes", type=float, default=60.0,
                   help="training time of each trained system (default 60)")
    p.add_argument("--steps", type=int, default=None,
                   help="instead of --minutes: updates of each trained system (the same shape "
                        "and batch size, so about the same CPU time per update: a budget that "
                        "other load on the machine does not change; CPU seconds are reported)")
    p.add_argument("--pretrain-share", type=float, default=0.5,
                   help="(b): the share of the budget spent pretraining (default 0.5)")
    p.add_argument("--objective", choices=OBJECTIVES, default="span",
                   help="(b)'s data.objective (default span)")
    p.add_argument("--out", required=True, help="folder for the three model folders (new)")
    p.add_argument("--split", default="test", choices=("valid", "test"))
    p.add_argument("--pairs", type=int, default=None, help="score the first N pairs only")
    p.add_argument("--beam", type=int, default=4, help="beam size (default 4, §6.1)")
    p.add_argument("--threads", type=int, default=None, help="train.threads (default: torch's)")
    p.add_argument("--together", action="store_true",
                   help="train (a) and (b) at the same time in two processes (with --threads 1 on "
                        "2 cores: whatever else loads the machine slows both alike)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="an override for every run (model.d_model=64), e.g. for a quick check")
    args = p.parse_args()

    out = Path(args.out)
    common = [*args.set, *([f"train.threads={args.threads}"] if args.threads else [])]
    pre_minutes = args.minutes * args.pretrain_share
    if args.steps is not None:
        pre_steps = round(args.steps * args.pretrain_share)
        whole, pre, tune = (budget(None, args.steps), budget(None, pre_steps),
                            budget(None, args.steps - pre_steps))
        spent = (f"{args.steps:,} updates each ((b): {pre_steps:,} pretraining + "
                 f"{args.steps - pre_steps:,} fine-tuning)")
    else:
        whole, pre, tune = (budget(args.minutes, None), budget(pre_minutes, None),
                            budget(args.minutes - pre_minutes, None))
        spent = (f"{args.minutes:g} min each ((b): {pre_minutes:g} pretraining + "
                 f"{args.minutes - pre_minutes:g} fine-tuning)")
    a_args = ("summarize-small", common, out / "scratch", whole)
    b_args = (common, args.objective, out, pre, tune)
    if args.together:
        with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool:
            a, b = pool.submit(run, *a_args), pool.submit(pretrain_then_tune, *b_args)
            (scratch, w_a, c_a), (tuned, w_b, c_b) = a.result(), b.result()
    else:
        scratch, w_a, c_a = run(*a_args)
        tuned, w_b, c_b = pretrain_then_tune(*b_args)

    pairs = load_corpus(CORPUS)[args.split][:args.pairs]
    bodies, refs = [b for b, _ in pairs], [s for _, s in pairs]
    rows = [("(a) scratch", w_a, c_a, summarize(scratch, bodies, args.beam)),
            (f"(b) {args.objective} pretrained + fine-tuned", w_b, c_b,
             summarize(tuned, bodies, args.beam)),
            ("(c) lead-1", 0.0, 0.0, [lead(b) for b in bodies])]
    print()
    print(f"{CORPUS} {args.split}, {len(pairs):,} pairs; training budget {spent}, "
          f"beam {args.beam}")
    print()
    print("| system | wall s (train + load) | CPU s | ROUGE-1 | ROUGE-2 | ROUGE-L |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, wall, cpu, hyps in rows:
        s = rouge_scores(hyps, refs)
        print(f"| {name} | {wall:.0f} | {cpu:.0f} | {s['rouge1']:.2f} | {s['rouge2']:.2f} | "
              f"{s['rougeL']:.2f} |")


if __name__ == "__main__":
    main()
