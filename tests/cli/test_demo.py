"""`aiayn demo` on a tiny budget: the files and the report, not the accuracy (see README)."""

import json
from pathlib import Path

import pytest

from aiayn.cli import main
from aiayn.tasks import seq2seq

pytestmark = pytest.mark.slow  # end-to-end: real processes of the CLI

TINY = ["data.max_train_pairs=400", "data.valid_pairs=10", "model.d_model=16", "model.d_ff=32",
        "model.n_layers=1", "train.eval_every=0", "train.save_every=0", "train.progress=false",
        "train.tensorboard=false", "train.threads=1"]


def test_the_demo_recipe_is_the_built_in_demo_config():
    """`aiayn demo` trains the shipped `demo` config, the one `aiayn train demo` runs (and the
    clone's configs/demo.yaml is the same file)."""
    exp = seq2seq.experiment("demo")
    same = seq2seq.experiment(str(Path(__file__).resolve().parents[2] / "configs" / "demo.yaml"))
    assert exp.to_dict() == same.to_dict()
    assert exp.model == {"d_model": 128, "n_heads": 4, "d_ff": 512, "n_layers": 2,
                         "dropout": 0.1, "max_len": 64}
    assert exp.train.max_minutes == 7.0 and exp.train.threads == 1
    # it stops once validation is saturated (the time budget is the cap)
    assert exp.train.stop_when == "valid_exact_match>=100" and exp.train.stop_patience == 2


def test_demo_writes_a_model_folder_metrics_and_a_heatmap(tmp_path, capsys):
    out = tmp_path / "demo"
    code = main(["demo", "--out", str(out), "--minutes", "0.05", "--test", "20", "--beam", "2",
                 *TINY])
    printed = capsys.readouterr().out
    assert code == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert {"exact_match", "bleu", "chrf", "train_seconds"} <= set(metrics)
    assert metrics["test_sentences"] == 20 and metrics["train_seconds"] < 30
    assert {"config.json", "model.safetensors", "tokenizer.json", "attention.png"} <= \
        {p.name for p in out.iterdir()}
    assert (out / "attention.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "sample translations" in printed and f"aiayn translate --model {out}" in printed
    # The folder is an ordinary model folder.
    assert main(["translate", "--model", str(out), "--beam", "1", "March 5, 2024"]) == 0
    # Running the demo again replaces its own folder; it never replaces anything else.
    assert main(["demo", "--out", str(out), "--minutes", "0.02", "--test", "5", *TINY]) == 0
    assert json.loads((out / "metrics.json").read_text())["test_sentences"] == 5
    other = tmp_path / "mine"
    other.mkdir()
    (other / "notes.txt").write_text("keep")
    assert main(["demo", "--out", str(other), "--minutes", "0.02", *TINY]) == 2
    assert [p.name for p in other.iterdir()] == ["notes.txt"]
    assert not list(tmp_path.glob(".*"))  # no temporary folder left behind
