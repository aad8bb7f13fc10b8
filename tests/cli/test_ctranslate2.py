"""`aiayn translate | eval --engine ctranslate2`: the same command line and output lines as
`--engine torch`, from the folder's ctranslate2/ export; its refusals in one line."""

import io
import json
import sys

import pytest
import torch

from aiayn.cli import main
from tests.builders import digit_pairs, run, write_config, write_pairs
from tests.convert.test_ctranslate2 import random_folder

pytest.importorskip("ctranslate2")


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cli_ct2")
    torch.set_num_threads(1)
    config = write_config(tmp, max_steps=400, save_every=0)
    assert main(["train", str(config), "model.dropout=0"]) == 0
    write_pairs(digit_pairs(120, 11), tmp / "test.src", tmp / "test.tgt")
    return tmp / "model", tmp / "test.src", tmp / "test.tgt"


def _stdin(monkeypatch, path):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(path.read_bytes()),
                                                       encoding="utf-8"))


@pytest.mark.slow
@pytest.mark.parametrize("search", [[], ["--beam", "1"], ["--beam", "4", "--alpha", "1.0",
                                                           "--length-penalty", "avg",
                                                           "--early-stopping", "first_k"]],
                         ids=["§6.1 beam 4", "greedy", "avg first_k"])
def test_translate_prints_the_same_lines_with_either_engine(trained, capsys, monkeypatch, search):
    model, src, _ = trained
    lines = {}
    for engine in ("torch", "ctranslate2"):
        _stdin(monkeypatch, src)
        code, out, err = run(capsys, "translate", "--model", model, "--engine", engine,
                             "--workers", "1", "--threads", "1", *search)
        assert code == 0, err
        lines[engine] = out.splitlines()
    assert len(lines["torch"]) == 120 and lines["ctranslate2"] == lines["torch"]
    assert len(set(lines["torch"])) > 20  # the tiny model translates, if not always right
    assert (model / "ctranslate2" / "model.bin").is_file()  # exported on first use, kept


@pytest.mark.slow
@pytest.mark.parametrize("preset", ["t5-tiny", "bart-tiny"])
def test_a_trained_t5_or_bart_folder_translates_the_same_with_either_engine(
        tmp_path, capsys, monkeypatch, preset):
    """The family's encoder-decoders, trained here (T5's relative position bias, RMSNorm and
    unscaled scores; BART's learned positions, embedding LayerNorm and GELU), beam 4."""
    config = write_config(tmp_path, max_steps=400, save_every=0)
    assert main(["train", str(config), "model.dropout=0", f"model.preset={preset}",
                 "model.d_model=64", "model.d_ff=128", "model.n_heads=2", "model.n_layers=2",
                 "model.attn_dropout=0", "model.activation_dropout=0"]) == 0
    capsys.readouterr()  # the training's lines
    src = tmp_path / "test.src"
    write_pairs(digit_pairs(120, 11), src, tmp_path / "test.tgt")
    lines = {}
    for engine in ("torch", "ctranslate2"):
        _stdin(monkeypatch, src)
        code, out, err = run(capsys, "translate", "--model", tmp_path / "model", "--engine",
                             engine, "--workers", "1", "--threads", "1")
        assert code == 0, err
        lines[engine] = out.splitlines()
    assert len(lines["torch"]) == 120 and lines["ctranslate2"] == lines["torch"]
    assert len(set(lines["torch"])) > 10  # not a constant output (T5 learns slowest here)


@pytest.mark.slow
def test_eval_json_reports_the_engine_and_the_same_scores(trained, capsys):
    model, src, ref = trained
    scores = {}
    for engine in ("torch", "ctranslate2"):
        code, out, err = run(capsys, "eval", "--model", model, "--src", src, "--ref", ref,
                             "--json", "--engine", engine, "--workers", "2")
        assert code == 0, err
        scores[engine] = json.loads(out)
    assert scores["ctranslate2"]["engine"] == "ctranslate2" and scores["torch"]["engine"] == "torch"
    assert scores["ctranslate2"]["ct2_compute_type"] == "default"
    assert (scores["ctranslate2"]["ct2_inter_threads"], scores["ctranslate2"]["ct2_intra_threads"]) \
        == (2, 1)  # --workers 2: two batches side by side, a thread each
    for key in ("bleu", "chrf", "exact_match", "beam", "alpha", "length_penalty"):
        assert scores["ctranslate2"][key] == scores["torch"][key], key
    code, out, _ = run(capsys, "eval", "--model", model, "--src", src, "--ref", ref, "--json",
                       "--engine", "ctranslate2", "--ct2-compute-type", "int8")
    assert code == 0 and json.loads(out)["ct2_compute_type"] == "int8"


@pytest.mark.parametrize("argv, named", [
    (["--precision", "bf16"], "--precision bf16 is for --engine torch"),
    (["--early-stopping", "current_length"], "--early-stopping current_length, or an imported"),
    (["--ct2-compute-type", "int3"], "--ct2-compute-type int3"),
])
def test_what_the_ctranslate2_engine_cannot_do_is_refused_in_one_line(tmp_path, capsys, argv,
                                                                      named):
    folder = random_folder(tmp_path / "m")
    code, _, err = run(capsys, "translate", "--model", folder, "--engine", "ctranslate2",
                       *argv, "1 2")
    assert code == 2 and err.count("\n") == 1 and named in err


def test_serve_passes_the_engine_to_the_explorer(tmp_path, monkeypatch):
    """`aiayn serve --engine ctranslate2`: the explorer's Inspector decodes with CTranslate2
    (the server itself is the explorer's tests'; here, what it would serve)."""
    import types

    import aiayn.viz.server as server

    folder = random_folder(tmp_path / "m")
    served = {}
    monkeypatch.setattr(server, "create_app", lambda model, host: served.update(model=model))
    monkeypatch.setattr(server, "make_server", lambda *a: types.SimpleNamespace(
        effective_port=0, run=lambda: None))
    assert main(["serve", "--model", str(folder), "--engine", "ctranslate2",
                 "--ct2-compute-type", "int8"]) == 0
    engine = served["model"].obj.engine
    assert engine is not None and engine.compute_type == "int8"


def test_a_refusal_of_the_models_own_search_names_where_it_came_from(tmp_path, capsys):
    """An imported model's own search (generation_config.json, early_stopping false: HF's
    current_length) was refused naming --early-stopping, which the user never gave: the
    message now names the model's own settings too, and the flag that overrides them works."""
    folder = random_folder(tmp_path / "m")
    meta = json.loads((folder / "config.json").read_text())
    meta["generation"] = {"beam": 4, "early_stopping": "current_length"}
    (folder / "config.json").write_text(json.dumps(meta))
    code, _, err = run(capsys, "translate", "--model", folder, "--engine", "ctranslate2", "1 2")
    assert code == 2 and "imported model's own generation_config.json" in err, err
    code, out, _ = run(capsys, "translate", "--model", folder, "--engine", "ctranslate2",
                       "--early-stopping", "exact", "1 2")
    assert code == 0 and len(out.splitlines()) == 1
