"""aiayn: the Transformer of "Attention Is All You Need" (Vaswani et al., 2017)."""

from aiayn.api import load
from aiayn.config import (
    DecoderLMConfig,
    EncoderConfig,
    TransformerConfig,
    ViTConfig,
    encoder_preset,
    lm_preset,
    preset,
    vit_preset,
)
from aiayn.models import DecoderLM, EncoderModel, Transformer, VisionTransformer

__version__ = "0.1.0"
__all__ = [
    "DecoderLM", "DecoderLMConfig", "EncoderConfig", "EncoderModel", "Transformer",
    "TransformerConfig", "ViTConfig", "VisionTransformer", "encoder_preset", "load", "lm_preset",
    "preset", "vit_preset", "__version__",
]
