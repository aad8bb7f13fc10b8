"""Moved to aiayn.config.presets (the model configs' named presets); kept as an alias until every
import names the new path."""

from __future__ import annotations

from aiayn.config.presets import (
    DECODER_LM_PRESETS,
    ENCODER_PRESETS,
    TRANSFORMER_PRESETS,
    VIT_PRESETS,
)

__all__ = ["DECODER_LM_PRESETS", "ENCODER_PRESETS", "TRANSFORMER_PRESETS", "VIT_PRESETS"]
