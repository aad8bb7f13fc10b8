"""Training curves from a model folder's metrics log (DIR/metrics.jsonl, aiayn.training.metrics).

Each row is {"step": n, ...}: training rows carry "loss" and "lr" (and "accuracy", "nll", ...),
evaluation rows carry "valid_loss", "valid_bleu", "valid_accuracy", ... Three panels: losses,
learning rate (§5.3's warmup then decay is visible there), and quality scores over steps.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from aiayn.config.files import load_json
from aiayn.errors import UserError
from aiayn.viz.style import new_figure

# "loss" is what training minimises (label-smoothed, §5.4: it cannot fall below the smoothing's
# entropy); "nll" is the plain negative log-likelihood beside it, the figure that keeps falling.
LOSS_KEYS = ("loss", "nll", "valid_loss", "valid_nll")
LR_KEYS = ("lr",)
# Scores plotted on a 0-100 scale; fractions (accuracy in [0, 1]) are shown as percentages.
SCORE_KEYS = ("valid_bleu", "valid_chrf", "valid_exact_match", "accuracy", "valid_accuracy", "bleu")
PERCENT_KEYS = ("accuracy", "valid_accuracy")


def read_metrics(folder: str | Path) -> list[dict[str, Any]]:
    """Rows of DIR/metrics.jsonl (or DIR itself when it is the file), in file order."""
    path = Path(folder)
    path = path / "metrics.jsonl" if path.is_dir() else path
    if not path.is_file():
        raise UserError(f"{path}: no metrics log (train a model into this folder first)")
    rows = []
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise UserError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = load_json(line, f"{path}:{n}")  # bounded in depth
        except json.JSONDecodeError as e:
            raise UserError(f"{path}:{n}: invalid JSON ({e.msg})") from None
        if not isinstance(row, dict) or not isinstance(row.get("step"), int):
            raise UserError(f"{path}:{n}: a row needs an integer 'step'")
        rows.append(row)
    if not rows:
        raise UserError(f"{path}: the metrics log is empty")
    return rows


def series(rows: list[dict[str, Any]], key: str) -> tuple[list[int], list[float]]:
    """(steps, values) of the rows that have a finite number under `key`."""
    steps, values = [], []
    for row in rows:
        v = row.get(key)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            steps.append(row["step"])
            values.append(float(v))
    return steps, values


def plot_curves(rows: list[dict[str, Any]], title: str = "Training curves") -> Figure:
    """Losses, learning rate and scores over steps: one panel each (the panels with data)."""
    panels = [("loss", "Loss (nats per token)", LOSS_KEYS),
              ("lr", "Learning rate", LR_KEYS),
              ("scores", "Scores (BLEU, chrF, exact match, accuracy %)", SCORE_KEYS)]
    panels = [p for p in panels if any(series(rows, k)[0] for k in p[2])]
    if not panels:
        raise UserError("the metrics log has no loss, learning rate or score to plot")
    fig = new_figure(5.2 * len(panels), 4.4)
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, (name, ylabel, keys) in zip(axes, panels, strict=True):
        for key in keys:
            steps, values = series(rows, key)
            if not steps:
                continue
            if key in PERCENT_KEYS and max(values) <= 1.0:
                values = [100 * v for v in values]
            marker = "o" if len(steps) <= 30 else None
            ax.plot(steps, values, label=key, marker=marker, markersize=3)
        ax.set_label(name)
        ax.set_title(ylabel, fontsize=11)
        ax.set_xlabel("step")
        ax.set_ylabel(ylabel.split(" (")[0])
        ax.grid(alpha=0.3)
        if name == "lr":
            ax.ticklabel_format(axis="y", style="sci", scilimits=(-3, 3))
        else:
            ax.legend(fontsize=8)
    fig.suptitle(title, fontsize=12)
    return fig
