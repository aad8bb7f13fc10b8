"""Built-in summarization corpus ``stdlib-docstrings``: docstring body -> its one-line summary.

PEP 257 asks a multi-line docstring for "a summary line just like a one-line docstring, followed
by a blank line, followed by a more elaborate description". The Python standard library on every
machine that runs aiayn holds thousands of them, written by people: the description is a short
document, the summary line a human summary of it. Each function, method and class docstring of
the stdlib's source (the files of ``aiayn.data.stdlib_corpus.stdlib_files``: no test suites) is
read with ``ast`` (no module is imported) and cleaned as ``inspect.cleandoc`` does. Kept, as
(body, summary) pairs with each side's whitespace runs made one space:

* docstrings whose first line is followed by a blank line and more text (PEP 257's shape);
* summaries of ``min_summary_words`` to ``max_summary_words`` words that are not a call
  signature ("isfile(path) -> bool", the C modules' habit, copied by some Python ones);
* bodies of ``min_body_words`` to ``max_body_words`` words;
* the first of identical bodies, in the order of (file, line): a body is never in two splits.

Splits are by file (a module is never in two splits), from the same hash of the file's relative
path as the ``python-stdlib`` language-model corpus with the same fractions: a file is in the same
split of both, so a model pretrained on python-stdlib's train split never saw a test summary's
module. The corpus is that of the Python that runs aiayn (the stdlib differs between versions).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from aiayn.data.parallel import Pair
from aiayn.data.stdlib_corpus import SPLITS, split_of, stdlib_dir, stdlib_files
from aiayn.errors import UserError

Docstring = tuple[int, str, str]  # (line, body, summary)
_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_SIGNATURE = re.compile(r"^[\w.]+\(.*\)\s*(->.*)?$")  # "name(args)" or "name(args) -> result"


def split_docstring(doc: str) -> tuple[str, str] | None:
    """(summary line, body) of a cleaned docstring of PEP 257's multi-line shape, else None.
    Whitespace runs in each become one space."""
    lines = doc.strip().splitlines()
    if len(lines) < 3 or not lines[0].strip() or lines[1].strip():
        return None
    summary, body = " ".join(lines[0].split()), " ".join(" ".join(lines[2:]).split())
    return (summary, body) if body else None


def module_docstrings(source: str, min_summary_words: int = 3, max_summary_words: int = 30,
                      min_body_words: int = 10, max_body_words: int = 150) -> list[Docstring]:
    """(line, body, summary) of the kept function and class docstrings of one module's source,
    in the order of their lines; [] when the source does not parse."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):  # not Python 3 source for this Python (or NUL bytes)
        return []
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, _DEFINITIONS):
            continue
        doc = ast.get_docstring(node, clean=True)
        parts = split_docstring(doc) if doc else None
        if parts is None:
            continue
        summary, body = parts
        if (min_summary_words <= len(summary.split()) <= max_summary_words
                and min_body_words <= len(body.split()) <= max_body_words
                and not _SIGNATURE.match(summary)):
            found.append((node.lineno, body, summary))
    return sorted(found)


def stdlib_docstrings(valid_frac: float = 0.05, test_frac: float = 0.05,
                      min_summary_words: int = 3, max_summary_words: int = 30,
                      min_body_words: int = 10, max_body_words: int = 150,
                      root: str | Path | None = None) -> dict[str, list[Pair]]:
    """{"train", "valid", "test"} -> (docstring body, summary line) pairs, in (file, line) order."""
    if not (0 <= valid_frac and 0 <= test_frac and valid_frac + test_frac < 1):
        raise UserError(f"stdlib-docstrings: valid_frac={valid_frac} and test_frac={test_frac} "
                        "must be >= 0 and sum to less than 1")
    if not 1 <= min_summary_words <= max_summary_words or not 1 <= min_body_words <= max_body_words:
        raise UserError("stdlib-docstrings: the word limits must be positive, each minimum at "
                        "most its maximum")
    root = Path(root) if root is not None else stdlib_dir()
    corpus: dict[str, list[Pair]] = {split: [] for split in SPLITS}
    seen: set[str] = set()
    for name in stdlib_files(root):
        try:
            source = (root / name).read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        split = split_of(name, valid_frac, test_frac)
        for _, body, summary in module_docstrings(source, min_summary_words, max_summary_words,
                                                  min_body_words, max_body_words):
            if body not in seen:
                seen.add(body)
                corpus[split].append((body, summary))
    if not corpus["train"]:
        raise UserError(f"stdlib-docstrings: no docstrings found under {root}")
    return corpus


__all__ = ["module_docstrings", "split_docstring", "stdlib_docstrings"]
