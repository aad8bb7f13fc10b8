"""`aiayn vit train` on the built-in digits corpus: test accuracy and training time.

Runs the default recipe (configs/vit-digits.yaml: 4000 steps, 1 thread) for several seeds and
prints a Markdown table, next to classic scikit-learn classifiers on the same splits for scale.
The issue's target: >= 97% test accuracy within 3 minutes on 2 CPU cores.

    python benchmarks/vit_digits.py [--seeds 0 1 2] [--threads 1] [--max-steps 4000]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from aiayn.data.images import digits
from aiayn.tasks.image_classification import experiment, train


def run_vit(seed: int, threads: int, max_steps: int) -> dict:
    exp = experiment(None, [f"train.seed={seed}", f"train.threads={threads}",
                            f"train.max_steps={max_steps}", "train.progress=false",
                            "train.tensorboard=false"])
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        result = train(exp, out=Path(tmp) / "m", say=lambda s: None)
        wall = time.perf_counter() - start
    return {"seed": seed, "steps": result.step, "train_s": result.seconds, "wall_s": wall,
            "valid": result.metrics.get("valid_accuracy", float("nan")),
            "test": result.metrics.get("test_accuracy", float("nan"))}


def baselines() -> list[tuple[str, float, float]]:
    from sklearn.linear_model import LogisticRegression
    from sklearn.neural_network import MLPClassifier
    from sklearn.svm import SVC

    corpus = digits()
    (xt, yt), (xs, ys) = corpus.splits["train"], corpus.splits["test"]
    xt, xs = xt.flatten(1).numpy(), xs.flatten(1).numpy()
    out = []
    for name, clf in (("logistic regression", LogisticRegression(max_iter=2000)),
                      ("SVM (RBF)", SVC(gamma="scale")),
                      ("MLP (100 hidden)", MLPClassifier(max_iter=1000, random_state=0))):
        start = time.perf_counter()
        clf.fit(xt, yt.numpy())
        out.append((name, clf.score(xs, ys.numpy()), time.perf_counter() - start))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--max-steps", type=int, default=experiment().train.max_steps,
                        help="default: the recipe's (configs/vit-digits.yaml)")
    args = parser.parse_args()
    rows = [run_vit(seed, args.threads, args.max_steps) for seed in args.seeds]
    print("| run | steps | training time (s) | wall time (s) | valid accuracy | test accuracy |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| aiayn ViT, seed {r['seed']} | {r['steps']} | {r['train_s']:.0f} | {r['wall_s']:.0f} | "
              f"{100 * r['valid']:.2f}% | {100 * r['test']:.2f}% |")
    for name, acc, seconds in baselines():
        print(f"| scikit-learn {name} | - | {seconds:.1f} | - | - | {100 * acc:.2f}% |")
    worst, slowest = min(r["test"] for r in rows), max(r["wall_s"] for r in rows)
    verdict = "PASS" if worst >= 0.97 and slowest <= 180 else "FAIL"
    print(f"\n{verdict}: worst test accuracy {100 * worst:.2f}% (target >= 97%), slowest run "
          f"{slowest:.0f} s (target <= 180 s)")


if __name__ == "__main__":
    main()
