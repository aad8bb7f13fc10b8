"""Shared figure helpers: sizes and fonts that stay legible, token tick labels, saving.

Figures are built with ``matplotlib.figure.Figure`` directly, not pyplot: nothing is registered in
a global figure manager (no leaks in the server, safe across threads), and a notebook still shows
the returned Figure inline.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from aiayn.errors import UserError
from aiayn.folder.files import atomic_path
from aiayn.viz import FORMATS

DPI = 110
MAX_LABEL_CHARS = 12


def new_figure(width: float, height: float) -> Figure:
    """A Figure with constrained layout (titles, labels and colour bars never overlap)."""
    return Figure(figsize=(width, height), dpi=DPI, layout="constrained")


def short_label(token: str) -> str:
    """A tick label of bounded width: long subwords are cut with an ellipsis."""
    token = token.replace("\n", "\\n").replace("\t", "\\t")
    return token if len(token) <= MAX_LABEL_CHARS else token[: MAX_LABEL_CHARS - 1] + "…"


def tick_fontsize(n: int) -> float:
    """Smaller ticks for longer sequences; still >= 6.5 pt at 40 tokens."""
    if n <= 12:
        return 9.0
    if n <= 24:
        return 8.0
    return 7.0 if n <= 40 else 6.5


def set_token_ticks(ax: Axes, labels: Sequence[str], axis: str) -> None:
    """Put one tick per token (every k-th past 60 tokens) on the x or y axis of a heatmap."""
    n = len(labels)
    step = 1 if n <= 60 else -(-n // 60)
    positions = list(range(0, n, step))
    text = [short_label(labels[i]) for i in positions]
    size = tick_fontsize(n)
    if axis == "x":
        ax.set_xticks(positions, text, rotation=90, fontsize=size)
    else:
        ax.set_yticks(positions, text, fontsize=size)
    ax.tick_params(axis=axis, length=2, pad=1)


def save_figure(fig: Figure, stem: str | Path, formats: Sequence[str] = FORMATS) -> list[Path]:
    """Write ``stem.png`` / ``stem.svg`` (the formats asked for); returns the paths written."""
    stem = Path(stem)
    bad = [f for f in formats if f not in FORMATS]
    if bad:
        raise UserError(f"figure format {bad[0]!r} is not supported; choose from {', '.join(FORMATS)}")
    stem.parent.mkdir(parents=True, exist_ok=True)
    paths = []
    for fmt in formats:
        path = stem.with_name(f"{stem.name}.{fmt}")
        with atomic_path(path) as tmp:  # a failed save never leaves half a file behind
            fig.savefig(tmp, format=fmt, dpi=DPI)
            os.chmod(tmp, 0o666 & ~_umask())  # mkstemp's 0600 would hide figures from others
        paths.append(path)
    return paths


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
