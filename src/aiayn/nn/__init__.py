"""Building blocks of the Transformer (§3), shared by every model family in aiayn.models."""

from aiayn.nn.attention import MultiHeadAttention, joined_qkv_kept, scaled_dot_product_attention
from aiayn.nn.cache import AttentionCache, KVCache
from aiayn.nn.dropout import Dropout
from aiayn.nn.feedforward import FeedForward
from aiayn.nn.layers import Decoder, DecoderLayer, Encoder, EncoderLayer, Residual
from aiayn.nn.norm import RMSNorm
from aiayn.nn.positions import (
    InputEmbedding,
    LearnedPositions,
    SinusoidalPositions,
    TokenEmbedding,
    make_positions,
    sinusoidal_positions,
)
from aiayn.nn.relative_position import RelativePositionBias

__all__ = [
    "AttentionCache", "Decoder", "DecoderLayer", "Dropout", "Encoder", "EncoderLayer", "FeedForward",
    "InputEmbedding", "KVCache", "LearnedPositions", "MultiHeadAttention", "RMSNorm",
    "RelativePositionBias", "Residual",
    "SinusoidalPositions", "TokenEmbedding", "joined_qkv_kept", "make_positions",
    "scaled_dot_product_attention",
    "sinusoidal_positions",
]
