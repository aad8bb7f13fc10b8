"""Parallel corpora on disk: reading, checking, writing, and dropping over-long pairs.

Two layouts are read:

* two aligned files, one sentence per line (``train.src`` / ``train.tgt``): ``read_parallel``;
* one file with ``source<TAB>target`` per line: ``read_tsv``.

Files are UTF-8 (a leading byte-order mark is allowed; CRLF line ends are accepted); each
sentence is stripped of surrounding whitespace. Anything else is a ``UserError`` whose one-line
message names the file and, where there is one, the 1-based line.

A corpus directory (what ``aiayn data`` writes and ``read_corpus_dir`` reads) holds
``{split}.src`` and ``{split}.tgt`` for split in train / valid / test, plus ``stats.json``.
File names say the role, not the language (the languages are in stats.json), so every corpus has
the same layout.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aiayn.errors import UserError

Pair = tuple[str, str]
SPLITS = ("train", "valid", "test")
ON_LONG = ("skip", "error")


def _read_lines(path: str | Path) -> list[str]:
    """The lines of a UTF-8 text file, without line ends. Errors name the file (and line)."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: no such file" if not path.exists() else f"{path}: not a file")
    data = path.read_bytes()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise UserError(f"{path}:{line}: invalid UTF-8 (byte 0x{data[e.start]:02x})") from None
    if not text:
        raise UserError(f"{path}: empty corpus (the file has no lines)")
    # split("\n"), not splitlines(): U+2028, U+0085 and friends are text, not line ends.
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def _sentence(text: str, path: str | Path, line: int, side: str = "",
              allow_empty: bool = False) -> str:
    text = text.strip()
    if not text and not allow_empty:
        raise UserError(f"{path}:{line}: empty {side}sentence")
    return text


def read_parallel(src_path: str | Path, tgt_path: str | Path,
                  allow_empty: bool = False) -> list[Pair]:
    """Aligned (source, target) pairs from two files with one sentence per line. An empty line
    is refused (no pair to learn from), unless `allow_empty` (a test set to score: a system's
    output may hold an empty line, and a reference made from one too)."""
    src_lines, tgt_lines = _read_lines(src_path), _read_lines(tgt_path)
    if len(src_lines) != len(tgt_lines):
        raise UserError(f"mismatched line counts: {src_path} has {len(src_lines)} lines, "
                        f"{tgt_path} has {len(tgt_lines)}")
    return [(_sentence(s, src_path, i, allow_empty=allow_empty),
             _sentence(t, tgt_path, i, allow_empty=allow_empty))
            for i, (s, t) in enumerate(zip(src_lines, tgt_lines, strict=True), start=1)]


def read_tsv(path: str | Path) -> list[Pair]:
    """(source, target) pairs from a file with ``source<TAB>target`` on every line."""
    pairs = []
    for i, line in enumerate(_read_lines(path), start=1):
        n_tabs = line.count("\t")
        if n_tabs != 1:
            raise UserError(f"{path}:{i}: expected exactly one tab (source<TAB>target), "
                            f"found {n_tabs}")
        src, tgt = line.split("\t")
        pairs.append((_sentence(src, path, i, "source "), _sentence(tgt, path, i, "target ")))
    return pairs


def filter_long(pairs_as_ids: Sequence[tuple[Sequence[int], Sequence[int]]], max_len: int,
                on_long: str = "skip", where: str | None = None) -> tuple[list[int], int]:
    """Keep the pairs that fit a model with ``max_len`` positions.

    A pair fits when ``len(src) <= max_len`` and ``len(tgt) + 1 <= max_len``: the decoder sees
    the target with one extra token (<s> in front for its input, </s> behind for its output;
    see ``batching.collate``). Returns (indices of the kept pairs, number skipped); the indices
    select from ``pairs_as_ids`` (and from the text pairs it was encoded from).

    ``on_long="error"`` raises a UserError naming the first too-long pair instead: its 0-based
    index, its line (index + 1, when the pairs are a file's lines in order; ``where`` names that
    file), and its length against the limit.
    """
    if on_long not in ON_LONG:
        raise UserError(f"on_long={on_long!r} is unknown; choose one of {', '.join(ON_LONG)}")
    if max_len < 2:
        raise UserError(f"max_len={max_len} is too small: a target needs at least 2 positions")
    kept = []
    for i, (src, tgt) in enumerate(pairs_as_ids):
        if len(src) <= max_len and len(tgt) + 1 <= max_len:
            kept.append(i)
        elif on_long == "error":
            place = f"{where}:{i + 1}" if where else f"pair {i} (line {i + 1})"
            what = (f"source has {len(src)} tokens" if len(src) > max_len
                    else f"target has {len(tgt)} tokens + 1 for <s>/</s> = {len(tgt) + 1}")
            raise UserError(f"{place}: too long: {what} > max_len {max_len} "
                            "(raise max_len or skip long pairs)")
    return kept, len(pairs_as_ids) - len(kept)


# -- corpus directories ---------------------------------------------------------------------


def write_parallel(pairs: Sequence[Pair], src_path: str | Path, tgt_path: str | Path) -> None:
    """Write aligned files, one sentence per line (a sentence may not contain a line break);
    each atomically (a link there is replaced, never written through)."""
    from aiayn.folder.files import atomic_write_text

    for i, (src, tgt) in enumerate(pairs):
        if "\n" in src or "\n" in tgt or "\r" in src or "\r" in tgt:
            raise UserError(f"pair {i} contains a line break and cannot be written one per line")
    atomic_write_text(src_path, "".join(s + "\n" for s, _ in pairs))
    atomic_write_text(tgt_path, "".join(t + "\n" for _, t in pairs))


def split_stats(pairs: Sequence[Pair]) -> dict[str, int]:
    """Counts for stats.json: pairs, words and characters per side, longest sentence in words."""
    src_words = [len(s.split()) for s, _ in pairs]
    tgt_words = [len(t.split()) for _, t in pairs]
    return {
        "pairs": len(pairs),
        "src_words": sum(src_words), "tgt_words": sum(tgt_words),
        "src_chars": sum(len(s) for s, _ in pairs), "tgt_chars": sum(len(t) for _, t in pairs),
        "src_max_words": max(src_words, default=0), "tgt_max_words": max(tgt_words, default=0),
    }


def corpus_files(out: Path) -> list[Path]:
    """The files of a corpus folder that are there: {split}.src / .tgt and stats.json."""
    names = [f"{split}.{side}" for split in SPLITS for side in ("src", "tgt")] + ["stats.json"]
    return [out / name for name in names if os.path.lexists(out / name)]


def check_corpus_out(out: str | Path, force: bool = False) -> list[Path]:
    """Refuse, before any work, a corpus folder that would lose something: a file, a model
    folder, a folder holding a corpus already (unless `force`). Returns the old corpus's files."""
    from aiayn.folder.files import CONFIG_FILE, WEIGHTS_FILE, refuse_inside_model_folder

    out = Path(out)
    if out.exists() and not out.is_dir():
        raise UserError(f"{out}: exists and is not a directory")
    if (out / CONFIG_FILE).is_file() and (out / WEIGHTS_FILE).is_file():
        raise UserError(f"{out}: is a model folder; write the corpus elsewhere")
    refuse_inside_model_folder(out)
    old = corpus_files(out) if out.is_dir() else []
    if old and not force:
        raise UserError(f"{out}: holds a corpus already ({', '.join(p.name for p in old[:3])}"
                        f"{', ...' if len(old) > 3 else ''}); choose another --out, or pass "
                        "--force to replace it")
    return old


def write_corpus_dir(corpus: dict[str, Sequence[Pair]], out_dir: str | Path,
                     meta: dict[str, Any] | None = None, force: bool = False) -> dict[str, Any]:
    """Write ``{split}.src``, ``{split}.tgt`` per split and ``stats.json``; returns the stats.
    A folder that holds a corpus already is refused unless `force`, which replaces that corpus
    whole (a split the new one lacks goes too); a model folder is refused always."""
    from aiayn.folder.files import atomic_write_text

    out = Path(out_dir)
    old = check_corpus_out(out, force)
    out.mkdir(parents=True, exist_ok=True)
    stats: dict[str, Any] = dict(meta or {})
    stats["splits"] = {}
    for split, pairs in corpus.items():
        write_parallel(pairs, out / f"{split}.src", out / f"{split}.tgt")
        stats["splits"][split] = split_stats(pairs)
    atomic_write_text(out / "stats.json", json.dumps(stats, indent=2, ensure_ascii=False) + "\n")
    written = {out / f"{split}.{side}" for split in corpus for side in ("src", "tgt")}
    for path in old:  # --force: the old corpus's splits that the new one has not
        if path not in written and path.name != "stats.json":
            path.unlink()
    return stats


def read_corpus_dir(directory: str | Path) -> dict[str, list[Pair]]:
    """Read every split present in a corpus directory (``train`` must be there)."""
    directory = Path(directory)
    if not (directory / "train.src").is_file():
        raise UserError(f"{directory}: not a corpus directory (no train.src)")
    return {split: read_parallel(directory / f"{split}.src", directory / f"{split}.tgt")
            for split in SPLITS if (directory / f"{split}.src").exists()}
