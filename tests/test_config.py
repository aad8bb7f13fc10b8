import dataclasses
import importlib
import json
import re
from pathlib import Path

import pytest

from aiayn.config import TRANSFORMER_PRESETS, Config, TrainConfig, TransformerConfig, preset

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "aiayn"


def test_defaults_are_the_paper_base_model():
    cfg = TransformerConfig()
    assert (cfg.d_model, cfg.n_heads, cfg.d_ff, cfg.n_layers, cfg.dropout) == (512, 8, 2048, 6, 0.1)
    assert cfg.norm_first is False and cfg.positions == "sinusoidal" and cfg.activation == "relu"
    assert cfg.share_embeddings is True and cfg.attn_dropout == 0.0
    assert cfg.n_encoder_layers == cfg.n_decoder_layers == 6


def test_big_preset_is_table_3_big():
    cfg = preset("big")
    assert (cfg.d_model, cfg.n_heads, cfg.d_ff, cfg.dropout) == (1024, 16, 4096, 0.3)


@pytest.mark.parametrize("changes,field", [
    ({"d_model": 30, "n_heads": 4}, "d_model"),
    ({"dropout": -0.1}, "dropout"),
    ({"dropout": 1.0}, "dropout"),
    ({"activation": "tanh"}, "activation"),
    ({"positions": "rotary"}, "positions"),
    ({"d_model": "big"}, "d_model"),
    ({"n_layers": 0}, "n_layers"),
    ({"vocab_size": 10, "tgt_vocab_size": 12, "share_embeddings": True}, "share_embeddings"),
])
def test_invalid_values_name_the_field_and_value(changes, field):
    with pytest.raises(ValueError) as e:
        TransformerConfig(**changes)
    assert field in str(e.value) and repr(changes[field])[:4] in str(e.value)


def test_unknown_preset_and_field_are_rejected():
    with pytest.raises(ValueError, match="preset='huge'"):
        preset("huge")
    with pytest.raises(ValueError, match="d_modle"):
        TransformerConfig.from_dict({"d_modle": 512})


def test_json_round_trip(tmp_path):
    for name in TRANSFORMER_PRESETS:
        cfg = preset(name, n_encoder_layers=2, tgt_vocab_size=None)
        assert TransformerConfig.from_json(cfg.to_json()) == cfg
        cfg.save(tmp_path / "c.json")
        assert TransformerConfig.load(tmp_path / "c.json") == cfg
        assert json.loads((tmp_path / "c.json").read_text())["d_model"] == cfg.d_model


def test_separate_layer_counts_and_int_for_float():
    cfg = TransformerConfig(n_layers=6, n_decoder_layers=2, dropout=0)
    assert (cfg.n_encoder_layers, cfg.n_decoder_layers) == (6, 2)
    assert isinstance(cfg.dropout, float)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_numbers_are_rejected(value):
    from aiayn.config import TrainConfig

    with pytest.raises(ValueError, match="must be a finite number"):
        TrainConfig(lr=value, lr_schedule="constant")
    with pytest.raises(ValueError, match="must be a finite number"):
        TransformerConfig(dropout=value)


def test_unknown_fields_get_a_suggestion():
    from aiayn.config import TrainConfig

    with pytest.raises(ValueError, match=r"warmup=3: unknown field for TrainConfig \(did you mean "
                                         r"'warmup_steps'\?\)"):
        TrainConfig.from_dict({"warmup": 3})
    with pytest.raises(ValueError, match=r"unknown field for TrainConfig$"):
        TrainConfig.from_dict({"zzzz": 3})


def _config_classes() -> list[type]:
    """Every typed config class of the package: each module that declares a class of a
    `...Config` base is imported, then Config's subclasses are collected."""
    for path in sorted(PACKAGE.rglob("*.py")):
        if re.search(r"^class \w+\(\w*Config\):", path.read_text(encoding="utf-8"), re.M):
            parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
            importlib.import_module(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    found, todo = [], [Config]
    while todo:
        for cls in todo.pop().__subclasses__():
            found.append(cls)
            todo.append(cls)
    return found


def test_every_field_of_every_config_says_what_it_means():
    """Each field is declared with its meaning, `field(default=..., metadata={"help": ...})`, which
    `aiayn configs --keys` prints: a field added without one fails here, so the listing cannot
    drift from the code."""
    classes = {cls.__name__: cls for cls in _config_classes()}
    assert {"TrainConfig", "TransformerConfig", "DecoderLMConfig", "EncoderConfig", "ViTConfig",
            "GenerationConfig", "DataConfig", "LMDataConfig", "ClassifyDataConfig",
            "VisionDataConfig"} <= set(classes)
    bare = [f"{name}.{f.name}" for name, cls in classes.items() for f in dataclasses.fields(cls)
            if not str(f.metadata.get("help", "")).strip()]
    assert not bare, f"fields without a help text: {bare}"
    schedule = next(f for f in dataclasses.fields(TrainConfig) if f.name == "lr_schedule")
    assert schedule.metadata["help"] == "noam (§5.3) | constant | cosine"
