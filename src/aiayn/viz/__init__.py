"""Figures and the web explorer: look inside a Transformer.

    from aiayn.viz import Inspector, attention_figures, plot_positions
    result = Inspector.load("demo-model").run("March 5, 2024")
    pages = attention_figures(result.maps)        # [(name, matplotlib Figure)]
    plot_positions(d_model=64, max_len=100)       # a Figure (shown inline in a notebook)

Every plot_* function returns a matplotlib Figure; save_figure writes PNG / SVG atomically.
"""

from aiayn.viz.attention import (
    AttentionMaps,
    attention_figures,
    attention_maps,
    plot_attention,
    plot_maps,
)
from aiayn.viz.curves import plot_curves, read_metrics
from aiayn.viz.inspect import Inspection, Inspector
from aiayn.viz.masks import plot_masks
from aiayn.viz.positions import plot_positions
from aiayn.viz.style import save_figure

__all__ = ["AttentionMaps", "Inspection", "Inspector", "attention_figures", "attention_maps",
           "plot_attention", "plot_curves", "plot_maps", "plot_masks", "plot_positions",
           "read_metrics", "save_figure"]
