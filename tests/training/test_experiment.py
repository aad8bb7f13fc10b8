"""Experiment files: YAML/JSON, dotted overrides, and one-line errors naming the key."""

import json

import pytest

from aiayn.errors import UserError
from aiayn.tasks.translation import TASK
from aiayn.training.experiment import load_experiment as load_any
from aiayn.training.experiment import parse_value


def load_experiment(config, overrides=()):
    return load_any(config, overrides, task=TASK)

BASE = "out: runs/x\nmodel: {preset: tiny, d_model: 32}\ndata: {corpus: dates-numbers}\n" \
       "train: {max_steps: 10}\n"


@pytest.fixture
def config(tmp_path):
    path = tmp_path / "exp.yaml"
    path.write_text(BASE)
    return path


def test_yaml_and_json_and_overrides(tmp_path, config):
    exp = load_experiment(config, ["train.lr=1e-3", "model.n_heads=4", "out=elsewhere",
                                   "train.clip_norm=1", "data.vocab_size=500"])
    assert exp.train.lr == 1e-3 and exp.train.max_steps == 10 and exp.train.clip_norm == 1.0
    assert exp.out == "elsewhere" and exp.data.vocab_size == 500
    cfg = exp.model_config(vocab_size=77, pad_id=0)
    assert (cfg.d_model, cfg.n_heads, cfg.vocab_size, cfg.d_ff) == (32, 4, 77, 32)  # tiny's d_ff
    as_json = tmp_path / "exp.json"
    as_json.write_text(json.dumps({"out": "o", "data": {"corpus": "gettext"}, "train": {"seed": 3}}))
    exp = load_experiment(as_json)
    assert exp.train.seed == 3
    assert exp.model_config(vocab_size=100, pad_id=0).d_model == 512  # the paper's base


@pytest.mark.parametrize("override, message", [
    (["train.max_steps=abc"], "max_steps='abc': must be int"),
    (["train.warmup=10"], "warmup=10: unknown field for TrainConfig"),
    (["optim.lr=1"], "unknown key 'optim'"),
    (["model.d_modle=64"], "d_modle=64: unknown field for TransformerConfig"),
    (["model.preset=huge"], "model.preset='huge': unknown preset"),
    (["model.vocab_size=100"], "model.vocab_size: set by the tokenizer"),
    (["data.corpus_dir=somewhere"], "exactly one of corpus, corpus_dir"),
    (["train.label_smoothing=1.5"], "label_smoothing=1.5: must be in [0, 1)"),
    (["train.average_width=0.5"], "average_width=0.5: must be 0 (off) or in (0, 0.2887)"),
    (["train.lr_schedule=cosine"], "needs a peak lr"),
    (["max_steps"], "expected KEY=VALUE"),
])
def test_bad_values_name_the_key(config, override, message):
    with pytest.raises(UserError, match=None) as info:
        load_experiment(config, override)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_file_errors(tmp_path):
    with pytest.raises(UserError, match="config file not found"):
        load_experiment(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("train: {max_steps: 10\n")
    with pytest.raises(UserError, match=r"bad.yaml:\d+: invalid YAML"):
        load_experiment(bad)
    top = tmp_path / "top.yaml"
    top.write_text("trian: {}\ndata: {corpus: x}\n")
    with pytest.raises(UserError, match="unknown key 'trian'"):
        load_experiment(top)
    other = tmp_path / "other.yaml"
    other.write_text("task: language_model\n")
    with pytest.raises(UserError, match="not a translation config"):
        load_experiment(other)


def test_configs_resolve_by_name_path_or_preset(tmp_path, monkeypatch):
    """A built-in config by name works from any folder; a path still works; a preset name of
    the task's model config stands for {model: {preset: NAME}}."""
    monkeypatch.chdir(tmp_path)
    exp = load_experiment("gettext-small", ["out=o"])
    assert exp.data.corpus == "gettext" and exp.model["preset"] == "small"
    assert load_experiment("tiny", ["data.corpus=gettext"]).model == {"preset": "tiny"}
    with pytest.raises(UserError, match="not a built-in config"):
        load_experiment("no-such-config")
    (tmp_path / "gettext-small").mkdir()  # a local path of the same name wins
    with pytest.raises(UserError, match="config file not found"):
        load_experiment("gettext-small")


def test_parse_value_reads_yaml_scalars():
    assert parse_value("100") == 100 and parse_value("1e-3") == 1e-3 and parse_value("0.5") == 0.5
    assert parse_value("true") is True and parse_value("null") is None
    assert parse_value("runs/x") == "runs/x" and parse_value("abc") == "abc"
