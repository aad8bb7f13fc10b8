"""``gettext-origin``: which program does this UI message belong to? A real text-classification
corpus from the OS's message catalogs.

Every program that speaks another language ships ``/usr/share/locale/<lang>/LC_MESSAGES/<name>.mo``
whose msgids are its English messages ("Show the commit log", "Permission denied"). The text is
the cleaned English message (``aiayn.data.gettext_corpus.gettext_entries``: contexts, accelerators
and whitespace runs removed), the label the catalog's name ("git", "postgres-15", ...):

* a message found in more than one catalog ("Cancel") has no single answer and is dropped;
* the ``n_labels`` largest catalogs by what is left (ties by name) are the classes, so two
  near-copies (gtk20-properties / gtk30-properties) cannot both be a class that then has almost
  no message of its own. The ISO code lists (``iso_*``: country, language and currency names of
  the iso-codes package) are data tables, not a program's messages, and are left out;
* splits come from a hash of the message text (``split_of``), so no message is in two splits and
  a message keeps its split whichever catalogs a machine has.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path

from aiayn.data.gettext_corpus import LOCALE_DIR, gettext_entries, split_of
from aiayn.errors import UserError

Example = tuple[str, str]  # (text, label)


def gettext_origin(n_labels: int = 8, lang: str = "de", locale_dir: str | Path = LOCALE_DIR,
                   valid_frac: float = 0.1, test_frac: float = 0.1,
                   max_chars: int = 200) -> dict[str, list[Example]]:
    """{"train", "valid", "test"} -> (English message, catalog name), sorted within each split."""
    if isinstance(n_labels, bool) or not isinstance(n_labels, int) or n_labels < 2:
        raise UserError(f"gettext-origin: n_labels={n_labels!r} must be an integer >= 2")
    if not (0 <= valid_frac and 0 <= test_frac and valid_frac + test_frac < 1):
        raise UserError(f"gettext-origin: valid_frac={valid_frac} and test_frac={test_frac} must "
                        "be >= 0 and sum to less than 1")
    owners: dict[str, set[str]] = defaultdict(set)
    for name, en, _ in gettext_entries(lang, locale_dir, max_chars=max_chars):
        if not name.startswith("iso_"):
            owners[en].add(name)
    unique = {en: next(iter(names)) for en, names in owners.items() if len(names) == 1}
    sizes = Counter(unique.values())
    if len(sizes) < n_labels:
        raise UserError(f"gettext-origin: n_labels={n_labels} but only {len(sizes)} catalogs "
                        f"for {lang!r} in {locale_dir}")
    labels = {name for name, _ in sorted(sizes.items(), key=lambda kv: (-kv[1], kv[0]))[:n_labels]}
    splits: dict[str, list[Example]] = {"train": [], "valid": [], "test": []}
    for en in sorted(unique):
        if unique[en] in labels:
            splits[split_of(en, valid_frac, test_frac)].append((en, unique[en]))
    return splits


def label_names(splits: dict[str, list[Example]]) -> list[str]:
    """The sorted class names of a split dict (what the classifier's outputs stand for)."""
    return sorted({label for examples in splits.values() for _, label in examples})


__all__ = ["Example", "gettext_origin", "label_names"]
