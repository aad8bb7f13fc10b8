"""Built-in corpora: deterministic, clean, and no source sentence shared between splits."""

import datetime
import struct
from pathlib import Path

import pytest

from aiayn.data.corpora import CORPORA, load_corpus, shared_sources
from aiayn.data.dates_numbers import dates_numbers, render_date, render_number
from aiayn.data.gettext_corpus import gettext_entries, gettext_pairs, split_of
from aiayn.data.tokenizer import Tokenizer
from aiayn.errors import UserError

SMALL = dict(n_train=600, n_valid=100, n_test=150)


def write_mo(path: Path, entries: dict, charset: str = "UTF-8") -> Path:
    """A GNU .mo catalog. Keys: msgid, "ctx\\x04msgid", or (singular, plural) -> [forms]."""
    header = (f"Content-Type: text/plain; charset={charset}\n"
              "Plural-Forms: nplurals=2; plural=(n != 1);\nLast-Translator: Jörg Müller\n")
    items = [(b"", header.encode(charset))]
    for key, value in entries.items():
        if isinstance(key, tuple):
            items.append(("\x00".join(key).encode(charset), "\x00".join(value).encode(charset)))
        else:
            items.append((key.encode(charset), value.encode(charset)))
    items.sort()
    n = len(items)
    ids_at, strs_at = 28, 28 + 8 * n
    data_at = strs_at + 8 * n
    table_ids, table_strs, blob = b"", b"", b""
    for column in (0, 1):
        for item in items:
            s = item[column]
            entry = struct.pack("<2I", len(s), data_at + len(blob))
            if column == 0:
                table_ids += entry
            else:
                table_strs += entry
            blob += s + b"\x00"
    head = struct.pack("<7I", 0x950412DE, 0, n, ids_at, strs_at, 0, 0)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(head + table_ids + table_strs + blob)
    return path


@pytest.fixture
def locale_dir(tmp_path):
    messages = tmp_path / "locale" / "de" / "LC_MESSAGES"
    write_mo(messages / "gtk.mo", {
        "Open the selected file": "Die ausgewählte Datei öffnen",
        "Be_fore:": "Be_vor:",
        "Stock label\x04_Right": "_Rechts",
        "set wal_level to minimal": "wal_level auf minimal setzen",
        "Could not read\n   the   file “%s”": "Datei »%s« konnte\nnicht gelesen werden",
        ("%d file deleted", "%d files deleted"): ["%d Datei gelöscht", "%d Dateien gelöscht"],
        "OK": "OK",  # identical: dropped
        "%s": "%s",
        "%d:%d": "%d.%d",  # no letters outside placeholders: dropped
        "%-9.9s: %lu": "%-9.9s = %lu",
        "Help": "Hilfe",
        "x" * 300: "y" * 300,  # too long: dropped
    })
    write_mo(messages / "coreutils.mo", {"Help": "Hilfe", "Quit": "Beenden"})
    write_mo(messages / "glib.mo", {"Help": "Hilfetext", "Quit": "Beenden"})
    # A legacy catalog whose header is ISO-8859-1 (gettext.GNUTranslations cannot read it).
    write_mo(messages / "net-tools.mo", {"Unknown host": "Unbekannter Rechner für Netz"},
             charset="ISO-8859-1")
    return tmp_path / "locale"


# -- dates-numbers ---------------------------------------------------------------------------


def test_reordering_examples():
    assert render_number(34) == ("thirty-four", "vierunddreißig")
    assert render_date(datetime.date(2024, 3, 5), "long") == ("March 5, 2024", "5. März 2024")
    assert render_date(datetime.date(2024, 3, 5), "short") == ("3/5/24", "05.03.24")
    assert render_date(datetime.date(2024, 3, 5), "full") == \
        ("Tuesday, March 5, 2024", "Dienstag, 5. März 2024")


def test_thirty_four_is_in_the_corpus():
    corpus = dates_numbers(n_train=300, n_valid=5, n_test=5, max_number=99, years=(2000, 2000))
    pairs = dict(p for split in corpus.values() for p in split)
    assert pairs["thirty-four"] == "vierunddreißig"
    numbers = {n: render_number(n) for n in range(100)}
    drawn = [src for src in pairs if not any(c.isdigit() for c in src)]
    assert len(drawn) > 50
    english_to_german = dict(numbers.values())
    for src in drawn:  # every spelled-out number is the num2words pair
        assert pairs[src] == english_to_german[src]


def test_one_translation_per_source():
    # English "medium" and "long" are the same for May: both must get the same German.
    may = datetime.date(2024, 5, 5)
    assert render_date(may, "medium") == render_date(may, "long") == ("May 5, 2024", "5. Mai 2024")
    assert render_date(datetime.date(2024, 6, 5), "medium") == ("Jun 5, 2024", "05.06.2024")


def test_dates_numbers_is_deterministic_and_sized():
    a = dates_numbers(**SMALL)
    assert a == dates_numbers(**SMALL)
    assert a != dates_numbers(**SMALL, seed=1)
    assert {k: len(v) for k, v in a.items()} == {"train": 600, "valid": 100, "test": 150}


def test_dates_numbers_splits_share_no_source():
    corpus = dates_numbers(n_train=3000, n_valid=300, n_test=300, max_number=999)
    assert shared_sources(corpus) == set()
    sources = [s for split in corpus.values() for s, _ in split]
    assert len(sources) == len(set(sources))


def test_dates_numbers_test_split_covers_every_kind():
    test = dates_numbers(**SMALL)["test"]
    kinds = {
        "number": lambda s: not any(c.isdigit() for c in s),
        "short": lambda s: "/" in s,
        "medium_or_long": lambda s: s[0].isupper() and s.count(",") == 1 and s[-1].isdigit(),
        "full": lambda s: s.count(",") == 2 and s[-1].isdigit(),
    }
    for kind, is_kind in kinds.items():
        assert sum(map(is_kind, (s for s, _ in test))) >= 10, kind


def test_dates_numbers_sentences_are_short():
    corpus = dates_numbers(**SMALL)
    texts = [s for p in corpus["train"] for s in p]
    tok = Tokenizer.train(texts, 500)
    for src, tgt in corpus["test"]:
        assert len(tok.encode(src)) < 40 and len(tok.encode(tgt)) < 40
        assert tok.decode(tok.encode(tgt)) == tgt


def test_dates_numbers_too_many():
    with pytest.raises(UserError, match="distinct"):
        dates_numbers(n_train=5000, n_valid=0, n_test=0, max_number=9, years=(2000, 2000))
    with pytest.raises(UserError, match="n_train"):
        dates_numbers(n_train=-1)


# -- gettext -----------------------------------------------------------------------------------


def test_gettext_entries_cleaning(locale_dir):
    entries = gettext_entries("de", locale_dir)
    got = {(cat, en): de for cat, en, de in entries}
    assert got[("gtk", "Open the selected file")] == "Die ausgewählte Datei öffnen"
    assert got[("gtk", "Before:")] == "Bevor:"  # accelerator stripped on both sides
    assert got[("gtk", "Right")] == "Rechts"  # context cut, accelerator stripped
    assert got[("gtk", "set wal_level to minimal")] == "wal_level auf minimal setzen"  # identifier
    assert got[("gtk", "Could not read the file “%s”")] == "Datei »%s« konnte nicht gelesen werden"
    assert got[("gtk", "%d file deleted")] == "%d Datei gelöscht"  # plural: singular form
    assert got[("net-tools", "Unknown host")] == "Unbekannter Rechner für Netz"  # latin-1
    english = {en for _, en, _ in entries}
    assert not english & {"OK", "%s", "%d:%d", "%-9.9s: %lu", "", "x" * 300}
    assert entries == sorted(entries)
    assert {cat for cat, _, _ in entries} == {"gtk", "coreutils", "glib", "net-tools"}
    assert ("coreutils", "Help", "Hilfe") in entries and ("glib", "Help", "Hilfetext") in entries


def test_gettext_pairs_dedupe_and_split(locale_dir):
    corpus = gettext_pairs("de", locale_dir, valid_frac=0.3, test_frac=0.3)
    pairs = [p for split in corpus.values() for p in split]
    sources = [s for s, _ in pairs]
    assert len(sources) == len(set(sources)) == 9
    assert dict(pairs)["Help"] == "Hilfe"  # most frequent translation (2 catalogs of 3)
    assert shared_sources(corpus) == set()
    for split, split_pairs in corpus.items():
        for src, _ in split_pairs:
            assert split_of(src, 0.3, 0.3) == split
    assert corpus == gettext_pairs("de", locale_dir, valid_frac=0.3, test_frac=0.3)


def test_gettext_no_catalogs_names_directory(tmp_path):
    with pytest.raises(UserError) as e:
        gettext_pairs("xx", tmp_path)
    assert str(tmp_path / "xx" / "LC_MESSAGES") in str(e.value)
    with pytest.raises(UserError, match="LC_MESSAGES"):
        gettext_entries("xx", tmp_path)


@pytest.mark.skipif(not Path("/usr/share/locale/de/LC_MESSAGES").is_dir(),
                    reason="no German gettext catalogs on this machine")
def test_gettext_real_catalogs():
    corpus = gettext_pairs("de")
    assert len(corpus["train"]) > 5000 and len(corpus["test"]) > 50
    assert shared_sources(corpus) == set()
    for src, tgt in corpus["train"][:2000]:
        assert src != tgt and "\n" not in src + tgt and len(src) <= 200


# -- registry ----------------------------------------------------------------------------------


def test_load_corpus_registry(locale_dir, tmp_path):
    assert {"dates-numbers", "gettext"} <= set(CORPORA)
    assert load_corpus("dates-numbers", **SMALL) == dates_numbers(**SMALL)
    assert load_corpus("gettext", locale_dir=locale_dir) == gettext_pairs(locale_dir=locale_dir)
    with pytest.raises(UserError, match="unknown corpus 'nope'.*dates-numbers"):
        load_corpus("nope")
    with pytest.raises(UserError, match="corpus 'dates-numbers'.*colour"):
        load_corpus("dates-numbers", colour="red")


def test_load_corpus_directory(tmp_path):
    from aiayn.data.parallel import write_corpus_dir

    corpus = {"train": [("a", "b")], "valid": [("c", "d")], "test": [("e", "f")]}
    write_corpus_dir(corpus, tmp_path / "c")
    assert load_corpus(str(tmp_path / "c")) == corpus
