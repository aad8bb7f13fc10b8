"""`aiayn export hf` refuses a folder whose tokenizer aiayn could not read, in one line naming
the file, before it writes anything (it used to copy a `{}` tokenizer.json and exit 0)."""

import shutil

import pytest

from aiayn.cli import main
from aiayn.data.special import SPECIAL_TOKENS
from tests.builders import run, write_config


@pytest.fixture(scope="module")
def translation_folder(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("mt")
    assert main(["train", str(write_config(tmp, max_steps=2)), "--out", str(tmp / "m")]) == 0
    return tmp / "m"


def _too_many_tokens() -> str:
    """A valid tokenizer with aiayn's special tokens and 1,000 words: more than the model's rows."""
    from tokenizers import Tokenizer, models

    words = [*SPECIAL_TOKENS, *(f"w{i}" for i in range(1000 - len(SPECIAL_TOKENS)))]
    return Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)},
                                      unk_token=SPECIAL_TOKENS[3])).to_str()


@pytest.mark.parametrize("text, problem", [
    ("{}", "not a valid tokenizer file"),
    ("not JSON {", "not a valid tokenizer file"),
    (None, "1000 tokens, but the model has"),
])
def test_export_refuses_a_tokenizer_aiayn_cannot_read_and_writes_nothing(
        translation_folder, tmp_path, capsys, text, problem):
    folder = tmp_path / "model"
    shutil.copytree(translation_folder, folder)
    (folder / "tokenizer.json").write_text(_too_many_tokens() if text is None else text)
    capsys.readouterr()
    code, out, err = run(capsys, "export", "hf", "--model", folder, "--out", tmp_path / "hf")
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert f"{folder / 'tokenizer.json'}: {problem}" in err, err
    assert not (tmp_path / "hf").exists()


def test_export_of_a_good_folder_still_copies_its_tokenizer_as_it_is(translation_folder,
                                                                      tmp_path, capsys):
    code, out, err = run(capsys, "export", "hf", "--model", translation_folder, "--out",
                         tmp_path / "hf")
    assert code == 0, err
    assert (tmp_path / "hf" / "tokenizer.json").read_bytes() == \
        (translation_folder / "tokenizer.json").read_bytes()
