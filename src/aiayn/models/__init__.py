"""Model families built from aiayn.nn blocks: one readable file each."""

from aiayn.models.decoder_lm import DecoderLM
from aiayn.models.encoder import EncoderModel
from aiayn.models.transformer import Transformer
from aiayn.models.vit import VisionTransformer

__all__ = ["DecoderLM", "EncoderModel", "Transformer", "VisionTransformer"]
