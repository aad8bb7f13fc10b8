"""A built-in English -> German corpus of dates and spelled-out numbers (babel + num2words).

Every source sentence is one of five kinds, drawn at random (numbers twice as often as each date
format, so about one sentence in three is a number):

    kind      English (source)                             German (target)
    number    one thousand, two hundred and thirty-four     eintausendzweihundertvierunddreißig
    short     3/5/24                                        05.03.24
    medium    Mar 5, 2024                                   05.03.2024
    long      March 5, 2024                                 5. März 2024
    full      Tuesday, March 5, 2024                        Dienstag, 5. März 2024

Dates are CLDR's formats (babel.dates.format_date with format=kind, locale "en" / "de") for
days in ``years`` (default 1900-2099); numbers are num2words(n, lang="en" / "de") for n in
0..``max_number`` (default 9999). Both need real reordering: "thirty-four" -> "vierunddreißig"
puts the units first, "3/5/24" -> "05.03.24" swaps month and day. Sentences are short (under 25
subword tokens with the default tokenizer) and the distribution is closed, so a small Transformer
trained for minutes on a CPU can learn it nearly perfectly: what a demo needs.

The corpus is deterministic given its arguments. Source sentences are unique across the whole
corpus (duplicates are drawn again), and the splits are slices of one shuffled draw, so train,
valid and test never share a source sentence and come from the same distribution.
"""

from __future__ import annotations

import datetime
import random

from babel.dates import format_date
from num2words import num2words

from aiayn.errors import UserError

Pair = tuple[str, str]
DATE_FORMATS = ("short", "medium", "long", "full")
# kind -> relative weight
KINDS = {"number": 2, **{f: 1 for f in DATE_FORMATS}}
SRC_LANG, TGT_LANG = "en", "de"


def render_number(n: int) -> Pair:
    """n -> (English words, German words), e.g. 34 -> ("thirty-four", "vierunddreißig")."""
    return num2words(n, lang=SRC_LANG), num2words(n, lang=TGT_LANG)


def render_date(day: datetime.date, fmt: str) -> Pair:
    """A date in one CLDR format, e.g. "long": ("March 5, 2024", "5. März 2024").

    English "medium" abbreviates every month but May, so "May 5, 2024" is both "medium" and
    "long"; it is always given the "long" German ("5. Mai 2024"), so that a source sentence has
    one translation.
    """
    src = _clean(format_date(day, format=fmt, locale=SRC_LANG))
    if fmt == "medium" and src == _clean(format_date(day, format="long", locale=SRC_LANG)):
        fmt = "long"
    return src, _clean(format_date(day, format=fmt, locale=TGT_LANG))


def _clean(text: str) -> str:
    # CLDR uses no-break and narrow no-break spaces in some patterns: plain spaces here.
    return " ".join(text.replace("\u00a0", " ").replace("\u202f", " ").split())


def most_sentences(years: tuple[int, int] = (1900, 2099), max_number: int = 9999) -> int:
    """An upper bound on the distinct source sentences: one per number and one per day in each
    date format (fewer in fact: "3/5/24" is 1924 and 2024). More can never be drawn."""
    days = datetime.date(years[1], 12, 31).toordinal() - datetime.date(years[0], 1, 1).toordinal() + 1
    return max_number + 1 + len(DATE_FORMATS) * days


def dates_numbers(n_train: int = 20000, n_valid: int = 500, n_test: int = 1000, seed: int = 0,
                  years: tuple[int, int] = (1900, 2099), max_number: int = 9999,
                  ) -> dict[str, list[Pair]]:
    """{"train", "valid", "test"} -> (English, German) pairs; see the module docstring."""
    sizes = {"train": n_train, "valid": n_valid, "test": n_test}
    for name, n in sizes.items():
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise UserError(f"dates-numbers: n_{name}={n!r} must be a non-negative integer")
    first, last = years
    if not 1 <= first <= last <= 9999:
        raise UserError(f"dates-numbers: years={years!r} must be (first, last) with "
                        "1 <= first <= last <= 9999")
    if max_number < 0:
        raise UserError(f"dates-numbers: max_number={max_number} must be >= 0")
    most = most_sentences(years, max_number)
    if sum(sizes.values()) > most:
        raise UserError(f"dates-numbers: {sum(sizes.values()):,} sentences asked for, but years "
                        f"{first}-{last} and numbers 0-{max_number} give at most {most:,} "
                        "distinct ones; ask for fewer")

    rng = random.Random(seed)
    start = datetime.date(first, 1, 1).toordinal()
    n_days = datetime.date(last, 12, 31).toordinal() - start + 1
    kinds, weights = list(KINDS), list(KINDS.values())
    total = sum(sizes.values())
    pairs: dict[str, str] = {}  # source -> target; insertion order is draw order
    drawn: set[tuple[str, int]] = set()
    attempts = 0
    while len(pairs) < total:
        attempts += 1
        if attempts > 20 * total + 1000:
            raise UserError(f"dates-numbers: cannot draw {total} distinct sentences from "
                            f"years {first}-{last} and numbers 0-{max_number}; ask for fewer")
        kind = rng.choices(kinds, weights)[0]
        value = rng.randint(0, max_number) if kind == "number" else start + rng.randrange(n_days)
        if (kind, value) in drawn:  # skip rendering what is known to be a duplicate
            continue
        drawn.add((kind, value))
        if kind == "number":
            src, tgt = render_number(value)
        else:
            src, tgt = render_date(datetime.date.fromordinal(value), kind)
        pairs.setdefault(src, tgt)  # "3/5/24" is 1924 and 2024: keep the first draw
    items = list(pairs.items())
    # Late draws meet more duplicates (numbers run out first), so shuffle before slicing: each
    # split is then a uniform sample of the same distinct sentences.
    rng.shuffle(items)
    out, at = {}, 0
    for name, n in sizes.items():
        out[name] = items[at:at + n]
        at += n
    return out
