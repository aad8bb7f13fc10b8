"""Token embeddings (§3.4) and positional encodings (§3.5)."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from aiayn.nn.dropout import Dropout


def sinusoidal_positions(max_len: int, d_model: int) -> Tensor:
    """§3.5, interleaved: PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(same).

    Returns (max_len, d_model) in fp32. (Some implementations concatenate all sines then all
    cosines; that is a permutation of the dimensions, not the paper's layout.)
    """
    pos = torch.arange(max_len, dtype=torch.float64)[:, None]
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)
    angle = pos / torch.pow(10000.0, two_i / d_model)  # (max_len, ceil(d_model / 2))
    pe = torch.zeros(max_len, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle[:, : d_model // 2])
    return pe.float()


class SinusoidalPositions(nn.Module):
    """Fixed sinusoidal positions (§3.5); no parameters, extends past max_len on demand."""

    def __init__(self, max_len: int, d_model: int):
        super().__init__()
        self.d_model = d_model
        self.register_buffer("table", sinusoidal_positions(max_len, d_model), persistent=False)

    def forward(self, n: int, offset: int = 0) -> Tensor:
        """Positions offset .. offset + n - 1 -> (n, d_model)."""
        if offset + n > self.table.shape[0]:
            self.table = sinusoidal_positions(offset + n, self.d_model).to(self.table.device)
        return self.table[offset : offset + n]


class LearnedPositions(nn.Module):
    """Learned absolute positions (Table 3 row E; GPT-2, BERT, ViT, BART use these).

    `first_row`: position p reads row p + first_row of a (first_row + max_len, D) table. BART's
    table (BartLearnedPositionalEmbedding) has 2 rows before position 0, which it never reads;
    they are kept so that its checkpoints load and export unchanged."""

    def __init__(self, max_len: int, d_model: int, first_row: int = 0):
        super().__init__()
        self.first_row = first_row
        self.weight = nn.Parameter(torch.empty(first_row + max_len, d_model))
        nn.init.normal_(self.weight, std=0.02)

    def forward(self, n: int, offset: int = 0) -> Tensor:
        start = self.first_row + offset
        if start + n > self.weight.shape[0]:
            raise ValueError(f"sequence of {offset + n} positions exceeds "
                             f"max_len={self.weight.shape[0] - self.first_row}")
        return self.weight[start : start + n]


def make_positions(kind: str, max_len: int, d_model: int, first_row: int = 0) -> nn.Module | None:
    if kind == "sinusoidal":
        return SinusoidalPositions(max_len, d_model)
    if kind == "learned":
        return LearnedPositions(max_len, d_model, first_row)
    if kind == "none":
        return None
    raise ValueError(f"invalid config: positions={kind!r}: must be sinusoidal, learned or none")


class TokenEmbedding(nn.Embedding):
    """An embedding table; §3.4 multiplies its output by sqrt(d_model) when `scale` is set."""

    def __init__(self, vocab_size: int, d_model: int, pad_id: int | None = None, scale: bool = True):
        super().__init__(vocab_size, d_model, padding_idx=None)
        self.pad_id = pad_id
        self.scale = math.sqrt(d_model) if scale else 1.0
        # N(0, d_model^-0.5) as in tensor2tensor/fairseq: after the sqrt(d_model) scale the
        # embeddings have unit variance, the same order as the sinusoids they are added to.
        nn.init.normal_(self.weight, std=d_model**-0.5)

    def forward(self, tokens: Tensor) -> Tensor:
        return super().forward(tokens) * self.scale


class InputEmbedding(nn.Module):
    """Token embedding + positions, then dropout (§3.4, §3.5, §5.4). With `norm` (a LayerNorm:
    BART's layernorm_embedding, not in the paper) the sum is normalised before the dropout. With
    `word_dropout` p (not in the paper; TransformerConfig.word_dropout) a training step zeroes
    each token's whole embedding with probability p before the positions are added, and scales
    the kept ones by 1 / (1 - p)."""

    def __init__(self, tokens: TokenEmbedding, positions: nn.Module | None, dropout: float,
                 norm: nn.Module | None = None, word_dropout: float = 0.0):
        super().__init__()
        self.tokens = tokens
        self.positions = positions
        self.norm = norm
        self.dropout = Dropout(dropout)
        self.word_dropout = word_dropout

    def forward(self, ids: Tensor, offset: int = 0, positions: Tensor | None = None) -> Tensor:
        """ids (B, T) -> (B, T, D) at positions offset .. offset + T - 1, or with `positions`
        (B, T) a position per token (rows at different places: a language model's left-padded
        prompts, aiayn.generation.steps)."""
        x = self.tokens(ids)  # (B, T, D)
        if self.word_dropout and self.training:
            keep = torch.rand(ids.shape, device=ids.device) >= self.word_dropout  # (B, T)
            x = x * (keep.unsqueeze(-1).to(x.dtype) / (1.0 - self.word_dropout))
        if self.positions is not None:
            if positions is None:
                x = x + self.positions(ids.shape[1], offset).to(x.dtype)
            else:
                table = self.positions(int(positions.max()) + 1)  # (P, D); sinusoids extend
                x = x + table[positions].to(x.dtype)
        if self.norm is not None:
            x = self.norm(x)
        return self.dropout(x)
