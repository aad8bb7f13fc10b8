"""A decoder-only language model (GPT): the Transformer's decoder without cross-attention.

The paper's decoder (§3.1) has masked self-attention, encoder-decoder attention and a feed-forward
network. Drop the encoder and its attention and what is left, trained to predict the next token,
is the GPT family (Radford et al. 2018, 2019). Each layer is therefore aiayn's EncoderLayer run
with a causal mask (§3.2.3: position i attends only to positions <= i).

GPT-2 is this model with DecoderLMConfig's "gpt2-*" presets: pre-norm, GELU (tanh form), learned
positions, a final LayerNorm, no sqrt(d_model) embedding scale and a tied output projection.
``aiayn.convert.hf_gpt2`` copies HF GPT-2 weights into it; the tests hold the logits equal.

Shapes: B batch, T new positions, V vocabulary, D d_model.
"""

from __future__ import annotations

import math
from contextlib import AbstractContextManager

from torch import Tensor, nn

from aiayn.config import DecoderLMConfig
from aiayn.masks import causal_mask, combine
from aiayn.nn import (
    Encoder,
    InputEmbedding,
    KVCache,
    TokenEmbedding,
    joined_qkv_kept,
    make_positions,
)


class DecoderLM(nn.Module):
    """tokens (B, T) -> next-token logits (B, T, V).

    Generation lives in aiayn.generation.lm; this module only maps tokens to logits, optionally
    reading and extending a KV cache (``new_cache()``) so each step computes only new positions.
    """

    def __init__(self, config: DecoderLMConfig):
        super().__init__()
        self.config = cfg = config
        tokens = TokenEmbedding(cfg.vocab_size, cfg.d_model, cfg.pad_id, cfg.scale_embeddings)
        positions = make_positions(cfg.positions, cfg.max_len, cfg.d_model)
        self.embed = InputEmbedding(tokens, positions, cfg.dropout)
        # A stack of causal self-attention layers: the paper's decoder minus cross-attention.
        self.decoder = Encoder(cfg, cfg.n_layers, cfg.final_norm)
        self.output = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self._init_weights()
        if cfg.tie_embeddings:
            # §3.4: the pre-softmax linear transformation shares the embedding matrix.
            self.output.weight = tokens.weight

    def _init_weights(self) -> None:
        # The paper does not say. GPT-2's scheme (§2.3 of its report): N(0, 0.02) for every
        # matrix, and the projections that write into the residual stream (out_proj, ffn.w2)
        # scaled by 1/sqrt(2 * n_layers), since each layer adds two of them. Biases 0, LayerNorm 1.
        # With scale_embeddings (§3.4) the embedding is N(0, d_model^-0.5), as in Transformer, so
        # that after the sqrt(d_model) scale it has unit variance like the sinusoids.
        cfg = self.config
        residual_std = 0.02 / math.sqrt(2 * cfg.n_layers)
        for name, p in self.named_parameters():
            if name.endswith(("out_proj.weight", "ffn.w2.weight")):
                nn.init.normal_(p, std=residual_std)
            elif name == "embed.tokens.weight":
                nn.init.normal_(p, std=cfg.d_model**-0.5 if cfg.scale_embeddings else 0.02)
            elif p.dim() > 1:  # q/k/v projections, ffn.w1, learned positions, untied output
                nn.init.normal_(p, std=0.02)
            elif name.endswith(".bias"):
                nn.init.zeros_(p)

    def decoding(self) -> AbstractContextManager[None]:
        """A decoding loop's context (aiayn.generation.loop): self-attention keeps its joined
        q/k/v weights for the whole loop (aiayn.nn.joined_qkv_kept)."""
        return joined_qkv_kept(self)

    def new_cache(self) -> KVCache:
        """An empty cache: per layer, the keys/values of every position seen so far."""
        return KVCache(self.config.n_layers, cross=False)

    def forward(self, tokens: Tensor, cache: KVCache | None = None, return_attn: bool = False,
                *, positions: Tensor | None = None, mask: Tensor | None = None):
        """tokens (B, T) -> logits (B, T, V) [, per-layer weights (B, H, T, T_k)].

        Causal: the logits at position t depend only on tokens 0..t. With a cache, ``tokens``
        holds only the positions after ``cache.length``; earlier keys/values come from the cache,
        and this call's keys/values are appended to it.

        For batches of left-padded sequences (aiayn.generation.lm): ``positions`` (B, T) is each
        token's position (default: cache.length + 0..T-1 in every row), and ``mask``, boolean and
        broadcastable to (B, H, T, T_k) with T_k = cache.length + T, True = may attend (e.g.
        (B, 1, 1, T_k), False at padding), further restricts the causal mask (never replaces it).
        """
        offset = cache.length if cache is not None else 0
        x = self.embed(tokens, offset, positions)  # (B, T, D)
        if mask is not None:  # §3.2.3: still causal (attention uses a given mask as it is)
            t = tokens.shape[1]
            mask = combine(causal_mask(t, offset + t, device=tokens.device), mask)
        out = self.decoder(x, mask, is_causal=True, cache=cache, return_attn=return_attn)
        if return_attn:
            h, weights = out
            return self.output(h), weights
        return self.output(out)  # (B, T, V)

    def num_parameters(self) -> int:
        """Distinct parameters (tied matrices counted once)."""
        return sum(p.numel() for p in self.parameters())


__all__ = ["DecoderLM"]
