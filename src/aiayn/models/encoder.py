"""An encoder-only Transformer (BERT, Devlin et al. 2019): the §3.1 encoder stack on its own.

    ids (B, T) [+ segments (B, T)]
      -> token + learned position (+ segment) embeddings, LayerNorm, dropout   (EncoderEmbedding)
      -> N post-norm encoder layers, GELU feed-forward                         (aiayn.nn.Encoder)
      -> hidden states (B, T, D)
      -> heads: masked-LM logits (B, T, V) | pooled [CLS] -> class logits (B, n_labels)
         | mean-pooled, normalised sentence embedding (B, D) (sentence-transformers' recipe)

Where it departs from the paper (all of it BERT's choices, so BERT checkpoints load exactly):
learned positions instead of sinusoids (Table 3 row E found them equal), segment embeddings, a
LayerNorm on the embedding sum, GELU instead of ReLU in the feed-forward (§3.3), no sqrt(d_model)
scale on the embeddings (§3.4), LayerNorm eps 1e-12, and dropout on attention probabilities.
The layers themselves are the paper's post-norm ones (§3.1: LayerNorm(x + Sublayer(x))).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from aiayn.config import EncoderConfig
from aiayn.masks import padding_mask
from aiayn.nn import Dropout, Encoder, LearnedPositions, TokenEmbedding
from aiayn.nn.feedforward import _ACTIVATIONS  # the feed-forward's activation table, shared
from aiayn.nn.init import normal_init_

IGNORE_INDEX = -100  # label of positions that do not contribute to the masked-LM loss


class EncoderEmbedding(nn.Module):
    """tokens + learned positions (+ segments), then LayerNorm and dropout (BERT's embeddings)."""

    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        # §3.4 scales by sqrt(d_model); BERT does not (its embedding LayerNorm sets the scale).
        self.tokens = TokenEmbedding(cfg.vocab_size, cfg.d_model, cfg.pad_id, scale=False)
        self.positions = LearnedPositions(cfg.max_len, cfg.d_model)
        self.segments = nn.Embedding(cfg.type_vocab_size, cfg.d_model) if cfg.type_vocab_size else None
        self.norm = nn.LayerNorm(cfg.d_model, eps=cfg.layer_norm_eps) if cfg.embedding_norm else None
        self.dropout = Dropout(cfg.dropout)  # §5.4: dropout on the embedding sums

    def forward(self, ids: Tensor, segments: Tensor | None = None) -> Tensor:
        """ids (B, T), segments (B, T) or None (all segment 0) -> (B, T, D)."""
        x = self.tokens(ids) + self.positions(ids.shape[1]).to(self.tokens.weight.dtype)
        if self.segments is not None:
            x = x + self.segments(segments if segments is not None else torch.zeros_like(ids))
        elif segments is not None:
            raise ValueError("segments given, but the model has no segment embeddings "
                             "(type_vocab_size=0)")
        if self.norm is not None:
            x = self.norm(x)
        return self.dropout(x)


class MaskedLMHead(nn.Module):
    """BERT's masked-LM head: dense + activation + LayerNorm, then a projection onto the
    vocabulary whose weight is the token embedding matrix (tied, as §3.4 ties the decoder's)."""

    def __init__(self, cfg: EncoderConfig, embedding: nn.Embedding):
        super().__init__()
        self.activation = cfg.activation
        self.dense = nn.Linear(cfg.d_model, cfg.d_model)
        self.norm = nn.LayerNorm(cfg.d_model, eps=cfg.layer_norm_eps)
        self.output = nn.Linear(cfg.d_model, cfg.vocab_size)
        self.output.weight = embedding.weight

    def forward(self, h: Tensor) -> Tensor:
        """(B, T, D) -> logits (B, T, V)."""
        return self.output(self.norm(_ACTIVATIONS[self.activation](self.dense(h))))


class EncoderModel(nn.Module):
    """Encoder-only Transformer with optional masked-LM, pooler and classification heads.

    forward(ids) -> hidden states; mlm_logits(ids) -> (B, T, V); classify(ids) -> (B, n_labels);
    sentence_embedding(ids) -> (B, D). Padding (`pad_id`) is masked out of attention and of
    every pooling. Attention weights are returned on request (`return_attn=True`).
    """

    def __init__(self, config: EncoderConfig):
        super().__init__()
        self.config = cfg = config
        self.embed = EncoderEmbedding(cfg)
        self.encoder = Encoder(cfg, cfg.n_layers, final_norm=False)  # post-norm: each layer ends in one
        self.pooler = nn.Linear(cfg.d_model, cfg.d_model) if cfg.pooler else None
        self.mlm = MaskedLMHead(cfg, self.embed.tokens) if cfg.mlm_head else None
        self.head_dropout = Dropout(cfg.dropout)
        self.classifier = nn.Linear(cfg.d_model, cfg.n_labels) if cfg.n_labels else None
        self._init_weights()

    def _init_weights(self) -> None:
        normal_init_(self, std=0.02)  # BERT's initialisation (the paper does not give one)

    def attention_mask(self, ids: Tensor) -> Tensor:
        """(B, 1, 1, T), True = a real token (may be attended to)."""
        return padding_mask(ids, self.config.pad_id)

    def forward(self, ids: Tensor, segments: Tensor | None = None, mask: Tensor | None = None,
                return_attn: bool = False):
        """ids (B, T) -> hidden states (B, T, D) [, per-layer weights (B, H, T, T)].

        mask: bool, broadcastable to (B, H, T, T), True = may attend; default: keys that are not
        padding.
        """
        if ids.shape[1] > self.config.max_len:
            raise ValueError(f"sequence of {ids.shape[1]} tokens exceeds max_len={self.config.max_len}")
        if mask is None:
            mask = self.attention_mask(ids)
        return self.encoder(self.embed(ids, segments), mask, return_attn=return_attn)

    def pool(self, hidden: Tensor, ids: Tensor) -> Tensor:
        """The vector the classifier reads: [CLS] (position 0) or the mean of real tokens,
        through the pooler (tanh(W h + b)) when there is one. (B, T, D) -> (B, D)."""
        x = hidden[:, 0] if self.config.pool == "cls" else mean_pool(hidden, ids != self.config.pad_id)
        return torch.tanh(self.pooler(x)) if self.pooler is not None else x

    def mlm_logits(self, ids: Tensor, segments: Tensor | None = None) -> Tensor:
        """ids (B, T) -> masked-LM logits (B, T, V)."""
        if self.mlm is None:
            raise ValueError("this model has no masked-LM head (mlm_head=False)")
        return self.mlm(self(ids, segments))

    def classify(self, ids: Tensor, segments: Tensor | None = None) -> Tensor:
        """ids (B, T) -> class logits (B, n_labels)."""
        if self.classifier is None:
            raise ValueError("this model has no classification head (n_labels=0)")
        return self.classifier(self.head_dropout(self.pool(self(ids, segments), ids)))

    def sentence_embedding(self, ids: Tensor, segments: Tensor | None = None,
                           normalize: bool = True) -> Tensor:
        """Mean of the last hidden states over real tokens, L2-normalised: (B, T) -> (B, D)."""
        x = mean_pool(self(ids, segments), ids != self.config.pad_id)
        return F.normalize(x, dim=-1) if normalize else x

    def num_parameters(self) -> int:
        """Distinct parameters (the tied MLM projection counted once)."""
        return sum(p.numel() for p in self.parameters())


def mean_pool(hidden: Tensor, keep: Tensor) -> Tensor:
    """Mean over positions where keep (B, T) is True: (B, T, D) -> (B, D)."""
    w = keep.to(hidden.dtype)[..., None]  # (B, T, 1)
    return (hidden * w).sum(1) / w.sum(1).clamp(min=1.0)


def mlm_loss(logits: Tensor, labels: Tensor) -> Tensor:
    """Cross-entropy over masked positions only: labels (B, T) hold IGNORE_INDEX elsewhere.
    A batch with no masked position gives 0 (not NaN)."""
    if not (labels != IGNORE_INDEX).any():
        return logits.sum() * 0.0
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), labels.reshape(-1),
                           ignore_index=IGNORE_INDEX)


__all__ = ["EncoderEmbedding", "EncoderModel", "IGNORE_INDEX", "MaskedLMHead", "mean_pool", "mlm_loss"]
