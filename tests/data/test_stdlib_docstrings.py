"""stdlib-docstrings: PEP 257's shape, the filters, splits by module, determinism, the real stdlib."""

import textwrap

import pytest

from aiayn.data.corpora import CORPORA, load_corpus, shared_sources
from aiayn.data.stdlib_corpus import split_of
from aiayn.data.stdlib_docstrings import module_docstrings, split_docstring, stdlib_docstrings
from aiayn.errors import UserError

BODY = "The body says what the function does, in several words, at a useful length for a test."
SMALL = dict(min_body_words=5, max_body_words=40, min_summary_words=2)

MODULE = textwrap.dedent(f'''
    """A module docstring is not a function's.

    {BODY}
    """

    def good(x):
        """Return the good value of x.

        {BODY}
        Its second line joins the first.
        """

    class Thing:
        """Hold a thing in a box.

            {BODY}
        """

        def method(self):
            """One line only."""

        async def run(self):
            """No blank line after the summary
            so the first sentence runs on; it is not a one-line summary.

            {BODY}
            """

    def sig(a, b):
        """sig(a, b) -> int

        {BODY}
        """

    def short_body():
        """Return nothing at all.

        Too short.
        """

    def _private():
        """Private functions count too.

        {BODY} Again.
        """
''')


def test_split_docstring_follows_pep_257():
    assert split_docstring("Sum.\n\nMore  text\n  here.") == ("Sum.", "More text here.")
    assert split_docstring("One line.") is None
    assert split_docstring("Runs\non.\n\nBody.") is None  # no blank line after the first
    assert split_docstring("Sum.\n\n") is None  # no body


def test_module_docstrings_keeps_functions_and_classes_of_the_right_shape():
    found = module_docstrings(MODULE, **SMALL)
    assert [summary for _, _, summary in found] == [
        "Return the good value of x.", "Hold a thing in a box.", "Private functions count too."]
    line, body, _ = found[0]
    assert body == BODY + " Its second line joins the first." and "\n" not in body
    assert [line for line, _, _ in found] == sorted(line for line, _, _ in found)
    assert module_docstrings("def broken(:\n    pass\n") == []  # not Python: no pairs


def test_word_limits():
    kept = module_docstrings(MODULE, min_body_words=5, max_body_words=40, max_summary_words=5)
    assert [summary for _, _, summary in kept] == ["Private functions count too."]
    assert module_docstrings(MODULE, min_body_words=5, max_body_words=8) == []


def _fake_stdlib(root):
    for i in range(40):
        folder = root / ("pkg" if i % 2 else "")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"mod{i}.py").write_text(MODULE.replace("good value", f"good value {i}")
                                           .replace("useful length", f"useful length {i}"),
                                           encoding="utf-8")
    (root / "tests").mkdir()
    (root / "tests" / "mod.py").write_text(MODULE.replace("useful", "tested"), encoding="utf-8")
    (root / "zdup.py").write_text((root / "mod0.py").read_text(encoding="utf-8"), encoding="utf-8")
    (root / "latin.py").write_bytes(b'"""caf\xe9"""\n')  # not UTF-8: skipped


def test_corpus_splits_by_module_deterministically(tmp_path):
    _fake_stdlib(tmp_path)
    corpus = stdlib_docstrings(valid_frac=0.2, test_frac=0.2, root=tmp_path, **SMALL)
    assert corpus == stdlib_docstrings(valid_frac=0.2, test_frac=0.2, root=tmp_path, **SMALL)
    assert all(corpus[s] for s in ("train", "valid", "test"))
    assert shared_sources(corpus) == set()
    pairs = [p for s in corpus.values() for p in s]
    assert not any("tested" in body for body, _ in pairs)  # test suites are left out
    for i in range(40):  # every pair of a module lies in the split of the module's path
        name = ("pkg/" if i % 2 else "") + f"mod{i}.py"
        split = split_of(name, 0.2, 0.2)
        mine = [p for p in pairs if p[1] == f"Return the good value {i} of x."]
        assert len(mine) == 1 and mine[0] in corpus[split]
    assert len(pairs) == len({body for body, _ in pairs})  # identical bodies kept once


def test_corpus_errors(tmp_path):
    with pytest.raises(UserError, match="valid_frac"):
        stdlib_docstrings(valid_frac=0.6, test_frac=0.5, root=tmp_path)
    with pytest.raises(UserError, match="word limits"):
        stdlib_docstrings(min_body_words=50, max_body_words=10, root=tmp_path)
    with pytest.raises(UserError, match="no docstrings"):
        stdlib_docstrings(root=tmp_path)


def test_registered_for_the_translation_task(tmp_path):
    _fake_stdlib(tmp_path)
    assert "stdlib-docstrings" in CORPORA
    assert load_corpus("stdlib-docstrings", root=tmp_path) == stdlib_docstrings(root=tmp_path)


@pytest.mark.slow
def test_the_real_stdlib():
    """The machine's own standard library (3.11: 1,802 / 141 / 170 pairs), clean splits."""
    corpus = stdlib_docstrings()
    assert len(corpus["train"]) > 1000 and len(corpus["test"]) > 50 and len(corpus["valid"]) > 50
    assert shared_sources(corpus) == set()
    for body, summary in corpus["train"]:
        assert "\n" not in body + summary and len(summary.split()) <= 30
