"""Data for translation: special tokens, a joint subword tokenizer, corpora, §5.1 batching."""

from aiayn.data.batching import Batch, collate, token_batches
from aiayn.data.corpora import CORPORA, load_corpus, register_corpus, shared_sources
from aiayn.data.dates_numbers import dates_numbers
from aiayn.data.gettext_corpus import gettext_entries, gettext_pairs
from aiayn.data.parallel import (
    filter_long,
    read_corpus_dir,
    read_parallel,
    read_tsv,
    write_corpus_dir,
    write_parallel,
)
from aiayn.data.special import BOS, EOS, PAD, SPECIAL_TOKENS, UNK
from aiayn.data.tokenizer import Tokenizer

__all__ = [
    "BOS", "CORPORA", "EOS", "PAD", "SPECIAL_TOKENS", "UNK", "Batch", "Tokenizer", "collate",
    "dates_numbers", "filter_long", "gettext_entries", "gettext_pairs", "load_corpus",
    "read_corpus_dir", "read_parallel", "read_tsv", "register_corpus", "shared_sources",
    "token_batches", "write_corpus_dir", "write_parallel",
]
