"""Built-in language-model corpus ``python-stdlib``: the Python standard library's own source.

Every machine that runs aiayn has megabytes of real, varied text in ``sysconfig``'s "stdlib"
folder. A document is one ``*.py`` file, read as UTF-8 (files that are not are skipped). Left out:
test suites (any folder named ``test``, ``tests`` or ``idle_test``, and ``test_*.py`` files),
installed packages (``site-packages``, ``dist-packages``) and ``__pycache__``.

Splits are by file, from a hash of the file's path relative to the stdlib folder, so a file is in
the same split on every machine and no file is in two splits. By default the corpus is capped at
``max_bytes`` of source so it loads and tokenizes in seconds; the files kept are the first ones in
an order given by another hash of the path (stable, and spread over the whole library), so each
split keeps its share.

A language model's own text files are documents too: read_documents reads them (one file, one
document) and hold_out_tail keeps the last lines of each for validation.
"""

from __future__ import annotations

import hashlib
import math
import os
import sysconfig
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from aiayn.errors import UserError

Document = tuple[str, str]  # (name, text)
TextCorpus = dict[str, list[Document]]  # "train" / "valid" / "test" -> documents
SPLITS = ("train", "valid", "test")
EXCLUDED_DIRS = {"test", "tests", "idle_test", "site-packages", "dist-packages", "__pycache__"}


def stdlib_dir() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def stdlib_files(root: str | Path | None = None) -> list[str]:
    """Relative paths (with "/") of the stdlib's non-test ``*.py`` files, sorted."""
    root = Path(root) if root is not None else stdlib_dir()
    if not root.is_dir():
        raise UserError(f"python-stdlib: the standard library folder {root} does not exist")
    found = []
    for folder, dirs, files in os.walk(root):  # symlinked folders are not followed
        dirs[:] = [d for d in dirs if d not in EXCLUDED_DIRS]
        rel = Path(folder).relative_to(root)
        found += [(rel / f).as_posix() for f in files
                  if f.endswith(".py") and not f.startswith("test_")]
    return sorted(found)


def _unit(text: str, salt: str) -> float:
    """A number in [0, 1) from a hash of `text`: the same on every machine and Python."""
    digest = hashlib.blake2b(text.encode("utf-8"), digest_size=8, person=salt.encode()).digest()
    return int.from_bytes(digest, "big") / 2.0**64


def split_of(name: str, valid_frac: float, test_frac: float) -> str:
    u = _unit(name, "split")
    return "test" if u < test_frac else "valid" if u < test_frac + valid_frac else "train"


def python_stdlib(max_bytes: int | None = 4_000_000, valid_frac: float = 0.05,
                  test_frac: float = 0.05, root: str | Path | None = None) -> TextCorpus:
    """{"train", "valid", "test"} -> [(relative path, source text)], each split sorted by path.

    max_bytes: stop adding files once this much source is kept (None: the whole library).
    """
    if not (0 <= valid_frac and 0 <= test_frac and valid_frac + test_frac < 1):
        raise UserError(f"python-stdlib: valid_frac={valid_frac} and test_frac={test_frac} must "
                        "be >= 0 and sum to less than 1")
    if max_bytes is not None and max_bytes <= 0:
        raise UserError(f"python-stdlib: max_bytes={max_bytes} must be positive (or None)")
    root = Path(root) if root is not None else stdlib_dir()
    corpus: TextCorpus = {split: [] for split in SPLITS}
    total = 0
    for name in sorted(stdlib_files(root), key=lambda n: _unit(n, "order")):
        if max_bytes is not None and total >= max_bytes:
            break
        try:
            text = (root / name).read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        if not text.strip():
            continue
        total += len(text.encode("utf-8"))
        corpus[split_of(name, valid_frac, test_frac)].append((name, text))
    for docs in corpus.values():
        docs.sort()
    if not corpus["train"]:
        raise UserError(f"python-stdlib: no source files found under {root}")
    return corpus


# Built-in text corpora for language models. (aiayn.data.corpora's registry holds translation
# pairs; these are documents, so they have their own small registry.)
TEXT_CORPORA: dict[str, Callable[..., TextCorpus]] = {"python-stdlib": python_stdlib}


def load_text_corpus(name: str, **kw: Any) -> TextCorpus:
    if name not in TEXT_CORPORA:
        raise UserError(f"unknown text corpus {name!r}; choose one of {', '.join(TEXT_CORPORA)}")
    return TEXT_CORPORA[name](**kw)


def shared_documents(corpus: TextCorpus) -> set[str]:
    """Document names found in more than one split (empty for a clean corpus)."""
    seen: dict[str, str] = {}
    return {name for split, docs in corpus.items() for name, _ in docs
            if seen.setdefault(name, split) != split}


# -- the user's own text files as documents ------------------------------------------------

def read_documents(paths: Sequence[str | Path]) -> list[Document]:
    """Each file is one document (name, UTF-8 text)."""
    docs = []
    for path in paths:
        path = Path(path)
        try:
            docs.append((str(path), path.read_text(encoding="utf-8")))
        except FileNotFoundError:
            raise UserError(f"{path}: no such file") from None
        except UnicodeDecodeError as e:
            raise UserError(f"{path}: not UTF-8 text (byte {e.start})") from None
        except OSError as e:
            raise UserError(f"{path}: cannot read ({e.strerror})") from None
    return docs


def hold_out_tail(docs: Sequence[Document], frac: float) -> tuple[list[Document], list[Document]]:
    """Split each document at a line break: the last `frac` of its lines go to validation."""
    train, valid = [], []
    for name, text in docs:
        lines = text.splitlines(keepends=True)
        cut = len(lines) - (math.ceil(len(lines) * frac) if frac > 0 and len(lines) > 1 else 0)
        train.append((name, "".join(lines[:cut])))
        if cut < len(lines):
            valid.append((name + " (tail)", "".join(lines[cut:])))
    return train, valid


__all__ = ["TEXT_CORPORA", "hold_out_tail", "load_text_corpus", "python_stdlib",
           "read_documents", "shared_documents", "split_of", "stdlib_files"]
