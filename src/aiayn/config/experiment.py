"""One experiment loader for every task: a config (YAML/JSON file, built-in name, or model preset)
plus dotted `key=value` overrides, layered over the task's recipe -> typed configs.

    task: seq2seq              # optional: which task the file is for (checked when present)
    out: runs/dates            # the model folder to write
    model: {preset: small, d_model: 256, n_layers: 3}   # model config fields (+ preset)
    data: {corpus: dates-numbers, vocab_size: 2000}      # the task's data config fields
    train: {max_minutes: 7, max_tokens: 4096}            # TrainConfig fields

The CLI (`aiayn train`, `aiayn lm train`, ...) and the Python API (`aiayn.tasks.*.experiment()`)
both call `load_experiment`, so a run started from either trains the same thing. Each file is read
once on the way: `aiayn train CONFIG` reads CONFIG to learn its task (config_task) and hands what
it read (a ConfigSource) to that task's loader; the recipe is read once per experiment.

A task's recipe is a built-in config (aiayn/configs/NAME.yaml, named by the family table,
aiayn.folder.families): the language model's is lm.yaml, the text classifier's classify.yaml, the ViT's
vit-digits.yaml; seq2seq has none (TrainConfig's defaults are the paper's §5 recipe).

  * Without a config, the experiment is the recipe (less its `out`: name the folder with --out;
    with model.init, the fine_tuning settings below apply over the recipe's train section).
  * A config's train section is layered over the recipe's: a language-model file that sets only
    `train: {max_steps: 500}` still gets the recipe's cosine schedule. A model section with
    `init` (fine-tuning a pretrained model) layers the family's `fine_tuning` settings over the
    recipe's first (the classifier's lower lr).
  * The model and data sections are the config's own; a model section without a preset starts
    from the family's default preset.

Each built-in config states every train setting of its task's recipe itself (a test checks it),
so that the file alone tells its whole recipe.

Overrides use dotted keys: `train.max_steps=200 model.dropout=0.2 out=runs/x`; values are read as
YAML scalars (`200` is an int, `1e-3` a float, `true` a bool). Unknown keys and wrong types are
errors naming the key and the value.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from aiayn.config import Config, did_you_mean
from aiayn.config.files import MAX_VALUES, check_values, load_json, load_yaml, read_text
from aiayn.config.train import TrainConfig
from aiayn.devices import resolve_device
from aiayn.errors import ConfigError, UserError
from aiayn.folder.families import Family, task_family, task_name
from aiayn.sizes import check_fits

SECTIONS = ("task", "out", "model", "data", "train")
# The built-in configs, shipped inside the package: `aiayn train demo` works from anywhere.
CONFIG_DIR = Path(__file__).resolve().parent.parent / "configs"
_NUMBER = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")


@dataclass
class Experiment:
    """A whole training run: the task (its family-table entry), where it goes, and its model /
    data / train settings."""

    task: Family
    out: str | None
    model: dict[str, Any]  # as written (preset name + field overrides); the data sets the rest
    data: Any  # the task's data config
    train: TrainConfig
    source: str = "config"  # where it came from, for messages

    def model_config(self, **from_data: Any) -> Config:
        """The typed model config: the preset, the model section, then what the data decides."""
        return build_model_config(self.task, self.model, from_data, self.source)

    def to_dict(self) -> dict[str, Any]:
        return {"task": self.task.task, "out": self.out, "model": dict(self.model),
                "data": self.data.to_dict(), "train": self.train.to_dict()}


def build_model_config(task: Family, model: dict[str, Any], from_data: dict[str, Any],
                       where: str = "config") -> Config:
    cls = task.config
    name = _check_preset(task, model, where)
    fields = {k: v for k, v in model.items() if k not in task.model_keys and k != "preset"}
    try:
        config = cls.from_dict({**cls.PRESETS.get(name, {}), **fields, **from_data})
    except ConfigError as e:
        raise UserError(f"{where}: model: {e}") from None
    check_fits(config, f"{where}: model", training=True)
    return config


# -- reading ------------------------------------------------------------------------------------

def builtin_configs() -> dict[str, Path]:
    """name -> file of the configs shipped with aiayn (aiayn/configs/*.yaml)."""
    return {p.stem: p for p in sorted(CONFIG_DIR.glob("*.yaml"))}


def recipe(task: Family) -> dict[str, Any]:
    """The raw sections of the task's recipe (its built-in config), {} for a task without one."""
    return read_config_file(CONFIG_DIR / f"{task.recipe}.yaml") if task.recipe else {}


def recipe_train(task: Family, model: dict[str, Any] | None = None,
                 task_recipe: dict[str, Any] | None = None) -> dict[str, Any]:
    """The train settings a run of the task starts from: its recipe's train section (of
    `task_recipe`, the recipe as read already, else read here), with the family's fine_tuning
    settings over it when the model section has `init`."""
    task_recipe = recipe(task) if task_recipe is None else task_recipe
    train = dict(task_recipe.get("train") or {})
    if model and "init" in model:
        train.update(task.fine_tuning)
    return train


def describe_config(path: Path) -> tuple[str, str]:
    """(task, first comment line) of a built-in config, for `aiayn configs`."""
    text = path.read_text(encoding="utf-8")
    first = next((line.lstrip("# ").strip() for line in text.splitlines() if line.startswith("#")), "")
    task = (load_yaml(text, path) or {}).get("task", "seq2seq")
    return task, first


def parse_value(text: str, where: str = "value") -> Any:
    """A YAML scalar, with `1e-3`-style numbers read as floats (YAML 1.1 reads them as text);
    a value beyond aiayn.config.files' bounds is a UserError naming `where`."""
    if _NUMBER.match(text.strip()):
        number = float(text)
        return int(text) if re.fullmatch(r"[-+]?\d+", text.strip()) else number
    try:
        return load_yaml(text, where) if text.strip() else ""
    except yaml.YAMLError:
        return text


def apply_overrides(raw: dict[str, Any], overrides: Sequence[str], where: str) -> dict[str, Any]:
    raw = json.loads(json.dumps(raw))  # a deep copy
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UserError(f"override {item!r}: expected KEY=VALUE (e.g. train.max_steps=100)")
        section, _, name = key.partition(".")
        if section not in SECTIONS:
            raise UserError(f"override {item!r}: unknown key {section!r}"
                            f"{did_you_mean(section, SECTIONS)}; keys are "
                            f"{', '.join(SECTIONS)} (e.g. train.max_steps=100)")
        if section in ("out", "task"):
            if name:
                raise UserError(f"override {item!r}: {section!r} has no sub-keys")
            raw[section] = value
            continue
        if not name:
            raise UserError(f"override {item!r}: name a field, e.g. {section}.FIELD=VALUE")
        if not isinstance(raw.get(section), dict):
            raw[section] = {}
        raw[section][name] = parse_value(value, f"override {key}")
    return raw


def read_config_file(path: str | Path) -> dict[str, Any]:
    """The sections of a YAML or JSON config file, read within bounds (aiayn.config.files: its
    size, nesting and YAML aliases); a bad file is a UserError naming it (and the line)."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: config file not found")
    try:
        text = read_text(path)
        data = load_json(text, path) if path.suffix == ".json" else load_yaml(text, path)
    except json.JSONDecodeError as e:
        raise UserError(f"{path}:{e.lineno}: invalid JSON ({e.msg})") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        reason = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise UserError(f"{path}{line}: invalid YAML ({reason})") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a mapping with keys {', '.join(SECTIONS)}")
    return data


@dataclass(frozen=True)
class ConfigSource:
    """A config as read (read_source): its sections as written and where they came from, for
    messages. Given to load_experiment in place of a file or name, it is not read again."""

    raw: dict[str, Any]
    where: str


Source = str | Path | dict[str, Any] | ConfigSource | None  # what names a config (read_source)


def read_source(config: Source, task: Family,
                task_recipe: dict[str, Any] | None = None) -> ConfigSource:
    """The raw sections of a config and where they came from: a file path, a built-in config
    name, a preset name of the task's model config, a dict, a ConfigSource (as it is), or None
    (the task's recipe: `task_recipe` as read already, else read here)."""
    if isinstance(config, ConfigSource):
        return config
    if config is None:  # the recipe, less its folder (a run without a config names its own)
        # and its train section, which experiment_from_dict layers under every config's
        task_recipe = recipe(task) if task_recipe is None else task_recipe
        raw = {k: v for k, v in task_recipe.items() if k not in ("out", "train")}
        return ConfigSource(raw, f"{task.recipe} (the {task.task} recipe)" if task.recipe
                            else f"the {task.task} defaults")
    if isinstance(config, dict):
        check_values(config, "config", MAX_VALUES)  # plain data, not too deep or large to copy
        return ConfigSource(json.loads(json.dumps(config)), "config")
    path, builtin = Path(config), builtin_configs()
    if path.exists() or path.suffix in (".yaml", ".yml", ".json") or "/" in str(config):
        return ConfigSource(read_config_file(path), str(config))
    if str(config) in builtin:
        return ConfigSource(read_config_file(builtin[str(config)]), f"{config} (built-in config)")
    if str(config) in task.config.PRESETS:
        return ConfigSource({"model": {"preset": str(config)}}, f"preset {config}")
    raise UserError(f"{config}: config file not found, and not a built-in config "
                    f"({', '.join(builtin)}) or a {task.task} preset "
                    f"({', '.join(task.config.PRESETS)})")


def config_task(config: Source, overrides: Sequence[str] = ()) -> str:
    """The task a config names (its `task:`, or a task= override; an alias read as the task it
    names); "seq2seq" when it names none (a model preset name is a seq2seq preset). `config`
    read once: read_source's ConfigSource, loaded later as it is."""
    if config is None:
        return "seq2seq"
    source = read_source(config, task_family("seq2seq"))
    where = source.where
    task = apply_overrides(source.raw, [o for o in overrides if o.startswith("task=")],
                           where).get("task", "seq2seq")
    try:
        return task_family(task).task
    except UserError as e:
        raise UserError(f"{where}: {e}") from None


def _section(cls: type[Config], fields: dict[str, Any], where: str, name: str) -> Any:
    try:
        return cls.from_dict(fields)
    except ConfigError as e:
        raise UserError(f"{where}: {name}: {e}") from None


def experiment_from_dict(raw: dict[str, Any], task: Family, where: str = "config",
                         task_recipe: dict[str, Any] | None = None) -> Experiment:
    """The experiment of the raw sections `raw` of a config of `task`, its train section layered
    over the recipe's (`task_recipe`, the recipe as read already, else read here)."""
    unknown = sorted(set(raw) - set(SECTIONS))
    if unknown:
        raise UserError(f"{where}: unknown key {unknown[0]!r}{did_you_mean(unknown[0], SECTIONS)}; "
                        f"keys are {', '.join(SECTIONS)}")
    if task_name(raw.get("task", task.task)) != task.task:  # an old name reads as today's
        raise UserError(f"{where}: task={raw['task']!r}: this is not a {task.task} config "
                        f"(`{task.command}` trains {task.task} models, `aiayn train` the task "
                        "a config names; `aiayn configs` lists each config with its task)")
    sections = {}
    for name in ("model", "data", "train"):
        value = raw.get(name) or {}
        if not isinstance(value, dict):
            raise UserError(f"{where}: {name}: expected a mapping of fields, got {value!r}")
        sections[name] = value
    data = _section(task.data_config, sections["data"], where, "data")
    train = _section(TrainConfig, {**recipe_train(task, sections["model"], task_recipe),
                                   **sections["train"]}, where, "train")
    try:  # an unavailable device fails here, before any data is read or folder written
        resolve_device(train.device)
    except ConfigError as e:
        raise UserError(f"{where}: train: {e}") from None
    if train.rdrop and task.task != "seq2seq":  # its two reads are in tasks/seq2seq_loss.py
        raise UserError(f"{where}: train.rdrop={train.rdrop}: R-Drop trains seq2seq models only, "
                        f"not {task.task}")
    out = raw.get("out")
    if out is not None and not isinstance(out, str):
        raise UserError(f"{where}: out={out!r}: must be a folder path")
    exp = Experiment(task, out, sections["model"], data, train, where)
    _check_model_section(exp)  # a bad model section fails now, before any data is read
    return exp


def _check_model_section(exp: Experiment) -> None:
    task, where = exp.task, exp.source
    if task.placeholders is not None:
        exp.model_config(**task.placeholders)
        return
    known = set(task.config.field_names()) | set(task.model_keys) | {"preset"}
    unknown = sorted(set(exp.model) - known)
    if unknown:
        raise UserError(f"{where}: model: invalid config: {unknown[0]}={exp.model[unknown[0]]!r}: "
                        f"unknown field for {task.config.__name__}")
    _check_preset(task, exp.model, where)


def _check_preset(task: Family, model: dict[str, Any], where: str) -> str | None:
    """The model section's preset name (or the task's default), after checking it and that no
    field the data decides is set."""
    name = model.get("preset", task.default_preset)
    if name is not None and (not isinstance(name, str) or name not in task.config.PRESETS):
        raise UserError(f"{where}: model.preset={name!r}: unknown preset; choose one of "
                        f"{', '.join(task.config.PRESETS)}")
    for key, why in task.set_by_data.items():
        if key in model:
            raise UserError(f"{where}: model.{key}: {why}")
    return name


def load_experiment(config: Source = None, overrides: Sequence[str] = (), *, task: str,
                    out: str | Path | None = None,
                    data: dict[str, Any] | None = None) -> Experiment:
    """The experiment of `config` (see read_source) with `overrides` ("train.max_steps=100"),
    layered over the recipe of `task` (a task name: "language_model"; see the module's doc).
    `out` replaces the config's output folder; `data` sets data fields to Python values (what
    CLI flags such as --text or --corpus say). The config and the recipe are each read once."""
    family = task_family(task)
    task_recipe = recipe(family)
    source = read_source(config, family, task_recipe)
    where = source.where
    raw = apply_overrides(source.raw, overrides, where)
    if data:
        if not isinstance(raw.get("data"), dict):
            raw["data"] = {}
        raw["data"].update(data)
    if out is not None:
        raw["out"] = str(out)
    return experiment_from_dict(raw, family, where, task_recipe)


def require_out(exp: Experiment, out: str | Path | None = None) -> Path:
    """The output folder of a run: `out`, else the experiment's; an error when neither is set."""
    folder = out or exp.out
    if not folder:
        raise UserError(f"{exp.source}: no output folder: pass --out DIR or set out: in the config")
    return Path(folder)


__all__ = ["CONFIG_DIR", "ConfigSource", "Experiment", "Source", "apply_overrides",
           "build_model_config", "builtin_configs", "config_task", "describe_config",
           "experiment_from_dict", "load_experiment", "parse_value", "read_config_file",
           "read_source", "recipe", "recipe_train", "require_out"]
