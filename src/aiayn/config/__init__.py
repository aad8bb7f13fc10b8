"""Typed configs with the paper's names, named presets, and JSON round-trips.

    base.py     Config: what every typed config shares (type checks, unknown keys, presets, JSON)
    models.py   the model configs, one per family (TransformerConfig, ...), and their presets
    train.py    TrainConfig: how any model family is trained (§5.3-§5.4)

Every name is importable from here (`from aiayn.config import TrainConfig`).

Every check lives in ``__post_init__`` and raises ``ValueError`` naming the field and the value, so a
bad config fails where it is written, not three layers deep in a matmul.
"""

from __future__ import annotations

from aiayn.config.base import Config, did_you_mean
from aiayn.config.base import _fail as _fail  # each data config's checks raise with it
from aiayn.config.models import (
    ACTIVATIONS,
    DECODER_LM_PRESETS,
    ENCODER_PRESETS,
    NORMS,
    POSITIONS,
    TRANSFORMER_PRESETS,
    VIT_PRESETS,
    BlockConfig,
    DecoderLMConfig,
    EncoderConfig,
    TransformerConfig,
    ViTConfig,
    encoder_preset,
    lm_preset,
    preset,
    vit_preset,
)
from aiayn.config.train import (
    FINAL_CHECKPOINTS,
    LR_SCHEDULES,
    MAX_AVERAGE_WIDTH,
    METRICS_FORMATS,
    PRECISIONS,
    TrainConfig,
    parse_stop_when,
)
from aiayn.errors import ConfigError

__all__ = ["ACTIVATIONS", "DECODER_LM_PRESETS", "ENCODER_PRESETS", "FINAL_CHECKPOINTS",
           "LR_SCHEDULES", "MAX_AVERAGE_WIDTH", "METRICS_FORMATS", "NORMS", "POSITIONS",
           "PRECISIONS", "TRANSFORMER_PRESETS", "VIT_PRESETS", "BlockConfig", "Config",
           "ConfigError", "DecoderLMConfig", "EncoderConfig", "TrainConfig", "TransformerConfig",
           "ViTConfig", "did_you_mean", "encoder_preset", "lm_preset", "parse_stop_when", "preset",
           "vit_preset"]
