"""Summarization: the lead baseline's ROUGE on stdlib-docstrings, the bar a trained model must pass.

The lead baseline summarizes a document by its first sentence (aiayn.summarization.lead); on news
(CNN/DailyMail) its three-sentence form is famously hard to beat. Here the document is a
docstring's body and the reference its PEP 257 summary line. Reported: ROUGE-1/2/L F-measures
with stemming (rouge-score, mean over pairs) on the chosen split, with the split's size.

    python benchmarks/summarize_lead.py                      # the built-in corpus's test split
    python benchmarks/summarize_lead.py --split valid --sentences 2
    python benchmarks/summarize_lead.py --corpus-dir DIR     # a folder from `aiayn data`
"""

from __future__ import annotations

import argparse
import platform
import time

from aiayn.data.corpora import load_corpus
from aiayn.summarization import lead, rouge_scores


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--corpus", default="stdlib-docstrings", help="a built-in corpus")
    p.add_argument("--corpus-dir", help="or a corpus folder written by `aiayn data`")
    p.add_argument("--split", default="test", choices=("train", "valid", "test"))
    p.add_argument("--sentences", type=int, default=1, help="lead-N: the first N sentences")
    args = p.parse_args()

    start = time.perf_counter()
    corpus = load_corpus(args.corpus_dir or args.corpus)
    loaded = time.perf_counter() - start
    pairs = corpus[args.split]
    hyps = [lead(body, args.sentences) for body, _ in pairs]
    refs = [summary for _, summary in pairs]
    scores = rouge_scores(hyps, refs)
    sizes = ", ".join(f"{split} {len(p):,}" for split, p in corpus.items())
    words = sum(len(body.split()) for body, _ in pairs) / max(len(pairs), 1)
    print(f"corpus {args.corpus_dir or args.corpus} (Python {platform.python_version()}): "
          f"{sizes} pairs, loaded in {loaded:.1f} s; {args.split}: {words:.1f} words per body, "
          f"{sum(len(r.split()) for r in refs) / max(len(refs), 1):.1f} per summary")
    print()
    print("| system | split | pairs | ROUGE-1 | ROUGE-2 | ROUGE-L |")
    print("|---|---|---:|---:|---:|---:|")
    print(f"| lead-{args.sentences} | {args.split} | {len(pairs):,} | {scores['rouge1']:.2f} | "
          f"{scores['rouge2']:.2f} | {scores['rougeL']:.2f} |")


if __name__ == "__main__":
    main()
