"""An encoder-decoder model scored on a test set: the record `aiayn eval --json` prints.

    from aiayn.tasks.evaluation import evaluate
    result = evaluate("demo-model", ["March 5, 2024"], ["5. März 2024"], beam=4)
    result.record["bleu"], result.record["sentences_per_s"], result.hypotheses

The test set is translated as Translator.translate does it (the search settings given, else the
folder's, else §6.1's: beam 4, alpha 0.6; its memory checked first: Translator.check_memory),
timed, and scored with sacreBLEU, chrF and the exact-match rate (score_translations), plus
ROUGE-1/2/L for a model trained on summaries. The record states the settings as resolved (the
beam a folder chose, the worker processes "auto" gave), the threads, device, precision and
engine, so that a figure can be reproduced from it. `aiayn eval` and the demo call it; Table 3
scores its rows with it (aiayn.table3.runs.evaluate_run).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from aiayn.errors import UserError
from aiayn.tasks.translator import Translator


class Evaluation(NamedTuple):
    """What evaluate returns: the record (scores, speed, settings) and the translations."""

    record: dict[str, Any]
    hypotheses: list[str]


def evaluate(model: Translator | str | Path, sources: Sequence[str], references: Sequence[str],
             *, beam: int | None = None, alpha: float | None = None,
             length_penalty: str | None = None, early_stopping: str | None = None,
             no_repeat_ngram_size: int | None = None, min_length: int | None = None,
             batch_size: int = 64, workers: int | str = 1, rouge: bool | None = None,
             precision: str | None = None, precision_asked: str | None = None,
             warn: Callable[[str], None] | None = None,
             search: dict[str, Any] | None = None) -> Evaluation:
    """Translate `sources` with `model` (a Translator, or a model folder loaded on the CPU), score
    the translations against `references` (one each, an empty line allowed), and time it; see the
    module's doc. `rouge`: ROUGE too (None: when the folder's validation scored it, reports_rouge);
    `precision`, `precision_asked`: what the record states of the decoding precision (default:
    the translator's weights', or "ctranslate2 TYPE"; fp16 autocast is the caller's to state);
    `search`: the search settings as Translator.search_options resolved them already."""
    import torch

    from aiayn.generation.workers import resolve_workers
    from aiayn.tasks.seq2seq import score_translations

    translator = model if isinstance(model, Translator) else Translator.load(model)
    if len(sources) != len(references):
        raise UserError(f"{len(sources)} sources but {len(references)} references")
    if search is None:
        search = translator.search_options(beam, alpha, length_penalty, early_stopping,
                                           no_repeat_ngram_size)
    start = time.perf_counter()
    hyps = translator.translate(list(sources), batch_size=batch_size, workers=workers,
                                min_length=min_length, warn=warn, search=search)
    seconds = time.perf_counter() - start
    record = score_translations(hyps, references)
    if rouge or (rouge is None and summarizes(translator.meta)):
        from aiayn.summarization import rouge_scores

        record.update(rouge_scores(hyps, references))
    out_tokens = sum(len(translator.tokenizer.encode(h)) + 1 for h in hyps)
    n, batches = len(sources), -(-len(sources) // batch_size)
    engine = translator.engine
    if precision is None:
        precision = translator.precision if engine is None else f"ctranslate2 {engine.compute_type}"
    record.update(sentences=n, seconds=round(seconds, 3), sentences_per_s=round(n / seconds, 2),
                  tokens_per_s=round(out_tokens / seconds, 1), beam=search["beam"],
                  alpha=search["alpha"], length_penalty=search["length_penalty"],
                  batch_size=batch_size, early_stopping=search["early_stopping"],
                  workers=min(resolve_workers(workers, translator.device), max(batches, 1)),
                  no_repeat_ngram_size=search["no_repeat_ngram_size"],
                  min_length=translator.length_limits(min_length)["min_length"],
                  threads=torch.get_num_threads(), device=str(translator.device),
                  precision=precision, precision_asked=precision_asked or precision,
                  engine="torch" if engine is None else "ctranslate2")
    if engine is not None:  # its batches side by side and threads each
        inter, intra = engine.threads
        record.update(ct2_compute_type=engine.compute_type, ct2_inter_threads=inter,
                      ct2_intra_threads=intra)
    return Evaluation(record, hyps)


def summarizes(meta: dict) -> bool:
    """Whether a model folder's validation scored ROUGE (seq2seq.reports_rouge of its
    config.json's data settings: trained on a summarization corpus, or data.valid_rouge), so
    that evaluate reports it unasked; False for a folder without them (an imported one)."""
    from aiayn.tasks.seq2seq import DataConfig, reports_rouge

    data = meta.get("experiment", {}).get("data")
    try:
        return reports_rouge(DataConfig.from_dict(data))
    except (AttributeError, TypeError, UserError):  # no data settings, or not these
        return False


__all__ = ["Evaluation", "evaluate", "summarizes"]
