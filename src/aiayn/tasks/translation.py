"""Moved to aiayn.tasks.seq2seq (the seq2seq task: translation, summarization, denoising
pretraining) and aiayn.tasks.seq2seq_loss; kept as an alias for the scripts that import the old
path. translation_loss is seq2seq_loss. A config's `task: translation` is the family table's
alias of `task: seq2seq` (aiayn.folder.families.TASK_ALIASES)."""

from __future__ import annotations

from aiayn.tasks.seq2seq import (
    TASK,
    DataConfig,
    Translator,
    decode_ids,
    denoising_batches,
    encode_pairs,
    epoch_batches,
    experiment,
    import_hf_bart,
    import_hf_marian,
    import_hf_t5,
    load_documents,
    load_pairs,
    make_evaluate,
    pair_batches,
    reports_rouge,
    score_translations,
    train,
)
from aiayn.tasks.seq2seq_loss import seq2seq_loss
from aiayn.tasks.seq2seq_loss import seq2seq_loss as translation_loss

__all__ = ["DataConfig", "TASK", "Translator", "decode_ids", "denoising_batches", "encode_pairs",
           "epoch_batches", "experiment", "import_hf_bart", "import_hf_marian", "import_hf_t5",
           "load_documents", "load_pairs", "make_evaluate", "pair_batches", "reports_rouge",
           "score_translations", "seq2seq_loss", "train", "translation_loss"]
