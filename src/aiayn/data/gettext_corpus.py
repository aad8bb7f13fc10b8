"""A real English -> German corpus: the OS's own UI translations (gettext message catalogs).

Every package that speaks German ships ``/usr/share/locale/de/LC_MESSAGES/<name>.mo``: human
translations of its messages ("Add the selected folder to the bookmarks" -> "Den ausgewählten
Ordner zu den Lesezeichen hinzufügen"). Python's ``gettext.GNUTranslations`` reads them; its
``_catalog`` maps each English msgid to its translation. Cleaning, in order:

* the header entry (empty msgid) is dropped;
* a message context ("Stock label\\x04_Right") is cut off: only "_Right" is text;
* plural entries keep the singular English and the first (singular) German form;
* whitespace runs (line breaks and indentation of help texts included) become one space;
* accelerator markers are removed where obvious: one "_" or "&" before a letter on each side,
  sitting in words that differ between the two sides ("Be_fore:" / "Be_vor:" -> "Before:" /
  "Bevor:"), so identifiers shared by both ("wal_level", "AT&T") are kept;
* entries with fewer than ``min_letters`` letters outside printf placeholders or longer than ``max_chars`` characters (on
  either side), and entries identical in both languages (untranslated), are dropped.

printf placeholders (%s, %d, %1$s, %lu, ...) and markup are kept verbatim: they are tokens a
model has to copy, much as it copies names. (Their German quotes differ, "%s" -> »%s«, and
that is translation.)

``gettext_entries`` keeps every (catalog, English, German) entry; ``gettext_pairs`` keeps one
German per English sentence (the most frequent across catalogs; ties go to the alphabetically
first) and splits by a hash of the English sentence, so no source sentence is in two splits and
each sentence stays in its split whichever catalogs a machine has.
"""

from __future__ import annotations

import gettext
import hashlib
import io
import re
import struct
from collections import Counter, defaultdict
from pathlib import Path

from aiayn.errors import UserError

Pair = tuple[str, str]
Entry = tuple[str, str, str]  # (catalog name, English, translation)
LOCALE_DIR = "/usr/share/locale"
_CONTEXT_SEP = "\x04"


def find_catalogs(lang: str = "de", locale_dir: str | Path = LOCALE_DIR) -> list[Path]:
    """The ``.mo`` files of one language, sorted by name; UserError when there are none."""
    directory = Path(locale_dir) / lang / "LC_MESSAGES"
    paths = sorted(directory.glob("*.mo")) if directory.is_dir() else []
    if not paths:
        raise UserError(f"no gettext catalogs (*.mo) for language {lang!r} in {directory}")
    return paths


def read_catalog(path: str | Path) -> dict:
    """A catalog as ``GNUTranslations._catalog``: msgid -> str, (msgid, form) -> str."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        return gettext.GNUTranslations(io.BytesIO(data))._catalog
    except UnicodeDecodeError:
        # gettext decodes the header as UTF-8 before it knows the charset, so a catalog in a
        # legacy charset (net-tools is ISO-8859-1) fails there; read it by hand.
        return _parse_mo(data, str(path))
    except (OSError, struct.error, ValueError) as e:
        raise UserError(f"{path}: not a readable gettext catalog ({e})") from None


def _parse_mo(data: bytes, where: str) -> dict:
    """Minimal .mo reader for catalogs whose header is not UTF-8 (same shape as _catalog)."""
    magic = struct.unpack("<I", data[:4])[0]
    order = "<" if magic == 0x950412DE else ">" if magic == 0xDE120495 else None
    if order is None:
        raise UserError(f"{where}: not a gettext catalog (bad magic number)")
    _, n, orig_at, trans_at = struct.unpack(order + "4I", data[4:20])

    def string(table: int, i: int) -> bytes:
        length, offset = struct.unpack(order + "2I", data[table + 8 * i: table + 8 * i + 8])
        return data[offset:offset + length]

    raw = [(string(orig_at, i), string(trans_at, i)) for i in range(n)]
    header = dict(raw).get(b"", b"").decode("ascii", "replace")
    match = re.search(r"charset=([\w-]+)", header)
    charset = match.group(1) if match else "utf-8"
    catalog: dict = {}
    for msgid, msgstr in raw:
        ids = msgid.decode(charset, "replace").split("\x00")
        strs = msgstr.decode(charset, "replace").split("\x00")
        if len(ids) > 1:
            for form, text in enumerate(strs):
                catalog[(ids[0], form)] = text
        else:
            catalog[ids[0]] = strs[0]
    return catalog


def _normalise(text: str) -> str:
    return " ".join(text.split(_CONTEXT_SEP)[-1].split())


# printf conversions (%s, %-9.9s, %1$s, %lu, %%): not letters of the message
_PRINTF = re.compile(r"%(\d+\$)?[-+ #0']*(\d+|\*)?(\.(\d+|\*))?(hh|h|ll|l|L|q|j|z|t)?[diouxXeEfFgGaAcspn%]")
_UNDERSCORE = re.compile(r"_(?=\w)")
_AMPERSAND = re.compile(r"(?<![\w&])&(?=[^\W\d_])(?!\w*;)")


def _strip_accelerators(en: str, de: str) -> Pair:
    """Remove one accelerator marker per side where obvious (see the module docstring)."""
    for marker in (_UNDERSCORE, _AMPERSAND):
        hits_en, hits_de = list(marker.finditer(en)), list(marker.finditer(de))
        if len(hits_en) == 1 and len(hits_de) == 1 \
                and _word_at(en, hits_en[0].start()) != _word_at(de, hits_de[0].start()):
            i, j = hits_en[0].start(), hits_de[0].start()
            en, de = en[:i] + en[i + 1:], de[:j] + de[j + 1:]
    return en, de


def _word_at(text: str, i: int) -> str:
    start = max(text.rfind(" ", 0, i), -1) + 1
    end = text.find(" ", i)
    return text[start:] if end < 0 else text[start:end]


def _clean_entry(msgid: str, msgstr: str, min_letters: int, max_chars: int) -> Pair | None:
    en, de = _strip_accelerators(_normalise(msgid), _normalise(msgstr))
    if en == de or max(len(en), len(de)) > max_chars:
        return None
    if min(count_letters(en), count_letters(de)) < min_letters:
        return None
    return en, de


def count_letters(text: str) -> int:
    """Letters of a message outside its printf placeholders."""
    return sum(c.isalpha() for c in _PRINTF.sub("", text))


def gettext_entries(lang: str = "de", locale_dir: str | Path = LOCALE_DIR, min_letters: int = 2,
                    max_chars: int = 200) -> list[Entry]:
    """Cleaned (catalog name, English, translation) entries, one per (catalog, English).

    The catalog name is the file's stem ("gtk20", "coreutils"). The same English sentence may
    appear under several catalogs. Sorted by (catalog, English).
    """
    entries: dict[tuple[str, str], str] = {}
    for path in find_catalogs(lang, locale_dir):
        for key, msgstr in read_catalog(path).items():
            if isinstance(key, tuple):  # plural: keep the singular msgid with its first form
                key, form = key
                if form != 0:
                    continue
            if not key or not msgstr:  # the header, or an untranslated entry
                continue
            cleaned = _clean_entry(key, msgstr, min_letters, max_chars)
            if cleaned is not None:
                entries.setdefault((path.stem, cleaned[0]), cleaned[1])
    return sorted((name, en, de) for (name, en), de in entries.items())


def split_of(source: str, valid_frac: float, test_frac: float) -> str:
    """"train", "valid" or "test" from a hash of the source sentence alone (stable everywhere)."""
    h = int.from_bytes(hashlib.blake2b(source.encode("utf-8"), digest_size=8).digest(), "big")
    u = h / 2.0**64
    return "test" if u < test_frac else "valid" if u < test_frac + valid_frac else "train"


def gettext_pairs(lang: str = "de", locale_dir: str | Path = LOCALE_DIR,
                  valid_frac: float = 0.02, test_frac: float = 0.02, min_letters: int = 2,
                  max_chars: int = 200) -> dict[str, list[Pair]]:
    """{"train", "valid", "test"} -> (English, translation) pairs, one per English sentence."""
    check_fractions("gettext", valid_frac, test_frac)
    translations: dict[str, Counter] = defaultdict(Counter)
    for _, en, de in gettext_entries(lang, locale_dir, min_letters, max_chars):
        translations[en][de] += 1
    return split_by_source(translations, valid_frac, test_frac)


def check_fractions(corpus: str, valid_frac: float, test_frac: float) -> None:
    if not (0 <= valid_frac and 0 <= test_frac and valid_frac + test_frac < 1):
        raise UserError(f"{corpus}: valid_frac={valid_frac} and test_frac={test_frac} must be "
                        ">= 0 and sum to less than 1")


def split_by_source(translations: dict[str, Counter], valid_frac: float,
                    test_frac: float) -> dict[str, list[Pair]]:
    """One translation per English sentence (the most frequent; ties go to the alphabetically
    first), each pair in the split ``split_of`` gives its English sentence."""
    splits: dict[str, list[Pair]] = {"train": [], "valid": [], "test": []}
    for en in sorted(translations):
        tr = min(translations[en].items(), key=lambda kv: (-kv[1], kv[0]))[0]
        splits[split_of(en, valid_frac, test_frac)].append((en, tr))
    return splits
