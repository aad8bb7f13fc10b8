"""gettext-origin: labels are catalogs, ambiguous messages dropped, splits share no message."""

from pathlib import Path

import pytest

from aiayn.data.gettext_origin import gettext_origin, label_names
from aiayn.errors import ConfigError, UserError
from aiayn.tasks.text_classification import ClassifyDataConfig, load_examples
from tests.data.test_corpora import write_mo  # the .mo writer of the gettext corpus tests


@pytest.fixture
def locale_dir(tmp_path):
    messages = tmp_path / "locale" / "de" / "LC_MESSAGES"
    write_mo(messages / "git.mo", {f"git message number {i}": f"Git-Meldung Nummer {i}" for i in range(30)}
             | {"Cancel": "Abbrechen", "Show the log": "Das Protokoll zeigen"})
    write_mo(messages / "tar.mo", {f"tar archive error {i}": f"tar-Archivfehler {i}" for i in range(20)}
             | {"Cancel": "Abbrechen"})
    write_mo(messages / "sed.mo", {f"sed script line {i}": f"sed-Skriptzeile {i}" for i in range(5)})
    # a near-copy of git: its messages are all shared, so it has nothing of its own
    write_mo(messages / "git-gui.mo", {f"git message number {i}": f"Git-Meldung Nummer {i}" for i in range(30)})
    write_mo(messages / "iso_639.mo", {f"Language {i}": f"Sprache {i}" for i in range(100)})
    return tmp_path / "locale"


def test_labels_are_the_largest_catalogs_by_own_messages(locale_dir):
    splits = gettext_origin(n_labels=2, locale_dir=locale_dir, valid_frac=0.2, test_frac=0.2)
    assert label_names(splits) == ["sed", "tar"]  # git's messages are shared with git-gui; iso_ skipped
    texts = [t for examples in splits.values() for t, _ in examples]
    assert "Cancel" not in texts  # in two catalogs: no single answer
    assert len(texts) == 25
    three = gettext_origin(n_labels=3, locale_dir=locale_dir, valid_frac=0.2, test_frac=0.2)
    assert label_names(three) == ["git", "sed", "tar"]
    git = [t for examples in three.values() for t, y in examples if y == "git"]
    assert git == ["Show the log"]


def test_splits_share_no_message_and_are_deterministic(locale_dir):
    splits = gettext_origin(n_labels=3, locale_dir=locale_dir, valid_frac=0.3, test_frac=0.3)
    seen = {}
    for name, examples in splits.items():
        for text, _ in examples:
            assert seen.setdefault(text, name) == name
    assert all(splits[s] for s in ("train", "valid", "test"))
    assert splits == gettext_origin(n_labels=3, locale_dir=locale_dir, valid_frac=0.3, test_frac=0.3)


def test_bad_options(locale_dir):
    with pytest.raises(UserError, match="n_labels=1"):
        gettext_origin(n_labels=1, locale_dir=locale_dir)
    with pytest.raises(UserError, match="only 3 catalogs"):
        gettext_origin(n_labels=5, locale_dir=locale_dir)
    with pytest.raises(UserError, match="valid_frac"):
        gettext_origin(locale_dir=locale_dir, valid_frac=0.6, test_frac=0.5)


@pytest.mark.skipif(not Path("/usr/share/locale/de/LC_MESSAGES").is_dir(),
                    reason="no German gettext catalogs on this machine")
def test_real_catalogs():
    splits = gettext_origin()
    labels = label_names(splits)
    assert len(labels) == 8 and "git" in labels and not any(lb.startswith("iso_") for lb in labels)
    assert len(splits["train"]) > 5000 and len(splits["valid"]) > 500 and len(splits["test"]) > 500
    texts = {s: {t for t, _ in ex} for s, ex in splits.items()}
    assert not (texts["train"] & texts["valid"] or texts["train"] & texts["test"]
                or texts["valid"] & texts["test"])


def test_tsv_examples_and_data_config(tmp_path):
    (tmp_path / "train.tsv").write_text("good movie\tpos\nbad movie\tneg\n", encoding="utf-8")
    data = ClassifyDataConfig(train=str(tmp_path / "train.tsv"))
    assert load_examples(data) == {"train": [("good movie", "pos"), ("bad movie", "neg")], "valid": []}
    (tmp_path / "bad.tsv").write_text("no tab here\n", encoding="utf-8")
    with pytest.raises(UserError, match=r"bad\.tsv:1"):
        load_examples(ClassifyDataConfig(train=str(tmp_path / "bad.tsv")))
    with pytest.raises(ConfigError, match="corpus"):
        ClassifyDataConfig()
    with pytest.raises(ConfigError, match="mlm_rate"):
        ClassifyDataConfig(corpus="gettext-origin", mlm_rate=1.5)
