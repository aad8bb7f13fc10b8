"""Summarization as translation: ROUGE, and the lead baseline to read it against.

A summarizer here is an encoder-decoder trained by the translation recipe on (document, summary)
pairs (the built-in corpus ``stdlib-docstrings``: docstring body -> summary line); this module adds
what scores one.

ROUGE (Lin 2004) by Google's ``rouge-score`` package, as the summarization papers report it (T5
§3.1, BART §3.5, PEGASUS): ROUGE-1, ROUGE-2 and ROUGE-L F-measures with the Porter stemmer, each
the mean over the pairs of the pair's F-measure, in percent. rouge-score lowercases and keeps only
[a-z0-9] runs as tokens (``os.path.join`` is three tokens). ROUGE-L here is the summary-level
LCS of the whole text, not the newline-split ``rougeLsum`` (which needs NLTK's downloaded
sentence splitter).

The lead baseline (the "Lead-3" of news summarization, one sentence for one-line summaries):
the document's first sentence, cut at the first ". ", "? " or "! " that ends a sentence.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

ROUGE_TYPES = ("rouge1", "rouge2", "rougeL")
# The built-in corpora of summaries: `aiayn eval` reports ROUGE for a model trained on one.
SUMMARY_CORPORA = ("stdlib-docstrings",)
# A sentence ends at . ? or ! followed by whitespace, except after "e.g." / "i.e." / "etc."
_SENTENCE_END = re.compile(r"(?<!\be\.g\.)(?<!\bi\.e\.)(?<!\betc\.)(?<=[.?!])\s+")


def rouge_scores(hyps: Sequence[str], refs: Sequence[str]) -> dict[str, float]:
    """{"rouge1", "rouge2", "rougeL"}: mean F-measure over the pairs, with stemming, in percent."""
    from rouge_score import rouge_scorer  # imports NLTK: only when asked for

    if len(hyps) != len(refs):
        raise ValueError(f"{len(hyps)} summaries for {len(refs)} references")
    scorer = rouge_scorer.RougeScorer(list(ROUGE_TYPES), use_stemmer=True)
    totals = dict.fromkeys(ROUGE_TYPES, 0.0)
    for hyp, ref in zip(hyps, refs, strict=True):
        scores = scorer.score(ref, hyp)  # (target, prediction)
        for name in ROUGE_TYPES:
            totals[name] += scores[name].fmeasure
    return {name: round(total / max(len(refs), 1) * 100, 2) for name, total in totals.items()}


def lead(document: str, sentences: int = 1) -> str:
    """The first `sentences` sentences of a document (all of it when it has fewer)."""
    if sentences < 1:
        raise ValueError(f"sentences={sentences} must be at least 1")
    parts = _SENTENCE_END.split(document.strip(), maxsplit=sentences)
    return " ".join(parts[:sentences])


__all__ = ["ROUGE_TYPES", "SUMMARY_CORPORA", "lead", "rouge_scores"]
