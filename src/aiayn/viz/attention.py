"""Attention heatmaps: one panel per head, a page per (kind, layer), tokens on both axes.

Pure plotting: these functions take weights and token labels and return matplotlib Figures; they
never run a model. ``aiayn.viz.inspect`` runs a model folder and produces the inputs.

The weights are what ``return_attn=True`` gives (§3.2.1: softmax(Q K^T / sqrt(d_k)), one matrix per
head, §3.2.2): row i is query i's distribution over the keys.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from matplotlib.figure import Figure

from aiayn.viz.style import new_figure, set_token_ticks

# Which token sequence runs along each axis (query rows, key columns), per kind of attention.
KIND_AXES: dict[str, tuple[str, str]] = {
    "encoder": ("source", "source"),  # §3.2.3: encoder self-attention
    "decoder_self": ("target", "target"),  # §3.2.3: masked (causal) decoder self-attention
    "cross": ("target", "source"),  # §3.2.3: encoder-decoder attention
    "self": ("tokens", "tokens"),  # one-stack models: decoder-only LM, BERT-style encoder, ViT
}
KIND_TITLES: dict[str, str] = {
    "encoder": "Encoder self-attention",
    "decoder_self": "Decoder self-attention (causal)",
    "cross": "Cross-attention (decoder → encoder)",
    "self": "Self-attention",
}
CMAP = "viridis"


@dataclass
class AttentionMaps:
    """One kind of attention for one input: per-layer weights (H, T_q, T_k) and the axis labels."""

    kind: str
    layers: list[np.ndarray]
    q_labels: list[str]
    k_labels: list[str]
    title: str = ""

    def __post_init__(self) -> None:
        self.title = self.title or KIND_TITLES.get(self.kind, self.kind)
        for i, w in enumerate(self.layers):
            if w.ndim != 3 or w.shape[1:] != (len(self.q_labels), len(self.k_labels)):
                raise ValueError(f"{self.kind} layer {i}: weights of shape {tuple(w.shape)} do not "
                                 f"match {len(self.q_labels)} query x {len(self.k_labels)} key labels")

    @property
    def n_layers(self) -> int:
        return len(self.layers)

    @property
    def n_heads(self) -> int:
        return self.layers[0].shape[0] if self.layers else 0


def _as_array(w) -> np.ndarray:
    """A tensor or array of one example's weights -> float ndarray (H, T_q, T_k)."""
    if hasattr(w, "detach"):
        w = w.detach().float().cpu().numpy()
    w = np.asarray(w, dtype=np.float32)
    if w.ndim == 4:  # (B, H, T_q, T_k): the caller picked the example with `index`
        raise ValueError("pass one example's weights (H, T_q, T_k)")
    return w[None] if w.ndim == 2 else w


def attention_maps(attn: Mapping[str, Sequence], labels: Mapping[str, Sequence[str]],
                   index: int = 0) -> list[AttentionMaps]:
    """Turn a model's ``return_attn`` dict into AttentionMaps, one per kind.

    attn: kind -> per-layer weights (B, H, T_q, T_k), e.g. Transformer's {"encoder", "decoder_self",
        "cross"} or a one-stack model's {"self"}. labels: axis name -> tokens, e.g. {"source": [...],
        "target": [...]} or {"tokens": [...]}. index: which batch example to show.
    """
    maps = []
    for kind, layers in attn.items():
        if not layers:
            continue
        q_axis, k_axis = KIND_AXES.get(kind, ("tokens", "tokens"))
        missing = [a for a in (q_axis, k_axis) if a not in labels]
        if missing:
            raise ValueError(f"attention kind {kind!r} needs labels for {missing[0]!r}")
        arrays = [_as_array(w[index] if getattr(w, "ndim", 0) == 4 else w) for w in layers]
        maps.append(AttentionMaps(kind, arrays, list(labels[q_axis]), list(labels[k_axis])))
    return maps


def _panel_inches(n_q: int, n_k: int) -> tuple[float, float]:
    """Panel size that keeps one tick label per token readable (~0.17 in per token at 40)."""
    def side(n: int) -> float:
        return min(max(2.4, 0.17 * n + 1.1), 9.0)
    return side(n_k), side(n_q)


def plot_attention(weights, q_labels: Sequence[str], k_labels: Sequence[str], *, title: str = "",
                   heads: Sequence[int] | None = None, mean: bool = False,
                   q_name: str = "query", k_name: str = "key",
                   vmax: float | None = None) -> Figure:
    """Heatmaps of one layer's attention, one panel per head, with one shared colour bar.

    weights: (H, T_q, T_k) or (T_q, T_k), a tensor or array. heads: which heads to draw (default
    all); mean: draw one panel with the mean over the selected heads instead. The colour scale runs
    from 0 to ``vmax`` (default: the largest weight shown), the same for every panel.
    """
    w = _as_array(weights)
    n_heads, n_q, n_k = w.shape
    if (n_q, n_k) != (len(q_labels), len(k_labels)):
        raise ValueError(f"weights of shape {(n_q, n_k)} do not match {len(q_labels)} query x "
                         f"{len(k_labels)} key labels")
    heads = list(range(n_heads)) if heads is None else list(heads)
    bad = [h for h in heads if not 0 <= h < n_heads]
    if bad or not heads:
        shown = bad[0] + 1 if bad else None  # 1-based, as in the panel titles
        raise ValueError(f"head {shown} is out of range: the layer has {n_heads} heads")
    panels = [(f"mean of {len(heads)} heads", w[heads].mean(axis=0))] if mean else \
        [(f"head {h + 1}", w[h]) for h in heads]
    vmax = float(max(p.max() for _, p in panels)) if vmax is None else vmax
    vmax = vmax if vmax > 0 else 1.0

    ncols = min(len(panels), 4)
    nrows = math.ceil(len(panels) / ncols)
    pw, ph = _panel_inches(n_q, n_k)
    fig = new_figure(pw * ncols + 1.2, ph * nrows + 0.9)
    axes = fig.subplots(nrows, ncols, squeeze=False)
    image = None
    for i, ax in enumerate(axes.flat):
        if i >= len(panels):
            ax.set_visible(False)
            continue
        name, data = panels[i]
        image = ax.imshow(data, cmap=CMAP, vmin=0.0, vmax=vmax, aspect="auto",
                          interpolation="nearest")
        ax.set_label(name)
        ax.set_title(name, fontsize=10)
        set_token_ticks(ax, k_labels, "x")
        set_token_ticks(ax, q_labels, "y")
        if i % ncols == 0:
            ax.set_ylabel(q_name, fontsize=9)
        if i // ncols == nrows - 1 or i + ncols >= len(panels):
            ax.set_xlabel(k_name, fontsize=9)
    fig.colorbar(image, ax=[a for a in axes.flat if a.get_visible()], label="attention weight",
                 shrink=0.9 if nrows > 1 else 1.0, aspect=30)
    if title:
        fig.suptitle(title, fontsize=12)
    return fig


def plot_maps(maps: AttentionMaps, layer: int, head: int | None = None, mean: bool = False) -> Figure:
    """One page: layer ``layer`` (0-based) of ``maps``, all heads or one (``head``, 0-based)."""
    if not 0 <= layer < maps.n_layers:
        raise ValueError(f"layer {layer + 1} is out of range: {maps.kind} has {maps.n_layers} layers")
    q_axis, k_axis = KIND_AXES.get(maps.kind, ("tokens", "tokens"))
    heads = None if head is None else [head]
    return plot_attention(maps.layers[layer], maps.q_labels, maps.k_labels,
                          title=f"{maps.title} — layer {layer + 1} of {maps.n_layers}",
                          heads=heads, mean=mean, q_name=f"query ({q_axis})",
                          k_name=f"key ({k_axis})")


def attention_figures(maps: Sequence[AttentionMaps], layer: int | None = None,
                      head: int | None = None, mean: bool = False) -> list[tuple[str, Figure]]:
    """A page per (kind, layer): [(name like "encoder-layer1", Figure)]. layer/head are 0-based."""
    pages = []
    for m in maps:
        layers = range(m.n_layers) if layer is None else [layer]
        for i in layers:
            suffix = "" if head is None else f"-head{head + 1}"
            suffix += "-mean" if mean else ""
            pages.append((f"{m.kind.replace('_', '-')}-layer{i + 1}{suffix}",
                          plot_maps(m, i, head, mean)))
    return pages
