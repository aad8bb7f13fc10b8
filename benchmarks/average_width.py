"""How wide the running average of the weights should be (train.average_width; issue 11).

Trains aiayn once on the data and recipe of `vs_fairseq.py` with the last update's weights saved
every 10 updates (train.average_width=0, train.save_every=10), then scores, at the chosen steps,
those weights and their running average for each width: training/averaging.py's power-function
EMA, sampled every 10 updates (the product of the per-update decays over the 10 updates). The
search and scorers are vs_fairseq.py's (beam 4, score / length, fairseq's stopping rule, sacreBLEU
and chrF). Training takes ~25 min on 2 cores for 800 updates; each score ~20 s.

    python benchmarks/average_width.py --seed 0 --updates 800 --at 400 500 600 700 800 \
        --widths 0.02 0.05 0.1
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

EVERY = 10  # updates between the saved weights


def averages(run: Path, steps: list[int], width: float):
    """(step, weights) for each of `steps` (ascending): the running average of width `width`,
    built in one pass over the weights saved every EVERY updates (width 0: the weights of that
    update themselves)."""
    from safetensors.torch import load_file

    from aiayn.training.averaging import gamma_for

    def weights(s: int) -> dict:
        return load_file(str(run / "checkpoints" / f"step_{s:08d}.safetensors"))

    if not width:
        yield from ((step, weights(step)) for step in steps)
        return
    gamma, avg = gamma_for(width), None
    for s in range(EVERY, max(steps) + 1, EVERY):
        now = {k: v.double() for k, v in weights(s).items()}
        beta = ((s - EVERY) / s) ** (gamma + 1)
        avg = now if avg is None else {k: beta * avg[k] + (1 - beta) * now[k] for k in avg}
        if s in steps:
            yield s, {k: v.float() for k, v in avg.items()}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--updates", type=int, default=800)
    parser.add_argument("--at", type=int, nargs="+", default=[400, 600, 800],
                        help="steps to score (multiples of 10)")
    parser.add_argument("--widths", type=float, nargs="+", default=[0.02, 0.05],
                        help="average widths to score beside the last update's weights")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--work", default="runs/average-width",
                        help="working folder (the vs_fairseq.py data is built or reused here)")
    parser.add_argument("--reuse", action="store_true",
                        help="score the run already in WORK instead of training it again")
    args = parser.parse_args(argv)
    if any(t % EVERY or t > args.updates for t in args.at):
        parser.error(f"--at: steps must be multiples of {EVERY} up to --updates")
    import vs_fairseq as vs
    from safetensors.torch import save_file

    work = Path(args.work).resolve()
    data = vs.prepare_data(work, None, args.threads)
    run = work / f"aiayn-s{args.seed}"
    if not args.reuse:
        shutil.rmtree(run, ignore_errors=True)
        vs.train_aiayn(run, data, args.seed, argparse.Namespace(
            updates=args.updates, minutes=None, threads=args.threads, save_every=EVERY,
            aiayn_precision="auto", aiayn_average_width=0, resume=False))
    results = {}
    for width in [0.0, *args.widths]:
        for step, weights in averages(run, sorted(args.at), width):
            model = work / f"model-{step}-{width}"
            shutil.rmtree(model, ignore_errors=True)
            model.mkdir()
            for name in ("config.json", "tokenizer.json"):
                shutil.copy2(run / name, model / name)
            save_file(weights, str(model / "model.safetensors"),
                      metadata={"format": "pt"})
            hyp = work / f"s{args.seed}-{step}-{width}.hyp"
            vs.decode("aiayn", model, data, 4, hyp, args.threads)
            results[f"{step}/{width}"] = r = vs.score(hyp, data["ref"])
            shutil.rmtree(model)
            print(f"step {step} width {width}: BLEU {r['bleu']}, chrF {r['chrf']}", flush=True)
    lines = ["| updates | " + " | ".join(["last update's weights"] + [f"width {w}" for w in
                                                                     args.widths]) + " |",
             "|---:|" + "---:|" * (1 + len(args.widths))]
    for step in args.at:
        cells = [results[f"{step}/{w}"] for w in [0.0, *args.widths]]
        lines.append(f"| {step} | " + " | ".join(f"{c['bleu']:.1f} / {c['chrf']:.1f}"
                                                 for c in cells) + " |")
    text = "\n".join(lines) + f"\n\nBLEU / chrF, seed {args.seed}, {data['n_test']} test sentences."
    print("\n" + text)
    (work / f"results-s{args.seed}.json").write_text(json.dumps(results, indent=2) + "\n")
    return results


if __name__ == "__main__":
    main()
