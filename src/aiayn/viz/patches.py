"""Vision Transformer attention on the image: where [CLS] looks, one panel per head.

ViT classifies from the [CLS] position, so row 0 of a layer's self-attention (the [CLS] query over
the [CLS] key and the N patch keys) says which patches the prediction reads. Its N patch weights
are laid back on the (H/P) x (W/P) patch grid (row-major, aiayn.models.vit.patchify's order) and
drawn over the image. Pure plotting, like aiayn.viz.attention.
"""

from __future__ import annotations

import math

import numpy as np
from matplotlib.figure import Figure

from aiayn.viz.attention import CMAP, AttentionMaps
from aiayn.viz.style import new_figure


def cls_patch_grid(weights: np.ndarray, grid: int) -> np.ndarray:
    """One layer's weights (H, 1+N, 1+N) -> [CLS]'s attention to each patch, (H, grid, grid)."""
    n_heads, n_q, n_k = weights.shape
    if n_q != n_k or n_k != 1 + grid * grid:
        raise ValueError(f"weights of shape {weights.shape} are not [CLS] + {grid}x{grid} patches")
    return weights[:, 0, 1:].reshape(n_heads, grid, grid)


def plot_patch_attention(image: np.ndarray, maps: AttentionMaps, layer: int, patch_size: int,
                         head: int | None = None, mean: bool = False) -> Figure:
    """The image, then [CLS] -> patch attention of layer `layer` (0-based) per head (or one head,
    or the mean of the heads) drawn over it with one shared colour scale."""
    if not 0 <= layer < maps.n_layers:
        raise ValueError(f"layer {layer + 1} is out of range: the model has {maps.n_layers} layers")
    height, width = image.shape[:2]
    grid = height // patch_size
    cells = cls_patch_grid(maps.layers[layer], grid)
    heads = list(range(cells.shape[0])) if head is None else [head]
    if any(not 0 <= h < cells.shape[0] for h in heads):
        raise ValueError(f"head {head + 1} is out of range: the layer has {cells.shape[0]} heads")
    panels = [(f"mean of {len(heads)} heads", cells[heads].mean(0))] if mean else \
        [(f"head {h + 1}", cells[h]) for h in heads]
    vmax = float(max(p.max() for _, p in panels)) or 1.0

    ncols = min(len(panels) + 1, 5)
    nrows = math.ceil((len(panels) + 1) / ncols)
    fig = new_figure(2.6 * ncols + 1.0, 2.7 * nrows + 0.6)
    axes = list(fig.subplots(nrows, ncols, squeeze=False).flat)
    grey = {"cmap": "gray"} if image.ndim == 2 else {}
    extent = (-0.5, width - 0.5, height - 0.5, -0.5)
    axes[0].imshow(image, vmin=0, vmax=1, interpolation="nearest", **grey)
    axes[0].set_title("input image", fontsize=10)
    axes[0].set_label("image")
    shown = None
    for ax, (name, cell) in zip(axes[1:], panels, strict=False):
        ax.imshow(image, vmin=0, vmax=1, interpolation="nearest", **grey)
        shown = ax.imshow(cell, cmap=CMAP, vmin=0, vmax=vmax, alpha=0.65, extent=extent,
                          interpolation="nearest")
        ax.set_title(name, fontsize=10)
        ax.set_label(name)
    for ax in axes:
        ax.set_xticks([])
        ax.set_yticks([])
    for ax in axes[len(panels) + 1:]:
        ax.set_visible(False)
    fig.colorbar(shown, ax=[a for a in axes if a.get_visible()], label="[CLS] → patch weight",
                 aspect=30)
    fig.suptitle(f"Where [CLS] attends — layer {layer + 1} of {maps.n_layers} "
                 f"({grid}x{grid} patches of {patch_size}x{patch_size} px)", fontsize=11)
    return fig


__all__ = ["cls_patch_grid", "plot_patch_attention"]
