"""Debian's package descriptions as a parallel corpus: pairing by md5, units, sentences, cleaning,
splits, the fetch (from a local mirror: no network) and its errors."""

import bz2
import lzma
import urllib.request

import pytest

from aiayn.data.corpora import shared_sources
from aiayn.data.debian_descriptions import (
    aligned_pairs,
    debian_pairs,
    description_units,
    fetch_translations,
    read_translation,
)
from aiayn.data.gettext_corpus import split_of
from aiayn.errors import UserError

ENGLISH = """\
Package: editor
Description-md5: aaa
Description-en: simple text editor
 The editor opens files. It saves them too.
 .
 Features:
  * syntax colours
  * undo

Package: editor-doc
Description-md5: bbb
Description-en: documentation for the editor
 This package contains the manual.

Package: untranslated
Description-md5: ccc
Description-en: nobody translated this one
 It stays out.

Package: mismatch
Description-md5: ddd
Description-en: a viewer
 One paragraph.
 .
 Another paragraph.

Package: same
Description-md5: eee
Description-en: GNOME

Package: shifted
Description-md5: fff
Description-en: Complete integrity check
"""

GERMAN = """\
Package: editor
Description-md5: aaa
Description-de: einfacher Texteditor
 Der Editor öffnet Dateien. Er speichert sie auch.
 .
 Funktionen:
  * Syntaxfarben
  * Rückgängig

Package: editor-doc
Description-md5: bbb
Description-de: Dokumentation für den Editor
 Dieses Paket enthält das Handbuch.

Package: mismatch
Description-md5: ddd
Description-de: ein Betrachter
 Ein einziger Absatz, zusammengefasst.

Package: same
Description-md5: eee
Description-de: GNOME

Package: shifted
Description-md5: fff
Description-de: benutzt kryptografische Prüfsummen von Dateien, um Modifizierungen zu entdecken
"""


@pytest.fixture
def i18n(tmp_path):
    folder = tmp_path / "i18n"
    folder.mkdir()
    (folder / "Translation-en").write_text(ENGLISH, encoding="utf-8")
    with bz2.open(folder / "Translation-de.bz2", "wt", encoding="utf-8") as f:
        f.write(GERMAN)
    return folder


def test_a_description_splits_into_synopsis_paragraphs_and_list_items():
    lines = ["a tool", "First paragraph", "  continues.", ".", "List:", " * one", "   more",
             " - two"]
    assert description_units(lines) == ["a tool", "First paragraph continues.", "List:",
                                         "one more", "two"]


def test_units_pair_by_sentence_where_both_sides_split_alike():
    en = ["a tool", "It reads. It writes!", ".", "One sentence here. Two there."]
    de = ["ein Werkzeug", "Es liest. Es schreibt!", ".", "Ein Satz hier und dort."]
    assert aligned_pairs(en, de) == [
        ("a tool", "ein Werkzeug"), ("It reads.", "Es liest."), ("It writes!", "Es schreibt!"),
        ("One sentence here. Two there.", "Ein Satz hier und dort.")]  # 2 vs 1: whole unit
    # another number of units on the two sides: the synopsis alone
    assert aligned_pairs(en, de[:2]) == [("a tool", "ein Werkzeug")]


def test_the_translation_files_read_plain_or_compressed(i18n):
    english = read_translation(i18n / "Translation-en", "en")
    german = read_translation(i18n / "Translation-de.bz2", "de")
    assert set(english) == {"aaa", "bbb", "ccc", "ddd", "eee", "fff"} and "ccc" not in german
    assert german["aaa"][:2] == ["einfacher Texteditor", "Der Editor öffnet Dateien. Er "
                                 "speichert sie auch."]


def test_pairs_are_matched_by_md5_cleaned_and_split_by_the_english_sentence(i18n):
    splits = debian_pairs("de", i18n, valid_frac=0.3, test_frac=0.3)
    pairs = sorted(p for split in splits.values() for p in split)
    assert pairs == sorted([
        ("simple text editor", "einfacher Texteditor"),
        ("The editor opens files.", "Der Editor öffnet Dateien."),
        ("It saves them too.", "Er speichert sie auch."),
        ("Features:", "Funktionen:"), ("syntax colours", "Syntaxfarben"), ("undo", "Rückgängig"),
        ("documentation for the editor", "Dokumentation für den Editor"),
        ("This package contains the manual.", "Dieses Paket enthält das Handbuch."),
        ("a viewer", "ein Betrachter"),  # its body's paragraphs do not pair: synopsis alone
    ])  # nothing of "ccc" (untranslated), "GNOME" (the same on both sides) nor "fff" (a
    # German over three times as long as its English: an item paired out of step)
    for split, members in splits.items():
        assert all(split_of(en, 0.3, 0.3) == split for en, _ in members)
    assert not shared_sources(splits)
    assert debian_pairs("de", i18n, valid_frac=0.3, test_frac=0.3) == splits  # deterministic


def test_one_translation_per_english_sentence_the_most_frequent(tmp_path):
    def entry(md5, en, de):
        return (f"Package: p{md5}\nDescription-md5: {md5}\nDescription-en: {en}\n\n",
                f"Package: p{md5}\nDescription-md5: {md5}\nDescription-de: {de}\n\n")

    entries = [entry("1", "a game", "ein Spiel"), entry("2", "a game", "ein Spiel"),
               entry("3", "a game", "ein Game")]
    (tmp_path / "Translation-en").write_text("".join(e for e, _ in entries), encoding="utf-8")
    (tmp_path / "Translation-de").write_text("".join(d for _, d in entries), encoding="utf-8")
    splits = debian_pairs("de", tmp_path)
    assert [p for split in splits.values() for p in split] == [("a game", "ein Spiel")]


def test_missing_or_unreadable_files_are_one_line_errors(tmp_path, i18n):
    with pytest.raises(UserError, match=r"no Translation-fr .* in .*i18n"):
        debian_pairs("fr", i18n)
    (tmp_path / "Translation-en.xz").write_bytes(b"not xz at all")
    with pytest.raises(UserError, match="Translation-en.xz: not a readable Debian Translation"):
        read_translation(tmp_path / "Translation-en.xz", "en")
    with pytest.raises(UserError, match="no Description-de entries"):
        read_translation(i18n / "Translation-en", "de")


def test_fetch_downloads_what_is_missing_whole_and_keeps_what_is_there(tmp_path, monkeypatch):
    mirror = tmp_path / "mirror"
    served = mirror / "dists" / "bookworm" / "main" / "i18n"
    served.mkdir(parents=True)
    with lzma.open(served / "Translation-en.xz", "wt", encoding="utf-8") as f:  # as Debian:
        f.write(ENGLISH)                                        # English .xz, the others .bz2
    with bz2.open(served / "Translation-de.bz2", "wt", encoding="utf-8") as f:
        f.write(GERMAN)
    cache = tmp_path / "cache"
    files = fetch_translations("de", cache, mirror=mirror.as_uri())
    assert files == {"en": cache / "Translation-en.xz", "de": cache / "Translation-de.bz2"}
    assert sorted(p.name for p in cache.iterdir()) == ["Translation-de.bz2", "Translation-en.xz"]
    assert debian_pairs("de", cache)["train"]

    def no_network(*_, **__):
        raise AssertionError("fetched again")

    monkeypatch.setattr(urllib.request, "urlopen", no_network)
    assert fetch_translations("de", cache, mirror=mirror.as_uri()) == files
    monkeypatch.undo()
    with pytest.raises(UserError, match=r"cannot fetch Translation-xx .*by hand"):
        fetch_translations("xx", cache, mirror=mirror.as_uri())
    assert not list(cache.glob("*.part"))  # a failed download leaves nothing behind
