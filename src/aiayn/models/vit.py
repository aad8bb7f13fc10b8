"""The Vision Transformer (Dosovitskiy et al. 2021): an image as a sequence of patch tokens.

    images (B, C, H, W)
      -> non-overlapping P x P patches, flattened          (patchify)   (B, N, C*P*P), N = (H/P)(W/P)
      -> linear patch embedding                            (PatchEmbedding) (B, N, D)
      -> prepend a learned [CLS] token, add learned positions, dropout      (B, N+1, D)
      -> N pre-norm encoder layers + final LayerNorm       (aiayn.nn.Encoder)
      -> classification head on the [CLS] position         (B, n_classes)

Departures from the paper's encoder (§3.1), all ViT's: pre-norm layers (x + Sublayer(LN(x)))
with a final LayerNorm, GELU in the feed-forward (§3.3 uses ReLU), learned positions (§3.5 uses
sinusoids; Table 3 row E found them equal), no sqrt(d_model) scale (there is no token table).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from aiayn.config import ViTConfig
from aiayn.nn import Dropout, Encoder, LearnedPositions
from aiayn.nn.init import normal_init_


def patchify(images: Tensor, patch_size: int) -> Tensor:
    """(B, C, H, W) -> (B, N, C*P*P): patches in row-major order, each flattened as (C, P, P),
    the layout of a Conv2d(C, D, kernel_size=P, stride=P) kernel (what ViT checkpoints store)."""
    b, c, h, w = images.shape
    p = patch_size
    if h % p or w % p:
        raise ValueError(f"image of {h}x{w} pixels is not divisible into {p}x{p} patches")
    x = images.reshape(b, c, h // p, p, w // p, p)  # (B, C, H/P, P, W/P, P)
    x = x.permute(0, 2, 4, 1, 3, 5)  # (B, H/P, W/P, C, P, P)
    return x.reshape(b, (h // p) * (w // p), c * p * p)


def unpatchify(patches: Tensor, patch_size: int, channels: int, height: int,
               width: int | None = None) -> Tensor:
    """The inverse of patchify: (B, N, C*P*P) -> (B, C, H, W)."""
    width = height if width is None else width
    b, p, c = patches.shape[0], patch_size, channels
    x = patches.reshape(b, height // p, width // p, c, p, p)  # (B, H/P, W/P, C, P, P)
    x = x.permute(0, 3, 1, 4, 2, 5)  # (B, C, H/P, P, W/P, P)
    return x.reshape(b, c, height, width)


class PatchEmbedding(nn.Module):
    """Flattened patches -> d_model vectors: one Linear, the same map as a stride-P Conv2d."""

    def __init__(self, cfg: ViTConfig):
        super().__init__()
        self.patch_size = cfg.patch_size
        self.proj = nn.Linear(cfg.channels * cfg.patch_size**2, cfg.d_model)

    def forward(self, images: Tensor) -> Tensor:
        """(B, C, H, W) -> (B, N, D)."""
        return self.proj(patchify(images, self.patch_size))


class VisionTransformer(nn.Module):
    """ViT image classifier. features(images) -> (B, N+1, D); forward(images) -> (B, n_classes)."""

    def __init__(self, config: ViTConfig):
        super().__init__()
        self.config = cfg = config
        self.patch_embed = PatchEmbedding(cfg)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, cfg.d_model))
        self.positions = LearnedPositions(cfg.n_patches + 1, cfg.d_model)
        self.dropout = Dropout(cfg.dropout)
        # Pre-norm needs a LayerNorm after the last layer; ViT has one (the paper's post-norm does not).
        self.encoder = Encoder(cfg, cfg.n_layers, final_norm=True)
        self.head = nn.Linear(cfg.d_model, cfg.n_classes) if cfg.n_classes else None
        self._init_weights()

    def _init_weights(self) -> None:
        normal_init_(self, std=0.02)  # ViT's initialisation (the paper does not give one)
        if self.head is not None:
            nn.init.zeros_(self.head.weight)  # ViT starts its head at zero

    def features(self, images: Tensor, return_attn: bool = False):
        """images (B, C, H, W) -> final hidden states (B, N+1, D), [CLS] first
        [, per-layer weights (B, H, N+1, N+1)]."""
        cfg = self.config
        expected = (cfg.channels, cfg.image_size, cfg.image_size)
        if images.dim() != 4 or tuple(images.shape[1:]) != expected:
            raise ValueError(f"images of shape {tuple(images.shape)}; the model takes "
                             f"(B, {', '.join(map(str, expected))})")
        x = self.patch_embed(images)  # (B, N, D)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1).to(x.dtype), x], dim=1)  # (B, N+1, D)
        x = self.dropout(x + self.positions(x.shape[1]).to(x.dtype))
        return self.encoder(x, None, return_attn=return_attn)  # every patch sees every patch

    def forward(self, images: Tensor) -> Tensor:
        """images (B, C, H, W) -> class logits (B, n_classes), read from the [CLS] position."""
        if self.head is None:
            raise ValueError("this model has no classification head (n_classes=0)")
        return self.head(self.features(images)[:, 0])

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())


__all__ = ["PatchEmbedding", "VisionTransformer", "patchify", "unpatchify"]
