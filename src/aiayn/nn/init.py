"""Weight initialisation shared by model families (the paper does not give one)."""

from __future__ import annotations

from torch import nn


def normal_init_(module: nn.Module, std: float = 0.02) -> None:
    """N(0, std) for every matrix, zeros for biases (BERT / ViT / GPT-2 style); LayerNorms keep 1/0."""
    for name, p in module.named_parameters():
        if p.dim() > 1:
            nn.init.normal_(p, std=std)
        elif name.endswith(".bias"):
            nn.init.zeros_(p)
