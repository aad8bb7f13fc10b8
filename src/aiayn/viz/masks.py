"""The causal mask (§3.2.3) and what it does to attention, as figures.

Masks come from aiayn.masks (the only place they are built) and attention weights from the
reference path aiayn.nn.attention.scaled_dot_product_attention: the figure shows the package's own
numbers, not a re-implementation.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure

from aiayn.masks import causal_mask
from aiayn.nn.attention import scaled_dot_product_attention
from aiayn.viz.attention import CMAP
from aiayn.viz.style import new_figure, set_token_ticks

DEFAULT_TOKENS = ("<s>", "▁the", "▁cat", "▁sat", "▁on", "▁the", "▁mat", ".")


def demo_weights(n: int, d_head: int = 16, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(causal mask (n, n) bool, bidirectional weights (n, n), causal weights (n, n)) for the same
    random queries and keys: softmax(Q K^T / sqrt(d_k)) without and with the mask (§3.2.1)."""
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(1, 1, n, d_head, generator=g) * 1.5
    k = torch.randn(1, 1, n, d_head, generator=g) * 1.5
    mask = causal_mask(n)  # (1, 1, n, n), True = may attend
    _, both = scaled_dot_product_attention(q, k, k)
    _, causal = scaled_dot_product_attention(q, k, k, mask)
    return mask[0, 0].numpy(), both[0, 0].numpy(), causal[0, 0].numpy()


def plot_masks(tokens: Sequence[str] = DEFAULT_TOKENS, seed: int = 0) -> Figure:
    """Three panels over the same tokens: the causal mask (white = may attend), bidirectional
    attention (encoder, §3.2.3) and causal attention (decoder: no look-ahead)."""
    tokens = list(tokens)
    n = len(tokens)
    if n < 1:
        raise ValueError("need at least one token")
    mask, both, causal = demo_weights(n, seed=seed)
    side = min(max(3.2, 0.17 * n + 1.6), 8.0)
    fig = new_figure(3 * side + 1.5, side + 1.0)
    ax_mask, ax_both, ax_causal = fig.subplots(1, 3)
    ax_mask.imshow(mask.astype(float), cmap=ListedColormap(["#333333", "#ffffff"]), vmin=0, vmax=1,
                   aspect="auto", interpolation="nearest")
    ax_mask.set_label("mask")
    ax_mask.set_title("Causal mask (white: may attend)", fontsize=10)
    vmax = float(max(both.max(), causal.max()))
    im = None
    for ax, data, name, title in ((ax_both, both, "bidirectional", "Bidirectional (encoder)"),
                                  (ax_causal, causal, "causal", "Causal (decoder)")):
        im = ax.imshow(data, cmap=CMAP, vmin=0.0, vmax=vmax, aspect="auto", interpolation="nearest")
        ax.set_label(name)
        ax.set_title(f"{title} attention", fontsize=10)
    for ax in (ax_mask, ax_both, ax_causal):
        set_token_ticks(ax, tokens, "x")
        set_token_ticks(ax, tokens, "y")
        ax.set_xlabel("key position")
    ax_mask.set_ylabel("query position")
    fig.colorbar(im, ax=[ax_both, ax_causal], label="attention weight", aspect=30)
    fig.suptitle("§3.2.3: the decoder's mask stops position i from attending to positions > i",
                 fontsize=12)
    return fig
