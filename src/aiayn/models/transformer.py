"""The encoder-decoder Transformer of "Attention Is All You Need" (§3, Figure 1)."""

from __future__ import annotations

from contextlib import AbstractContextManager

from torch import Tensor, nn

from aiayn.config import TransformerConfig
from aiayn.masks import padding_mask
from aiayn.nn import (
    Decoder,
    Encoder,
    InputEmbedding,
    KVCache,
    TokenEmbedding,
    joined_qkv_kept,
    make_positions,
)


class Transformer(nn.Module):
    """Encoder-decoder for sequence transduction.

    encode(src) -> memory; decode(tgt, memory) -> logits; forward(src, tgt) -> logits.
    Attention weights are returned on request (`return_attn=True`), never stored on the module.
    """

    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.config = cfg = config
        src_tokens = TokenEmbedding(cfg.vocab_size, cfg.d_model, cfg.pad_id, cfg.scale_embeddings)
        # §3.4: one weight matrix for source and target embeddings when the vocabulary is joint.
        tgt_tokens = src_tokens if cfg.share_embeddings else TokenEmbedding(
            cfg.target_vocab_size, cfg.d_model, cfg.pad_id, cfg.scale_embeddings)
        positions = make_positions(cfg.positions, cfg.max_len, cfg.d_model, cfg.position_offset)
        # Learned positions are separate tables for source and target; sinusoids are shared.
        tgt_positions = make_positions(cfg.positions, cfg.max_len, cfg.d_model,
                                       cfg.position_offset) \
            if cfg.positions == "learned" else positions
        self.src_embed = InputEmbedding(src_tokens, positions, cfg.dropout, self._embedding_norm(),
                                        cfg.word_dropout)
        self.tgt_embed = InputEmbedding(tgt_tokens, tgt_positions, cfg.dropout,
                                        self._embedding_norm(), cfg.word_dropout)
        self.encoder = Encoder(cfg, cfg.n_encoder_layers, cfg.final_norm)
        self.decoder = Decoder(cfg, cfg.n_decoder_layers, cfg.final_norm)
        # §3.4's pre-softmax linear has no bias; BART's has one (final_logits_bias).
        self.output = nn.Linear(cfg.d_model, cfg.target_vocab_size, bias=cfg.output_bias)
        self._init_weights()
        # §3.4: the pre-softmax linear transformation shares the target embedding matrix.
        # (Departure: the paper shares all three only for its joint BPE vocabulary; with a
        # separate target vocabulary we still tie target embedding <-> projection.) T5 v1.1
        # unties them (tie_output=False).
        if cfg.tie_output:
            self.output.weight = tgt_tokens.weight

    def _embedding_norm(self) -> nn.LayerNorm | None:
        """BART's LayerNorm on each stack's embedding sum (not in the paper), when configured."""
        cfg = self.config
        return nn.LayerNorm(cfg.d_model, eps=cfg.layer_norm_eps) if cfg.embedding_norm else None

    def _init_weights(self) -> None:
        # The paper does not say. This is fairseq's initialisation of its `transformer`
        # (MultiheadAttention.reset_parameters; TransformerEncoderLayer.build_fc1/fc2):
        # - attention projections Xavier-uniform, with gain 1/sqrt(2) for query/key/value
        #   ("empirically observed the convergence to be much better with the scaled
        #   initialization"); the output projection's bias zero;
        # - the feed-forward layers and the query/key/value biases keep nn.Linear's own init,
        #   U(+-1/sqrt(fan_in)): the second FFN matrix starts 2.2x smaller than under Xavier.
        # Measured on gettext EN->DE (benchmarks/RESULTS.md, issue 11): the q/k/v gain took the
        # NLL after 300 updates from 6.58 to 6.26 nats; the FFN init lowered the training loss
        # by ~0.1 nats from update 400 on, in both seeds.
        for name, p in self.named_parameters():
            if ".ffn." in name or name.endswith(("q_proj.bias", "k_proj.bias", "v_proj.bias")):
                continue  # nn.Linear.reset_parameters, run when the layer was built
            if p.dim() > 1 and "embed" not in name:
                qkv = name.endswith(("q_proj.weight", "k_proj.weight", "v_proj.weight"))
                gain = 2 ** -0.5 if qkv else 1.0
                if name.endswith("q_proj.weight") and not self.config.scale_attention:
                    # T5 leaves §3.2.1's 1/sqrt(d_k) out of attention and folds it into the
                    # initialisation of the query projection; so does this.
                    gain *= self.config.d_k ** -0.5
                nn.init.xavier_uniform_(p, gain=gain)
            elif name.endswith(".bias"):
                nn.init.zeros_(p)

    def src_mask(self, src: Tensor) -> Tensor:
        return padding_mask(src, self.config.pad_id)

    def decoding(self) -> AbstractContextManager[None]:
        """A decoding loop's context (aiayn.generation.loop): self-attention keeps its joined
        q/k/v weights for the whole loop (aiayn.nn.joined_qkv_kept)."""
        return joined_qkv_kept(self)

    def new_cache(self) -> KVCache:
        return KVCache(self.config.n_decoder_layers, cross=True)

    def encode(self, src: Tensor, src_mask: Tensor | None = None, return_attn: bool = False):
        """src (B, S) token ids -> memory (B, S, D) [, per-layer weights (B, H, S, S)]."""
        if src_mask is None:
            src_mask = self.src_mask(src)
        return self.encoder(self.src_embed(src), src_mask, return_attn=return_attn)

    def decode(self, tgt: Tensor, memory: Tensor, src_mask: Tensor | None = None,
               cache: KVCache | None = None, return_attn: bool = False,
               select: Tensor | tuple[Tensor, Tensor] | None = None):
        """tgt (B, T) -> logits (B, T, V) [, {"self": [...], "cross": [...]}].

        Decoder self-attention is causal. With a cache, `tgt` holds only the new positions (those
        after `cache.length`); earlier keys/values come from the cache. `select`: the logits of
        some positions only, (N, V): a (B, T) bool mask (its True positions, row-major order),
        or a (rows, cols) pair of (N,) index tensors (those positions, in that order).
        """
        offset = cache.length if cache is not None else 0
        x = self.tgt_embed(tgt, offset)
        out = self.decoder(x, memory, None, src_mask, cache, return_attn)
        h, attn = out if return_attn else (out, None)
        if self.config.scale_output:  # T5 v1.0: d_model^-0.5 here, no sqrt(d_model) on inputs
            h = h * self.config.d_model ** -0.5
        logits = self.output(h if select is None else h[select])
        return (logits, attn) if return_attn else logits

    def forward(self, src: Tensor, tgt: Tensor, return_attn: bool = False,
                select: Tensor | tuple[Tensor, Tensor] | None = None):
        """src (B, S), tgt (B, T) (shifted right, starting with BOS) -> logits (B, T, V).

        `select`: the logits of some positions only, (N, V), as `decode` takes it (a (B, T)
        bool mask, or a (rows, cols) pair of index tensors). Training passes the non-pad
        targets (seq2seq_loss: their indices, found on the host): the output projection (the largest matrix product
        of a small model) and the softmax then skip the padding, ~12% of the target positions
        of a length-bucketed batch (§5.1), which otherwise cost ~5% of a training step."""
        src_mask = self.src_mask(src)
        if return_attn:
            memory, enc_w = self.encode(src, src_mask, return_attn=True)
            logits, dec_w = self.decode(tgt, memory, src_mask, return_attn=True, select=select)
            return logits, {"encoder": enc_w, "decoder_self": dec_w["self"], "cross": dec_w["cross"]}
        return self.decode(tgt, self.encode(src, src_mask), src_mask, select=select)

    def num_parameters(self) -> int:
        """Distinct parameters (tied matrices counted once)."""
        return sum(p.numel() for p in self.parameters())


__all__ = ["Transformer"]
