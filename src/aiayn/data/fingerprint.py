"""Data identified by content, not by the spelling of its path.

    content_of({"data": {"train_src": "a/../b.src", ...}, "texts": [...]})
      -> {"data.train_src": {"bytes": 123, "sha256": "9f2c..."}, "texts": [{...}, ...]}

A resumed run and a merged table compare these: the same file moved or spelled another way
(`a/../b` vs `b`, a link) is the same data, and a file whose content changed under the same name
is not. A folder (data.corpus_dir) is identified by its regular files, name by name.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

Fingerprint = dict[str, Any]
# The data settings that name files or folders, in every task's data config (the others name
# built-in corpora or settings, which a file of the same name in the working folder must not
# shadow).
PATH_KEYS = ("corpus_dir", "train_src", "train_tgt", "valid_src", "valid_tgt", "text", "train",
             "valid", "images")


def fingerprint(path: str | Path) -> Fingerprint:
    """{"bytes", "sha256"} of a file; {"files": {name: ...}} of a folder's regular files."""
    path = Path(path)
    if path.is_dir():
        return {"files": {p.name: fingerprint(p) for p in sorted(path.iterdir())
                          if p.is_file() and not p.name.startswith(".")}}
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return {"bytes": path.stat().st_size, "sha256": digest.hexdigest()}


def pairs_fingerprint(splits: dict[str, Any]) -> Fingerprint:
    """{"pairs", "sha256"} of a corpus as read (its splits of (source, target) pairs): one
    identity for a built-in corpus (whose text can differ between machines: gettext reads the
    system's catalogs) and a folder of files alike."""
    digest, count = hashlib.sha256(), 0
    for split in sorted(splits):
        for src, tgt in splits[split]:
            digest.update(f"{split}\t{src}\t{tgt}\n".encode())
            count += 1
    return {"pairs": count, "sha256": digest.hexdigest()}


def _names_files(value: Any) -> bool:
    if isinstance(value, str):
        return bool(value) and os.path.exists(value)
    return isinstance(value, list) and bool(value) and all(map(_names_files, value))


def content_of(record: dict[str, Any]) -> dict[str, Any]:
    """The fingerprints of the files and folders a run's record names: the data section's
    values ("data.KEY") and the record's own inputs (a list of files: "texts")."""
    found: dict[str, Any] = {}
    named = [(f"data.{k}", v) for k, v in (record.get("data") or {}).items() if k in PATH_KEYS]
    named += [(k, v) for k, v in record.items() if k not in ("task", "model", "data", "train")]
    for key, value in named:
        if _names_files(value):
            found[key] = ([fingerprint(v) for v in value] if isinstance(value, list)
                          else fingerprint(value))
    return found


def describe(print_: Any) -> str:
    """A fingerprint in a few words: "123 bytes, sha256 9f2c01ab" (a folder: its file count)."""
    if isinstance(print_, list):
        return f"{len(print_)} files"
    if not isinstance(print_, dict):
        return "absent"
    if "files" in print_:
        return f"a folder of {len(print_['files'])} files"
    if "pairs" in print_:
        return f"{print_['pairs']} pairs, sha256 {str(print_.get('sha256'))[:8]}"
    return f"{print_.get('bytes')} bytes, sha256 {str(print_.get('sha256'))[:8]}"


__all__ = ["content_of", "describe", "fingerprint", "pairs_fingerprint"]
