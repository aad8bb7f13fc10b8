"""Figures and the web explorer: look inside a Transformer.

    from aiayn.viz import Inspector, attention_figures, plot_positions
    result = Inspector.load("demo-model").run("March 5, 2024")
    pages = attention_figures(result.maps)        # [(name, matplotlib Figure)]
    plot_positions(d_model=64, max_len=100)       # a Figure (shown inline in a notebook)

Every plot_* function returns a matplotlib Figure; save_figure writes PNG / SVG atomically.
"""

from __future__ import annotations

from aiayn.lazy import lazy_names

FORMATS = ("png", "svg")  # what save_figure writes

# The names below are imported on first use (PEP 562), so that the command line's parser reads
# FORMATS without loading matplotlib and torch.
_EXPORTS = {
    "AttentionMaps": "aiayn.viz.attention", "attention_figures": "aiayn.viz.attention",
    "attention_maps": "aiayn.viz.attention", "plot_attention": "aiayn.viz.attention",
    "plot_maps": "aiayn.viz.attention", "plot_curves": "aiayn.viz.curves",
    "read_metrics": "aiayn.viz.curves", "Inspection": "aiayn.viz.inspect",
    "Inspector": "aiayn.viz.inspect", "plot_masks": "aiayn.viz.masks",
    "plot_positions": "aiayn.viz.positions", "save_figure": "aiayn.viz.style",
}
__all__ = ["FORMATS", *sorted(_EXPORTS)]


__getattr__, __dir__ = lazy_names(__name__, _EXPORTS, globals())
