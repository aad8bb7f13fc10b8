"""Experiment files: YAML/JSON, dotted overrides, one-line errors naming the key, and the
tasks' recipes (built-in configs) every config is layered over."""

import importlib
import json

import pytest
import yaml

from aiayn.config import TrainConfig
from aiayn.config.experiment import (
    CONFIG_DIR,
    builtin_configs,
    config_task,
    parse_value,
    recipe_train,
)
from aiayn.config.experiment import load_experiment as load_any
from aiayn.errors import UserError
from aiayn.folder.families import FAMILIES, task_family
from aiayn.tasks.seq2seq import TASK


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
    with pytest.raises(UserError, match="not a seq2seq config"):
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


# -- recipes: a built-in config is the one source of its settings ------------------------------

# data a task's recipe leaves to the command line (--corpus), for loading without one
DATA_OF = {"seq2seq": {"corpus": "gettext"}, "text_classification": {"corpus": "gettext-origin"}}


def _builtin(name):
    return yaml.safe_load((CONFIG_DIR / f"{name}.yaml").read_text(encoding="utf-8"))


def test_every_built_in_config_loads_for_the_task_it_names():
    """`aiayn train NAME` reads the task from the file; each built-in config loads for it (the
    classifier's recipe names no corpus: CLI flags or a data override give one)."""
    for name in builtin_configs():
        task = config_task(name)
        assert task == _builtin(name).get("task", "seq2seq"), name
        data = None if _builtin(name).get("data") else DATA_OF.get(task)
        exp = load_any(name, task=task, data=data)
        assert exp.task is task_family(task) and exp.to_dict()["task"] == task


@pytest.mark.parametrize("family", FAMILIES.values(), ids=lambda f: f.task)
def test_a_run_without_a_config_is_its_task_recipe(family):
    """The family table names each task's recipe, a built-in config of that task; without a
    config the experiment is that file (less its output folder) and its train settings are the
    file's, with nothing added from elsewhere. Seq2seq's recipe is TrainConfig's own (§5)."""
    exp = load_any(None, task=family.task, data=DATA_OF.get(family.task))
    if family.recipe is None:
        assert family.task == "seq2seq" and exp.train == TrainConfig()
        return
    raw = _builtin(family.recipe)
    assert raw["task"] == family.task and exp.out is None
    assert exp.train == TrainConfig.from_dict(raw["train"])
    assert exp.model == raw.get("model", {})


def test_each_built_in_config_states_its_whole_recipe():
    """A config's train section is layered over its task's recipe: a built-in config states every
    setting of that recipe itself (lm-stdlib's warmup differs from lm.yaml's), so that the file
    alone says what it trains."""
    for name, path in builtin_configs().items():
        family = task_family(config_task(name))
        missing = set(recipe_train(family)) - set(_builtin(name).get("train") or {})
        assert not missing, f"{path.name} leaves {sorted(missing)} to the {family.recipe} recipe"


def test_a_config_file_is_layered_over_its_task_recipe(tmp_path):
    """A user's language-model file that sets only max_steps still trains with the recipe's
    cosine schedule; fine-tuning (model.init) takes the family's fine_tuning settings over the
    recipe's, and the file's own train settings over both."""
    lm = tmp_path / "lm.yaml"
    lm.write_text("task: language_model\ntrain: {max_steps: 7}\n")
    recipe = _builtin("lm")["train"]
    assert load_any(lm, task="language_model").train == \
        TrainConfig.from_dict({**recipe, "max_steps": 7})
    clf = _builtin("classify")["train"]
    tuned = task_family("text_classification").fine_tuning
    assert tuned == {"lr": 5e-5}  # BERT's fine-tuning range: 2e-5 .. 5e-5
    exp = load_any({"model": {"init": "m"}, "train": {"warmup_steps": 9}}, task="text_classification",
                   data=DATA_OF["text_classification"])
    assert exp.train == TrainConfig.from_dict({**clf, **tuned, "warmup_steps": 9})


def test_no_task_module_states_train_settings():
    """Train settings live in the built-in configs alone: no task module (nor the presets, which
    are architecture) holds a table of TrainConfig fields."""
    train_keys = set(TrainConfig.field_names())
    for family in FAMILIES.values():
        module = importlib.import_module(f"aiayn.tasks.{family.task}")
        tables = [name for name, value in vars(module).items()
                  if isinstance(value, dict) and train_keys & set(value) and not name.startswith("__")]
        assert not tables, f"{module.__name__} defines train settings: {tables}"
        for name, fields in family.config.PRESETS.items():
            assert set(fields) <= set(family.config.field_names()), name


def test_config_task_names_the_task_of_a_config(tmp_path):
    assert config_task("lm-char") == "language_model" and config_task("demo") == "seq2seq"
    assert config_task("tiny") == "seq2seq"  # a preset name: the seq2seq preset
    assert config_task("demo", ["task=image_classification"]) == "image_classification"
    bad = tmp_path / "bad.yaml"
    bad.write_text("task: lm\n")
    with pytest.raises(UserError, match=r"bad.yaml: task='lm': unknown task; choose one of "
                                        r"seq2seq, language_model"):
        config_task(bad)


class _Started(Exception):
    """Raised by the stand-in for a task's train(): the experiment reached the Trainer's door."""


@pytest.mark.parametrize("task, text", [
    ("seq2seq", "model: {preset: tiny}\ndata: {corpus: dates-numbers}\n"),
    ("language_model", "task: language_model\nmodel: {preset: tiny}\n"
                       "data: {corpus: python-stdlib}\n"),
])
def test_aiayn_train_reads_its_config_once(tmp_path, monkeypatch, task, text):
    """`aiayn train CONFIG` reads CONFIG to learn its task, then loads the experiment from what
    it read: each file (the config, the task's recipe) is parsed once on the way to train()."""
    from aiayn import cli
    from aiayn.config import experiment

    path = tmp_path / "exp.yaml"
    path.write_text(text)
    reads, read = [], experiment.read_config_file
    monkeypatch.setattr(experiment, "read_config_file",
                        lambda p: reads.append(str(p)) or read(p))
    started = []

    def train(exp, **_):
        started.append(exp)
        raise _Started

    monkeypatch.setattr(importlib.import_module(f"aiayn.tasks.{task}"), "train", train)
    with pytest.raises(_Started):
        cli.main(["train", str(path), "train.max_steps=3", "--out", str(tmp_path / "run")])
    recipe = task_family(task).recipe
    assert sorted(reads) == sorted([str(path), *([str(CONFIG_DIR / f"{recipe}.yaml")]
                                                 if recipe else [])])
    (exp,) = started
    assert exp.task.task == task and exp.train.max_steps == 3 and exp.source == str(path)
