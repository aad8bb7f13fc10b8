"""Reading parallel corpora: good files, and one clear UserError (file:line) per bad input."""

import re

import pytest

from aiayn.data.parallel import (
    filter_long,
    read_corpus_dir,
    read_parallel,
    read_tsv,
    write_corpus_dir,
)
from aiayn.errors import UserError


def write(path, data):
    path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return path


def one_line_error(fn, *args, **kw) -> str:
    with pytest.raises(UserError) as e:
        fn(*args, **kw)
    message = str(e.value)
    assert "\n" not in message
    return message


def test_read_parallel(tmp_path):
    src = write(tmp_path / "a.en", "\ufeffHello world\r\n  two  \nGrüße\n")
    tgt = write(tmp_path / "a.de", "Hallo Welt\nzwei\nGrüße!")  # no final newline
    assert read_parallel(src, tgt) == [("Hello world", "Hallo Welt"), ("two", "zwei"),
                                       ("Grüße", "Grüße!")]


def test_line_separator_characters_are_text(tmp_path):
    src = write(tmp_path / "a.en", "a\u2028b\n")
    tgt = write(tmp_path / "a.de", "c\x85d\n")
    assert read_parallel(src, tgt) == [("a\u2028b", "c\x85d")]


def test_read_tsv(tmp_path):
    path = write(tmp_path / "c.tsv", "one\teins\nthirty-four\tvierunddreißig\n")
    assert read_tsv(path) == [("one", "eins"), ("thirty-four", "vierunddreißig")]


def test_missing_file(tmp_path):
    tgt = write(tmp_path / "a.de", "x\n")
    message = one_line_error(read_parallel, tmp_path / "nope.en", tgt)
    assert str(tmp_path / "nope.en") in message and "no such file" in message
    assert str(tmp_path / "gone.tsv") in one_line_error(read_tsv, tmp_path / "gone.tsv")


def test_mismatched_line_counts_names_both_files_and_counts(tmp_path):
    src = write(tmp_path / "a.en", "1\n2\n3\n")
    tgt = write(tmp_path / "a.de", "1\n2\n")
    message = one_line_error(read_parallel, src, tgt)
    assert f"{src} has 3 lines" in message and f"{tgt} has 2" in message


@pytest.mark.parametrize("data", ["", "\ufeff"])
def test_empty_corpus(tmp_path, data):
    src = write(tmp_path / "a.en", data)
    tgt = write(tmp_path / "a.de", "x\n")
    assert re.search(rf"{re.escape(str(src))}: empty corpus", one_line_error(read_parallel, src, tgt))
    assert "empty corpus" in one_line_error(read_tsv, src)


def test_invalid_utf8_names_file_and_line(tmp_path):
    src = write(tmp_path / "a.en", b"ok\nfine\ncaf\xe9 latin-1\nmore\n")
    tgt = write(tmp_path / "a.de", "1\n2\n3\n4\n")
    assert f"{src}:3: invalid UTF-8" in one_line_error(read_parallel, src, tgt)
    bad_tsv = write(tmp_path / "b.tsv", b"a\tb\n\xff\tc\n")
    assert f"{bad_tsv}:2: invalid UTF-8" in one_line_error(read_tsv, bad_tsv)


@pytest.mark.parametrize("line, n_tabs", [("no tab here", 0), ("a\tb\tc", 2)])
def test_tsv_line_without_exactly_one_tab(tmp_path, line, n_tabs):
    path = write(tmp_path / "c.tsv", f"one\teins\n{line}\n")
    message = one_line_error(read_tsv, path)
    assert f"{path}:2:" in message and f"found {n_tabs}" in message


def test_empty_sentences(tmp_path):
    src = write(tmp_path / "a.en", "one\n   \nthree\n")
    tgt = write(tmp_path / "a.de", "eins\nzwei\ndrei\n")
    assert f"{src}:2: empty sentence" in one_line_error(read_parallel, src, tgt)
    tgt2 = write(tmp_path / "b.de", "eins\nzwei\n\n")
    src2 = write(tmp_path / "b.en", "one\ntwo\nthree\n")
    assert f"{tgt2}:3: empty sentence" in one_line_error(read_parallel, src2, tgt2)
    tsv = write(tmp_path / "c.tsv", "one\teins\ntwo\t \n")
    assert f"{tsv}:2: empty target sentence" in one_line_error(read_tsv, tsv)


PAIRS = [([1] * 3, [1] * 3), ([1] * 9, [1] * 2), ([1] * 2, [1] * 8), ([1] * 8, [1] * 7)]


def test_filter_long_skip():
    kept, n_skipped = filter_long(PAIRS, max_len=8)
    # pair 1: source 9 > 8; pair 2: target 8 + 1 > 8; pair 3: 8 and 7 + 1 fit exactly
    assert kept == [0, 3] and n_skipped == 2


def test_filter_long_error_names_pair_and_lengths():
    message = one_line_error(filter_long, PAIRS, 8, on_long="error")
    assert "pair 1 (line 2)" in message and "source has 9 tokens" in message
    assert "max_len 8" in message
    message = one_line_error(filter_long, PAIRS[2:], 8, on_long="error", where="train.de")
    assert message.startswith("train.de:1: too long: target has 8 tokens")


def test_filter_long_bad_mode():
    assert "on_long" in one_line_error(filter_long, PAIRS, 8, on_long="truncate")


def test_corpus_dir_round_trip(tmp_path):
    corpus = {"train": [("a b", "c"), ("Grüße", "hi")], "valid": [("x", "y")],
              "test": [("z", "w")]}
    stats = write_corpus_dir(corpus, tmp_path / "out", {"corpus": "toy"})
    assert stats["corpus"] == "toy" and stats["splits"]["train"]["pairs"] == 2
    assert stats["splits"]["train"]["src_words"] == 3
    assert read_corpus_dir(tmp_path / "out") == corpus


def test_a_corpus_is_replaced_only_when_forced_and_then_whole(tmp_path):
    old = {"train": [("a", "b")], "valid": [("c", "d")], "test": [("e", "f")]}
    write_corpus_dir(old, tmp_path / "out")
    victim = tmp_path / "notes.txt"
    victim.write_text("mine\n")
    (tmp_path / "out" / "train.src").unlink()
    (tmp_path / "out" / "train.src").symlink_to(victim)  # a planted link is replaced, not followed
    assert "holds a corpus already" in one_line_error(write_corpus_dir, {"train": [("x", "y")]},
                                                      tmp_path / "out")
    new = {"train": [("x", "y")], "valid": [("z", "w")]}
    write_corpus_dir(new, tmp_path / "out", force=True)
    assert read_corpus_dir(tmp_path / "out") == new  # the old test split went with the corpus
    assert victim.read_text() == "mine\n" and not (tmp_path / "out" / "train.src").is_symlink()


def test_write_refuses_line_breaks(tmp_path):
    assert "line break" in one_line_error(write_corpus_dir, {"train": [("a\nb", "c")]}, tmp_path)
