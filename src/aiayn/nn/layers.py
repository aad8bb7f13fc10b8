"""Encoder and decoder layers and their stacks (§3.1), from attention + feed-forward blocks.

Each sub-layer is wrapped as in §3.1 / §5.4: post-norm (the paper, default)
    x = LayerNorm(x + Dropout(Sublayer(x)))
or pre-norm (`norm_first=True`, the later GPT-2 / ViT / T5 variant)
    x = x + Dropout(Sublayer(LayerNorm(x))).
The LayerNorm may be T5's RMSNorm instead (TransformerConfig.norm; nn/norm.py), and a stack may
add T5's relative position bias to every self-attention score (nn/relative_position.py).
"""

from __future__ import annotations

from torch import Tensor, nn

from aiayn.config import BlockConfig
from aiayn.nn.attention import MultiHeadAttention
from aiayn.nn.cache import AttentionCache, KVCache
from aiayn.nn.dropout import Dropout
from aiayn.nn.feedforward import FeedForward
from aiayn.nn.norm import make_norm
from aiayn.nn.relative_position import make_relative_bias


class Residual(nn.Module):
    """One sub-layer's residual connection, dropout and LayerNorm, in post- or pre-norm order."""

    def __init__(self, cfg: BlockConfig):
        super().__init__()
        self.norm_first = cfg.norm_first
        self.norm = make_norm(cfg)
        self.dropout = Dropout(cfg.dropout)

    def pre(self, x: Tensor) -> Tensor:
        """The sub-layer's input."""
        return self.norm(x) if self.norm_first else x

    def post(self, x: Tensor, y: Tensor) -> Tensor:
        """Combine the layer input x with the sub-layer output y."""
        x = x + self.dropout(y)
        return x if self.norm_first else self.norm(x)


def _attention(cfg: BlockConfig) -> MultiHeadAttention:
    # T5 leaves out §3.2.1's 1/sqrt(d_k) and may have heads narrower than d_model / h; Table 3
    # row (B) narrows d_k alone (TransformerConfig.scale_attention, head_dim, value_dim; the other
    # families' configs have no such options: the paper's).
    return MultiHeadAttention(cfg.d_model, cfg.n_heads, cfg.attn_dropout, cfg.bias,
                              scale=getattr(cfg, "scale_attention", True),
                              head_dim=getattr(cfg, "head_dim", None),
                              value_dim=getattr(cfg, "value_dim", None))


def _feed_forward(cfg: BlockConfig) -> FeedForward:
    # T5 v1.1's gated feed-forward is a TransformerConfig option (gated_ffn), as above.
    return FeedForward(cfg.d_model, cfg.d_ff, cfg.activation, cfg.bias, cfg.activation_dropout,
                       gated=getattr(cfg, "gated_ffn", False))


class EncoderLayer(nn.Module):
    """Self-attention + feed-forward (§3.1, encoder). With a causal mask this is also the layer
    of a decoder-only language model (GPT), which has no cross-attention."""

    def __init__(self, cfg: BlockConfig):
        super().__init__()
        self.self_attn = _attention(cfg)
        self.attn_residual = Residual(cfg)
        self.ffn = _feed_forward(cfg)
        self.ffn_residual = Residual(cfg)

    def forward(self, x: Tensor, mask: Tensor | None = None, is_causal: bool = False,
                cache: AttentionCache | None = None, return_attn: bool = False,
                bias: Tensor | None = None):
        """x (B, T, D) -> (B, T, D) [, self-attention weights (B, H, T, T_k)].
        bias: the stack's relative position bias (1, H, T, T_k), or None."""
        h = self.attn_residual.pre(x)
        a = self.self_attn(h, h, h, mask, return_attn=return_attn, cache=cache, is_causal=is_causal,
                           bias=bias)
        a, weights = a if return_attn else (a, None)
        x = self.attn_residual.post(x, a)
        x = self.ffn_residual.post(x, self.ffn(self.ffn_residual.pre(x)))
        return (x, weights) if return_attn else x


class DecoderLayer(nn.Module):
    """Masked self-attention + encoder-decoder attention + feed-forward (§3.1, decoder)."""

    def __init__(self, cfg: BlockConfig):
        super().__init__()
        self.self_attn = _attention(cfg)
        self.self_residual = Residual(cfg)
        self.cross_attn = _attention(cfg)
        self.cross_residual = Residual(cfg)
        self.ffn = _feed_forward(cfg)
        self.ffn_residual = Residual(cfg)

    def forward(self, x: Tensor, memory: Tensor, self_mask: Tensor | None = None,
                memory_mask: Tensor | None = None, self_cache: AttentionCache | None = None,
                cross_cache: AttentionCache | None = None, return_attn: bool = False,
                self_bias: Tensor | None = None):
        """x (B, T, D), memory (B, S, D) -> (B, T, D) [, (self weights, cross weights)].

        self_mask None means plain causal self-attention (§3.2.3: no attending to later positions).
        self_bias: the stack's relative position bias for self-attention (1, H, T, T_k), or None;
        cross-attention never has one (T5).
        """
        h = self.self_residual.pre(x)
        a = self.self_attn(h, h, h, self_mask, return_attn, self_cache, is_causal=self_mask is None,
                           bias=self_bias)
        a, self_w = a if return_attn else (a, None)
        x = self.self_residual.post(x, a)
        h = self.cross_residual.pre(x)
        c = self.cross_attn(h, memory, memory, memory_mask, return_attn, cross_cache)
        c, cross_w = c if return_attn else (c, None)
        x = self.cross_residual.post(x, c)
        x = self.ffn_residual.post(x, self.ffn(self.ffn_residual.pre(x)))
        return (x, (self_w, cross_w)) if return_attn else x


def _relative_bias(stack: nn.Module, t: int, cache: KVCache | None) -> Tensor | None:
    """The stack's relative position bias (1, H, T, T_k) for its T new positions, after the
    `cache.length` cached ones (the same bias as recomputing the whole sequence), or None.
    Computed once here and shared by every layer of the stack (T5)."""
    if stack.relative_bias is None:
        return None
    offset = cache.length if cache is not None else 0
    return stack.relative_bias(t, offset + t, offset)


class Encoder(nn.Module):
    """A stack of N encoder layers (§3.1), with a final LayerNorm when configured (pre-norm),
    and T5's bidirectional relative position bias when configured."""

    def __init__(self, cfg: BlockConfig, n_layers: int, final_norm: bool):
        super().__init__()
        self.relative_bias = make_relative_bias(cfg, bidirectional=True)
        self.layers = nn.ModuleList(EncoderLayer(cfg) for _ in range(n_layers))
        self.norm = make_norm(cfg) if final_norm else None

    def forward(self, x: Tensor, mask: Tensor | None = None, is_causal: bool = False,
                cache: KVCache | None = None, return_attn: bool = False):
        """-> (B, T, D) [, list of per-layer weights (B, H, T, T_k)]."""
        weights = []
        bias = _relative_bias(self, x.shape[1], cache)
        for i, layer in enumerate(self.layers):
            entry = cache.self_attn[i] if cache is not None else None
            x = layer(x, mask, is_causal, entry, return_attn, bias)
            if return_attn:
                x, w = x
                weights.append(w)
        if self.norm is not None:
            x = self.norm(x)
        return (x, weights) if return_attn else x


class Decoder(nn.Module):
    """A stack of N decoder layers (§3.1), with a final LayerNorm when configured (pre-norm),
    and T5's causal relative position bias on self-attention when configured."""

    def __init__(self, cfg: BlockConfig, n_layers: int, final_norm: bool):
        super().__init__()
        self.relative_bias = make_relative_bias(cfg, bidirectional=False)
        self.layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(n_layers))
        self.norm = make_norm(cfg) if final_norm else None

    def forward(self, x: Tensor, memory: Tensor, self_mask: Tensor | None = None,
                memory_mask: Tensor | None = None, cache: KVCache | None = None,
                return_attn: bool = False):
        """-> (B, T, D) [, {"self": [per-layer (B, H, T, T)], "cross": [per-layer (B, H, T, S)]}]."""
        attn: dict[str, list[Tensor]] = {"self": [], "cross": []}
        bias = _relative_bias(self, x.shape[1], cache)
        for i, layer in enumerate(self.layers):
            self_c = cache.self_attn[i] if cache is not None else None
            cross_c = cache.cross_attn[i] if cache is not None and cache.cross_attn else None
            x = layer(x, memory, self_mask, memory_mask, self_c, cross_c, return_attn, bias)
            if return_attn:
                x, (self_w, cross_w) = x
                attn["self"].append(self_w)
                attn["cross"].append(cross_w)
        if self.norm is not None:
            x = self.norm(x)
        return (x, attn) if return_attn else x
