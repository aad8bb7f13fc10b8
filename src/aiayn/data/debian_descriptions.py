"""A second real domain: Debian's package descriptions and their human translations (DDTP).

Debian publishes every package's description (``Translation-en``) and the translations its
Description Translation Project made (``Translation-de``, ``-fr``, ``-es``, ...) beside its
package lists, in deb822 paragraphs keyed by ``Description-md5`` (the md5 of the English text):

    Package: 0ad
    Description-md5: d943033bedada21853d2ae54a2578a7b
    Description-de: Echtzeit-Strategiespiel über antike Kriegsführung
     0 A.D. ist ein freies, quelloffenes, plattformübergreifendes
     Echtzeit-Strategiespiel (RTS) über antike Kriegsführung. ...
     .
     Dieses Paket enthält die wichtigsten von 0 A.D. benötigten Datendateien.

Where gettext's messages are short UI strings (menu items, errors), these are prose: whole
sentences about what software does, 12 words on average. Pairs, in order:

* an English and a translated description are matched by their md5;
* the first line (the synopsis) is one unit; the body splits into paragraphs (" ." lines) and
  each list item (a line starting with ``*``, ``-``, ``+``, ``o`` or ``•``) into its own unit; a
  description whose two sides have different numbers of units gives its synopsis alone;
* a unit splits into sentences (after ``.``, ``!`` or ``?`` before a capital or a digit); where
  both sides have the same number, each sentence is a pair; where not, the unit is one pair;
* whitespace runs become one space; pairs longer than ``max_chars`` on either side, with fewer
  than ``min_letters`` letters, identical on both sides (untranslated), or with one side over
  twice as long as the other and 40 characters or more (paired out of step: 0.9% of en-de), are
  dropped;
* one translation per English sentence (the most frequent; ties go to the alphabetically first),
  split by a hash of the English sentence, as ``gettext_pairs`` does (``split_of``).

The files come from a Debian mirror (``fetch_translations``, cached; the one download this
corpus needs) or from a folder that holds them (``Translation-en`` and ``Translation-LANG``, plain,
``.bz2`` or ``.xz``). The suite is pinned (Debian 12, "bookworm": a stable release, whose files
change only at point releases); the files' sha256 go into the corpus folder's stats.json.
"""

from __future__ import annotations

import bz2
import hashlib
import lzma
import os
import re
from collections import Counter, defaultdict
from pathlib import Path

from aiayn.data.gettext_corpus import Pair, check_fractions, count_letters, split_by_source
from aiayn.errors import UserError

MIRROR = "http://deb.debian.org/debian"
SUITE = "bookworm"
_OPENERS = {"": open, ".bz2": bz2.open, ".xz": lzma.open}
_BULLET = re.compile(r"^\s*(?:[*+\-•]|o(?= ))\s+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-ZÀ-ÖØ-Þ0-9¿¡«\"'])")


def default_dir() -> Path:
    """Where fetched files are kept: $AIAYN_CACHE (or ~/.cache/aiayn)/debian-i18n/SUITE."""
    root = os.environ.get("AIAYN_CACHE") or Path.home() / ".cache" / "aiayn"
    return Path(root) / "debian-i18n" / SUITE


def find_translation(folder: str | Path, lang: str) -> Path:
    """The ``Translation-LANG`` file in ``folder`` (plain, .bz2 or .xz); UserError if none."""
    for suffix in _OPENERS:
        path = Path(folder) / f"Translation-{lang}{suffix}"
        if path.is_file():
            return path
    raise UserError(f"no Translation-{lang} (plain, .bz2 or .xz) in {folder}; "
                    f"`aiayn data debian-descriptions --lang {lang}` fetches it from {MIRROR}")


def fetch_translations(lang: str, folder: str | Path | None = None,
                       mirror: str = MIRROR) -> dict[str, Path]:
    """Download Translation-en and Translation-LANG of SUITE's main component into ``folder``
    (default: ``default_dir()``), unless there already; {"en": path, lang: path}. Each file is
    written whole or not at all (a temporary name, renamed when complete)."""
    folder = Path(folder) if folder else default_dir()
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    for code in ("en", lang):
        try:
            paths[code] = find_translation(folder, code)
            continue
        except UserError:
            pass
        paths[code] = _download(code, folder, mirror)
    return paths


def _download(code: str, folder: Path, mirror: str) -> Path:
    import urllib.request  # here, not at import: every `aiayn` command imports this module

    errors = []
    for suffix in (".xz", ".bz2"):  # Debian ships English as .xz, the others as .bz2
        url = f"{mirror}/dists/{SUITE}/main/i18n/Translation-{code}{suffix}"
        path = folder / f"Translation-{code}{suffix}"
        partial = path.with_name(path.name + ".part")
        try:
            with urllib.request.urlopen(url, timeout=60) as response, open(partial, "wb") as f:
                while chunk := response.read(1 << 20):
                    f.write(chunk)
        except OSError as e:  # HTTPError and URLError are OSErrors
            partial.unlink(missing_ok=True)
            errors.append(f"{url}: {getattr(e, 'reason', e)}")
            continue
        os.replace(partial, path)
        return path
    raise UserError(f"cannot fetch Translation-{code} ({'; '.join(errors)}); put the file in "
                    f"{folder} by hand")


def sha256_of(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def read_translation(path: str | Path, lang: str) -> dict[str, list[str]]:
    """md5 -> the description's lines in language ``lang`` (the synopsis first, then the body's
    lines without their leading space)."""
    path = Path(path)
    key = f"Description-{lang}:"
    found: dict[str, list[str]] = {}
    md5, lines = None, None
    try:
        opener = _OPENERS.get(path.suffix, open)
        with opener(path, "rt", encoding="utf-8") as f:
            for line in f:
                line = line.rstrip("\n")
                if not line.strip():
                    if md5 and lines:
                        found[md5] = lines
                    md5, lines = None, None
                elif line.startswith("Description-md5:"):
                    md5 = line.split(":", 1)[1].strip()
                elif line.startswith(key):
                    lines = [line[len(key):].strip()]
                elif line.startswith(" ") and lines is not None:
                    lines.append(line[1:])
    except (OSError, EOFError, lzma.LZMAError, UnicodeDecodeError) as e:
        raise UserError(f"{path}: not a readable Debian Translation file ({e})") from None
    if md5 and lines:
        found[md5] = lines
    if not found:
        raise UserError(f"{path}: no Description-{lang} entries (is it Translation-{lang}?)")
    return found


def description_units(lines: list[str]) -> list[str]:
    """The synopsis, then each paragraph or list item of the body, whitespace collapsed."""
    units = [lines[0]]
    current: list[str] = []
    for line in lines[1:] + ["."]:
        if line.strip() == "." or _BULLET.match(line):
            if current:
                units.append(" ".join(current))
            current = [] if line.strip() == "." else [_BULLET.sub("", line)]
        else:
            current.append(line)
    return [" ".join(u.split()) for u in units if u.split()]


def aligned_pairs(english: list[str], translated: list[str]) -> list[Pair]:
    """Sentence pairs of one description (see the module docstring)."""
    a, b = description_units(english), description_units(translated)
    if len(a) != len(b):
        a, b = a[:1], b[:1]
    pairs = []
    for x, y in zip(a, b, strict=True):
        xs, ys = _SENTENCE_END.split(x), _SENTENCE_END.split(y)
        pairs.extend(zip(xs, ys, strict=True) if len(xs) == len(ys) else [(x, y)])
    return pairs


def debian_pairs(lang: str = "de", folder: str | Path | None = None, valid_frac: float = 0.02,
                 test_frac: float = 0.02, min_letters: int = 2,
                 max_chars: int = 300) -> dict[str, list[Pair]]:
    """{"train", "valid", "test"} -> (English, translation) pairs, one per English sentence, from
    the Translation files in ``folder`` (default: ``default_dir()``; see fetch_translations)."""
    check_fractions("debian-descriptions", valid_frac, test_frac)
    folder = Path(folder) if folder else default_dir()
    english = read_translation(find_translation(folder, "en"), "en")
    translated = read_translation(find_translation(folder, lang), lang)
    translations: dict[str, Counter] = defaultdict(Counter)
    for md5 in sorted(translated.keys() & english.keys()):
        for en, tr in aligned_pairs(english[md5], translated[md5]):
            if en != tr and max(len(en), len(tr)) <= max_chars and not _lopsided(en, tr) \
                    and min(count_letters(en), count_letters(tr)) >= min_letters:
                translations[en][tr] += 1
    return split_by_source(translations, valid_frac, test_frac)


def _lopsided(a: str, b: str) -> bool:
    """One side over twice as long as the other, 40 characters or more: sentences paired out of
    step (two items, one side's split where the other's is not), seldom a translation."""
    short, long = sorted((len(a), len(b)))
    return long >= 40 and long > 2 * short
