"""Position-wise feed-forward network (§3.3)."""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn

from aiayn.nn.dropout import Dropout

_ACTIVATIONS = {
    "relu": F.relu,  # the paper's max(0, x)
    "gelu": F.gelu,  # BERT, ViT (exact erf form)
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),  # GPT-2's "gelu_new"
    "silu": F.silu,  # x * sigmoid(x), "swish": the OPUS-MT Marian models
}


class FeedForward(nn.Module):
    """FFN(x) = act(x W1 + b1) W2 + b2, applied to each position separately (§3.3). With
    `dropout` (not in the paper; BART's activation_dropout) the hidden units are dropped after
    the activation.

    `gated` (not in the paper; T5 v1.1's "gated-gelu", Shazeer 2020's GLU variants): the
    activation gates a second linear map of the input, FFN(x) = (act(x W1) * x W3) W2.
    """

    def __init__(self, d_model: int, d_ff: int, activation: str = "relu", bias: bool = True,
                 dropout: float = 0.0, gated: bool = False):
        super().__init__()
        if activation not in _ACTIVATIONS:
            raise ValueError(f"invalid config: activation={activation!r}: must be one of {', '.join(_ACTIVATIONS)}")
        self.activation = activation
        self.w1 = nn.Linear(d_model, d_ff, bias=bias)
        self.w2 = nn.Linear(d_ff, d_model, bias=bias)
        self.w3 = nn.Linear(d_model, d_ff, bias=bias) if gated else None  # the gated linear map
        self.dropout = Dropout(dropout) if dropout > 0 else None

    def forward(self, x: Tensor) -> Tensor:
        h = _ACTIVATIONS[self.activation](self.w1(x))
        if self.w3 is not None:
            h = h * self.w3(x)
        return self.w2(h if self.dropout is None else self.dropout(h))
