"""A training run described by one file (YAML or JSON) plus `key=value` overrides.

    out: runs/dates            # the model folder to write
    model: {preset: small, d_model: 256, n_layers: 3}    # TransformerConfig fields (+ preset)
    data: {corpus: dates-numbers, vocab_size: 2000}       # DataConfig fields
    train: {max_minutes: 7, max_tokens: 4096}             # TrainConfig fields

Overrides use dotted keys: `train.max_steps=200 model.dropout=0.2 out=runs/x`; values are read
as YAML scalars (`200` is an int, `1e-3` a float, `true` a bool). Unknown keys and wrong types
are errors naming the key and the value.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from aiayn.config import TRANSFORMER_PRESETS, Config, TrainConfig, TransformerConfig, _fail
from aiayn.errors import ConfigError, UserError

SECTIONS = ("out", "model", "data", "train")
_NUMBER = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")


@dataclass
class DataConfig(Config):
    """Where the parallel text comes from and how it is tokenised (§5.1)."""

    corpus: str | None = None  # a built-in corpus: "dates-numbers" or "gettext"
    corpus_dir: str | None = None  # a folder written by `aiayn data` ({train,valid}.{src,tgt})
    train_src: str | None = None  # or aligned files, one sentence per line
    train_tgt: str | None = None
    valid_src: str | None = None
    valid_tgt: str | None = None
    tokenizer: str = "bpe"  # §5.1: byte-pair encoding, one vocabulary for both languages
    vocab_size: int = 8000
    max_train_pairs: int | None = None  # use only the first N training pairs
    valid_pairs: int = 500  # validation pairs scored (loss and BLEU) at each evaluation
    valid_beam: int = 1  # beam for validation BLEU (1 = greedy: fast)

    def __post_init__(self) -> None:
        self._check_types()
        sources = [name for name in ("corpus", "corpus_dir", "train_src") if getattr(self, name)]
        if len(sources) != 1:
            _fail("corpus", self.corpus, "give exactly one of corpus, corpus_dir, or "
                  "train_src + train_tgt")
        for a, b in (("train_src", "train_tgt"), ("valid_src", "valid_tgt")):
            if bool(getattr(self, a)) != bool(getattr(self, b)):
                _fail(a if not getattr(self, a) else b, None, f"{a} and {b} go together")
        for name in ("vocab_size", "valid_pairs", "valid_beam"):
            if getattr(self, name) <= 0:
                _fail(name, getattr(self, name), "must be a positive integer")
        if self.max_train_pairs is not None and self.max_train_pairs <= 0:
            _fail("max_train_pairs", self.max_train_pairs, "must be a positive integer")


@dataclass
class Experiment:
    out: str | None
    model: dict[str, Any]  # as written (preset name + overrides); vocab_size comes from the data
    data: DataConfig
    train: TrainConfig
    source: str = "config"  # the file it came from, for messages
    extra: dict[str, Any] = field(default_factory=dict)

    def model_config(self, vocab_size: int, pad_id: int) -> TransformerConfig:
        return build_model_config(self.model, vocab_size, pad_id, self.source)

    def to_dict(self) -> dict[str, Any]:
        return {"out": self.out, "model": dict(self.model), "data": self.data.to_dict(),
                "train": self.train.to_dict()}


def build_model_config(model: dict[str, Any], vocab_size: int, pad_id: int,
                       where: str = "config") -> TransformerConfig:
    fields = dict(model)
    name = fields.pop("preset", None)
    if name is not None and name not in TRANSFORMER_PRESETS:
        raise UserError(f"{where}: model.preset={name!r}: unknown preset; choose one of "
                        f"{', '.join(TRANSFORMER_PRESETS)}")
    if "vocab_size" in fields or "pad_id" in fields:
        key = "vocab_size" if "vocab_size" in fields else "pad_id"
        raise UserError(f"{where}: model.{key}: set by the tokenizer (use data.vocab_size)")
    base = dict(TRANSFORMER_PRESETS[name]) if name else {}
    base.update(fields, vocab_size=vocab_size, pad_id=pad_id)
    try:
        return TransformerConfig.from_dict(base)
    except ConfigError as e:
        raise UserError(f"{where}: model: {e}") from None


def parse_value(text: str) -> Any:
    """A YAML scalar, with `1e-3`-style numbers read as floats (YAML 1.1 reads them as text)."""
    if _NUMBER.match(text.strip()):
        number = float(text)
        return int(text) if re.fullmatch(r"[-+]?\d+", text.strip()) else number
    try:
        return yaml.safe_load(text) if text.strip() else ""
    except yaml.YAMLError:
        return text


def apply_overrides(raw: dict[str, Any], overrides: list[str], where: str) -> dict[str, Any]:
    raw = json.loads(json.dumps(raw))  # a deep copy
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UserError(f"override {item!r}: expected KEY=VALUE (e.g. train.max_steps=100)")
        section, _, name = key.partition(".")
        if section not in SECTIONS:
            raise UserError(f"override {item!r}: unknown key {section!r}; keys are "
                            f"{', '.join(SECTIONS)} (e.g. train.max_steps=100)")
        if section == "out":
            if name:
                raise UserError(f"override {item!r}: 'out' has no sub-keys")
            raw["out"] = value
            continue
        if not name:
            raise UserError(f"override {item!r}: name a field, e.g. {section}.FIELD=VALUE")
        if not isinstance(raw.get(section), dict):
            raw[section] = {}
        raw[section][name] = parse_value(value)
    return raw


def read_config_file(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: config file not found")
    try:
        text = path.read_text(encoding="utf-8")
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except UnicodeDecodeError as e:
        raise UserError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
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


def experiment_from_dict(raw: dict[str, Any], where: str = "config") -> Experiment:
    unknown = sorted(set(raw) - set(SECTIONS))
    if unknown:
        raise UserError(f"{where}: unknown key {unknown[0]!r}; keys are {', '.join(SECTIONS)}")
    sections = {}
    for name in ("model", "data", "train"):
        value = raw.get(name) or {}
        if not isinstance(value, dict):
            raise UserError(f"{where}: {name}: expected a mapping of fields, got {value!r}")
        sections[name] = value
    try:
        data = DataConfig.from_dict(sections["data"])
    except ConfigError as e:
        raise UserError(f"{where}: data: {e}") from None
    try:
        train = TrainConfig.from_dict(sections["train"])
    except ConfigError as e:
        raise UserError(f"{where}: train: {e}") from None
    out = raw.get("out")
    if out is not None and not isinstance(out, str):
        raise UserError(f"{where}: out={out!r}: must be a folder path")
    exp = Experiment(out, sections["model"], data, train, where)
    exp.model_config(vocab_size=data.vocab_size, pad_id=0)  # check the model section now
    return exp


def load_experiment(path: str | Path, overrides: list[str] | None = None) -> Experiment:
    raw = apply_overrides(read_config_file(path), overrides or [], str(path))
    return experiment_from_dict(raw, str(path))
