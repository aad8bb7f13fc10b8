"""The family table: one place that says, for each kind of model folder, which typed config and
model class it holds, which task trains and uses it, and the object `aiayn.load` returns.

A folder's config.json names its family ("family": "transformer"); everything that dispatches on
a family (loading weights, `aiayn.load`, the attention views, the explorer) reads this table
instead of repeating the names.
"""

from __future__ import annotations

from dataclasses import dataclass

from aiayn.config import DecoderLMConfig, EncoderConfig, TransformerConfig, ViTConfig
from aiayn.models import DecoderLM, EncoderModel, Transformer, VisionTransformer

TRANSLATION = "transformer"  # encoder-decoder (§3), a Translator
LANGUAGE_MODEL = "decoder_lm"  # decoder-only (GPT-style), a LanguageModel
ENCODER = "encoder"  # encoder-only (BERT-style), a TextEncoder
VIT = "vit"  # Vision Transformer, an ImageClassifier


@dataclass(frozen=True)
class Family:
    name: str  # as written in config.json
    config: type  # the typed model config (aiayn.config)
    model: type  # the nn.Module built from it (aiayn.models)
    task: str  # the module under aiayn.tasks that trains it and holds its user-facing object
    object: str  # that object's class name in the task module (has .load(folder, device))
    what: str  # how messages name it ("a translation model")


FAMILIES: dict[str, Family] = {f.name: f for f in (
    Family(TRANSLATION, TransformerConfig, Transformer, "translation", "Translator",
           "a translation model"),
    Family(LANGUAGE_MODEL, DecoderLMConfig, DecoderLM, "language_model", "LanguageModel",
           "a language model"),
    Family(ENCODER, EncoderConfig, EncoderModel, "text_classification", "TextEncoder",
           "an encoder"),
    Family(VIT, ViTConfig, VisionTransformer, "image_classification", "ImageClassifier",
           "a vision transformer"),
)}

__all__ = ["ENCODER", "FAMILIES", "Family", "LANGUAGE_MODEL", "TRANSLATION", "VIT"]
