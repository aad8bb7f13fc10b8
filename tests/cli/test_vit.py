"""`aiayn vit train | predict | eval` and the Python API, end to end on tiny runs."""

import json

import numpy as np
import pytest
import torch
from PIL import Image

import aiayn
from aiayn.cli import main
from aiayn.data.images import digits
from aiayn.tasks.image_classification import ImageClassifier

FAST = ["train.max_steps=30", "train.eval_every=15", "train.save_every=15", "train.warmup_steps=5", "train.threads=1",
        "train.progress=false", "train.tensorboard=false"]


def _digit_png(path, image):
    """A digits image (1, 8, 8) in [0, 1] as an 8-bit grey PNG."""
    Image.fromarray((image[0].numpy() * 255).round().astype(np.uint8), "L").save(path)
    return path


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    out = tmp_path_factory.mktemp("vit") / "model"
    assert main(["vit", "train", "tiny", *FAST, "--corpus", "digits", "--out", str(out)]) == 0
    return out


def test_train_writes_a_complete_folder(trained, capsys):
    meta = json.loads((trained / "config.json").read_text())
    assert meta["family"] == "vit" and meta["classes"] == [str(d) for d in range(10)]
    assert meta["model"]["n_classes"] == 10 and meta["model"]["image_size"] == 8
    assert meta["image_mode"] == "L"
    for name in ("model.safetensors", "train_state.pt", "metrics.jsonl"):
        assert (trained / name).is_file()
    rows = [json.loads(line) for line in (trained / "metrics.jsonl").read_text().splitlines()]
    assert any("valid_accuracy" in r for r in rows)


def test_predict_and_eval(trained, tmp_path, capsys):
    x, y = digits().splits["test"]
    paths = [str(_digit_png(tmp_path / f"{i}.png", x[i])) for i in range(3)]
    capsys.readouterr()
    assert main(["vit", "predict", "--model", str(trained), "--json", *paths]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["image"] for r in rows] == paths
    clf = ImageClassifier.load(trained)
    expected = clf.predict(torch.stack([torch.round(x[i] * 255) / 255 for i in range(3)]))
    assert [(r["label"], pytest.approx(r["probability"], abs=1e-5)) for r in rows] == expected
    assert main(["vit", "eval", "--model", str(trained)]) == 0
    line = capsys.readouterr().out
    assert line.startswith("accuracy ") and "test split of digits (360 images)" in line
    accuracy = float(line.split()[1].rstrip("%")) / 100
    assert accuracy == pytest.approx(clf.evaluate(x, y), abs=1e-4)


def test_resume_continues_to_more_steps(trained, tmp_path):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(trained, copy)
    assert main(["vit", "train", "tiny", *FAST, "train.max_steps=40", "--corpus", "digits",
                 "--out", str(copy), "--resume"]) == 0
    state = torch.load(copy / "train_state.pt", weights_only=True)
    assert state["step"] == 40
    assert main(["vit", "train", "tiny", *FAST, "train.max_steps=50", "model.n_layers=1",
                 "--out", str(copy), "--resume"]) == 2  # model settings may not change


def test_python_api_load(trained):
    clf = aiayn.load(trained)
    assert isinstance(clf, ImageClassifier)
    x, _ = digits().splits["test"]
    label, prob = clf.predict(x[:1])[0]
    assert label in clf.classes and 0 < prob <= 1


def test_train_on_an_image_folder(tmp_path, capsys):
    x, y = digits().splits["train"]
    for digit in ("0", "1", "7"):
        (tmp_path / "imgs" / digit).mkdir(parents=True)
        for i in np.flatnonzero(y.numpy() == int(digit))[:15]:
            _digit_png(tmp_path / "imgs" / digit / f"{i}.png", x[i])
    out = tmp_path / "model"
    assert main(["vit", "train", "tiny", *FAST, "data.test_frac=0.2", "--images",
                 str(tmp_path / "imgs"), "--out", str(out)]) == 0
    clf = aiayn.load(out)
    assert clf.classes == ["0", "1", "7"] and clf.model.config.n_classes == 3
    capsys.readouterr()
    assert main(["vit", "eval", "--model", str(out), "--images", str(tmp_path / "imgs")]) == 0
    assert "(45 images)" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["vit", "train", "tiny", "train.max_steps=1"], "no output folder"),
    (["vit", "train", "tiny", "bogus.key=1", "--out", "X"], "unknown key 'bogus'"),
    (["vit", "train", "nosuch.yaml", "--out", "X"], "nosuch.yaml: config file not found"),
    (["vit", "train", "tiny", "model.patch_size=3", "--out", "X"], "patch_size=3"),
    (["vit", "train", "tiny", "data.batch_size=0", "--out", "X"], "data: invalid config: batch_size=0"),
    (["vit", "train", "tiny", "model.channels=3", "--out", "X"], "model.channels: set by the data"),
    (["vit", "train", "tiny", "stray", "--out", "X"], "'stray': expected KEY=VALUE"),
    (["vit", "predict", "--model", "nowhere", "a.png"], "nowhere: model folder not found"),
])
def test_errors_are_one_line(argv, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("aiayn: error: ") and message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "X").exists()  # nothing written


def test_predict_bad_image_is_one_line(trained, tmp_path, capsys):
    bad = tmp_path / "bad.png"
    bad.write_bytes(b"\x89PNG but not really")
    assert main(["vit", "predict", "--model", str(trained), str(bad)]) == 2
    assert "bad.png: not a readable image" in capsys.readouterr().err
