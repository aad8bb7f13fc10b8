"""The evaluation behind the API (aiayn.tasks.evaluation): a Python user gets what `aiayn eval
--json` prints, the translations it writes, and the memory checks the CLI runs."""

import json

import pytest
import torch

from aiayn import sizes
from aiayn.cli import main
from aiayn.errors import UserError
from aiayn.tasks.evaluation import evaluate
from aiayn.tasks.translator import Translator
from tests.builders import run, write_config

TIMING = ("seconds", "sentences_per_s", "tokens_per_s")


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("evaluation")
    assert main(["train", str(write_config(tmp, max_steps=6))]) == 0
    return tmp, tmp / "model"


def _lines(path):
    return path.read_text(encoding="utf-8").splitlines()


@pytest.mark.parametrize("argv, kw", [
    ([], {}),  # the folder's search (§6.1: beam 4, alpha 0.6), one process
    (["--beam", "2", "--alpha", "1.0", "--length-penalty", "avg", "--batch-size", "3",
      "--min-length", "0", "--no-repeat-ngram-size", "2", "--rouge"],
     {"beam": 2, "alpha": 1.0, "length_penalty": "avg", "batch_size": 3, "min_length": 0,
      "no_repeat_ngram_size": 2, "rouge": True}),
])
def test_the_api_gives_the_record_and_translations_of_eval_json(trained, capsys, tmp_path,
                                                                  argv, kw):
    tmp, model = trained
    before = torch.get_num_threads()
    try:
        code, out, err = run(capsys, "eval", "--model", model, "--src", tmp / "valid.src",
                             "--ref", tmp / "valid.tgt", "--json", "--device", "cpu",
                             "--threads", "1", "--workers", "1", "--hyp", tmp_path / "hyp.txt",
                             *argv)
        assert code == 0, err
        cli = json.loads(out)
        torch.set_num_threads(1)  # as --threads 1
        record, hyps = evaluate(model, _lines(tmp / "valid.src"), _lines(tmp / "valid.tgt"), **kw)
    finally:
        torch.set_num_threads(before)
    assert all(record[k] > 0 for k in TIMING)
    strip = lambda r: {k: v for k, v in r.items() if k not in TIMING}  # noqa: E731
    assert strip(record) == strip(cli) and list(record) == list(cli)  # the same keys, in order
    assert hyps == _lines(tmp_path / "hyp.txt")
    assert ("rouge1" in record) == bool(kw.get("rouge"))


def test_translate_checks_the_memory_as_the_cli_does_naming_its_arguments(trained, monkeypatch):
    _, model = trained
    translator = Translator.load(model)
    monkeypatch.delenv(sizes.SKIP_ENV, raising=False)
    monkeypatch.setattr(sizes, "available_bytes", lambda device=None: 2**20)  # 1 MiB
    sentences = [f"{i % 10} {i % 7}" for i in range(20000)]
    with pytest.raises(UserError, match=r"^batch_size 1000000: would need ~.*at most "):
        translator.translate(sentences, beam=4, batch_size=1_000_000)
    with pytest.raises(UserError, match=r"^beam 64: would need ~.* the search of one sentence"):
        translator.translate(["1 2"], beam=64)
    with pytest.raises(UserError, match=r"^--beam 64: would need"):  # the CLI's names
        translator.check_memory(["1 2"], beam=64, names=("--beam", "--batch-size"))
    monkeypatch.setattr(sizes, "available_bytes", lambda device=None: 2**40)
    assert len(translator.translate(sentences[:3], beam=2)) == 3  # what fits decodes
    for bad in ({"beam": 0}, {"batch_size": 0}):  # refused by the search, naming the parameter
        name = next(iter(bad))
        with pytest.raises(ValueError, match=rf"^{name}=0: must be a positive integer"):
            translator.translate(["1"], **bad)


def test_a_test_set_and_its_references_must_pair_up(trained):
    _, model = trained
    with pytest.raises(UserError, match="2 sources but 1 references"):
        evaluate(model, ["1", "2"], ["eins"])
