"""Named corpora: ``load_corpus(name, **kw) -> {"train", "valid", "test"} -> [(src, tgt)]``.

Built in:

    dates-numbers   English -> German dates and spelled-out numbers (aiayn.data.dates_numbers)
    gettext         English -> German UI messages of the OS (aiayn.data.gettext_corpus)
    debian-descriptions  English -> German Debian package descriptions, prose (needs its files:
                    `aiayn data debian-descriptions` fetches them; aiayn.data.debian_descriptions)
    stdlib-docstrings  summarization: a Python stdlib docstring's body -> its summary line
                    (aiayn.data.stdlib_docstrings)

``register_corpus`` adds more. A path to a corpus directory (what ``aiayn data`` writes:
train.src / train.tgt / ...) loads too. Every built-in corpus is deterministic and its splits
never share a source sentence.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from aiayn.data.dates_numbers import dates_numbers
from aiayn.data.debian_descriptions import debian_pairs
from aiayn.data.gettext_corpus import gettext_pairs
from aiayn.data.parallel import Pair, read_corpus_dir
from aiayn.data.stdlib_docstrings import stdlib_docstrings
from aiayn.errors import UserError

Corpus = dict[str, list[Pair]]
CORPORA: dict[str, Callable[..., Corpus]] = {}
# name -> (source language, target language), for stats and file headers
LANGUAGES: dict[str, tuple[str, str]] = {}


def register_corpus(name: str, builder: Callable[..., Corpus],
                    languages: tuple[str, str] = ("en", "de")) -> None:
    """Make ``load_corpus(name, **kw)`` call ``builder(**kw)``."""
    CORPORA[name] = builder
    LANGUAGES[name] = languages


register_corpus("dates-numbers", dates_numbers)
register_corpus("gettext", gettext_pairs)
register_corpus("debian-descriptions", debian_pairs)
register_corpus("stdlib-docstrings", stdlib_docstrings, ("en", "en"))


def load_corpus(name: str, **kw: Any) -> Corpus:
    """The named corpus (or the corpus directory at path ``name``) as split -> pairs."""
    if name in CORPORA:
        try:
            return CORPORA[name](**kw)
        except TypeError as e:  # an unknown keyword: say which corpus and which options exist
            if "unexpected keyword" not in str(e):
                raise
            raise UserError(f"corpus {name!r}: {str(e).split(')', 1)[-1].strip()}") from None
    if Path(name).is_dir():
        if kw:
            raise UserError(f"corpus directory {name}: takes no options (got {', '.join(kw)})")
        return read_corpus_dir(name)
    raise UserError(f"unknown corpus {name!r}; choose one of {', '.join(CORPORA)} "
                    "or give a corpus directory")


def shared_sources(corpus: Corpus) -> set[str]:
    """Source sentences that appear in more than one split (empty for a clean corpus)."""
    seen: dict[str, str] = {}
    shared = set()
    for split, pairs in corpus.items():
        for src, _ in pairs:
            if seen.setdefault(src, split) != split:
                shared.add(src)
    return shared
