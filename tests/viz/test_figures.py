"""Positional-encoding, mask and training-curve figures: the panels exist and plot the package's
own numbers (aiayn.nn.positions, aiayn.masks, the metrics log); the `aiayn viz` CLI writes files."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from aiayn.cli import main
from aiayn.masks import causal_mask
from aiayn.nn.positions import sinusoidal_positions
from aiayn.viz.curves import plot_curves, read_metrics
from aiayn.viz.masks import demo_weights, plot_masks
from aiayn.viz.positions import plot_positions


def _panel(fig, label):
    return next(ax for ax in fig.axes if ax.get_label() == label)


def test_positions_figure_plots_the_encoding_and_offset_invariance():
    fig = plot_positions(d_model=32, max_len=50)
    pe = sinusoidal_positions(50, 32).double().numpy()
    image = np.asarray(_panel(fig, "encoding").get_images()[0].get_array())
    np.testing.assert_allclose(image, pe, atol=1e-6)
    sim = np.asarray(_panel(fig, "similarity").get_images()[0].get_array())
    np.testing.assert_allclose(sim, pe @ pe.T, atol=1e-6)
    # §3.5: PE(p) . PE(p + k) depends only on k: the offset curves coincide where they overlap.
    lines = _panel(fig, "offset").get_lines()
    assert len(lines) == 3
    ys = [line.get_ydata() for line in lines]
    n = min(len(y) for y in ys)
    for y in ys[1:]:
        np.testing.assert_allclose(y[:n], ys[0][:n], atol=1e-4)
    dims = _panel(fig, "dimensions").get_lines()
    assert len(dims) >= 3
    np.testing.assert_allclose(dims[0].get_ydata(), pe[:, 0], atol=1e-6)
    assert all(ax.get_title() for ax in fig.axes if ax.get_label() != "<colorbar>")


def test_masks_figure_uses_the_package_mask_and_attention():
    tokens = ["<s>", "a", "b", "c", "d"]
    fig = plot_masks(tokens)
    mask, both, causal = demo_weights(len(tokens))
    assert np.array_equal(mask, causal_mask(5)[0, 0].numpy())
    shown = np.asarray(_panel(fig, "mask").get_images()[0].get_array())
    assert np.array_equal(shown.astype(bool), mask)
    c = np.asarray(_panel(fig, "causal").get_images()[0].get_array())
    np.testing.assert_allclose(c, causal)
    assert np.all(np.triu(c, 1) == 0) and np.allclose(c.sum(1), 1, atol=1e-6)
    b = np.asarray(_panel(fig, "bidirectional").get_images()[0].get_array())
    assert np.all(b[np.triu_indices(5, 1)] > 0) and np.allclose(b.sum(1), 1, atol=1e-6)
    # the causal row i is the bidirectional row renormalised over keys <= i (same Q, K)
    np.testing.assert_allclose(c[2, :3], b[2, :3] / b[2, :3].sum(), atol=1e-6)
    ticks = [t.get_text() for t in _panel(fig, "causal").get_xticklabels()]
    assert ticks == tokens


def _write_metrics(folder, rows):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_curves_figure_plots_the_log(tmp_path):
    rows = [{"step": s, "loss": 5.0 / s, "lr": 1e-3 * s, "accuracy": s / 100} for s in range(1, 11)]
    rows += [{"step": 5, "valid_loss": 1.5, "valid_bleu": 20.0}, {"step": 10, "valid_loss": 1.0,
                                                                   "valid_bleu": 35.5}]
    _write_metrics(tmp_path / "m", rows)
    fig = plot_curves(read_metrics(tmp_path / "m"))
    loss = {line.get_label(): line for line in _panel(fig, "loss").get_lines()}
    assert set(loss) == {"loss", "valid_loss"}
    assert list(loss["valid_loss"].get_xdata()) == [5, 10]
    np.testing.assert_allclose(loss["loss"].get_ydata(), [5.0 / s for s in range(1, 11)])
    np.testing.assert_allclose(_panel(fig, "lr").get_lines()[0].get_ydata(),
                               [1e-3 * s for s in range(1, 11)])
    scores = {line.get_label(): line for line in _panel(fig, "scores").get_lines()}
    np.testing.assert_allclose(scores["valid_bleu"].get_ydata(), [20.0, 35.5])
    np.testing.assert_allclose(scores["accuracy"].get_ydata(), [s for s in range(1, 11)])  # as %


def test_curves_bad_logs_are_user_errors(tmp_path, capsys):
    assert main(["viz", "curves", "--model", str(tmp_path)]) == 2
    assert "no metrics log" in capsys.readouterr().err
    (tmp_path / "metrics.jsonl").write_text('{"step": 1, "loss": 2}\n{oops\n')
    assert main(["viz", "curves", "--model", str(tmp_path)]) == 2
    assert "metrics.jsonl:2: invalid JSON" in capsys.readouterr().err


def test_cli_writes_png_and_svg(tmp_path):
    out = tmp_path / "figs"
    assert main(["viz", "positions", "--d-model", "16", "--max-len", "20", "--out", str(out),
                 "--format", "both"]) == 0
    assert main(["viz", "masks", "--out", str(out), "--tokens", "<s> x y"]) == 0
    _write_metrics(tmp_path / "m", [{"step": 1, "loss": 3.0, "lr": 0.1}])
    assert main(["viz", "curves", "--model", str(tmp_path / "m"), "--out", str(out)]) == 0
    names = sorted(p.name for p in out.iterdir())
    assert names == ["curves.png", "masks.png", "positions.png", "positions.svg"]
    assert (out / "positions.png").read_bytes()[:4] == b"\x89PNG"
    assert b"<svg" in (out / "positions.svg").read_bytes()[:500]


def test_cli_positions_rejects_bad_sizes(tmp_path, capsys):
    assert main(["viz", "positions", "--d-model", "1", "--out", str(tmp_path)]) == 2
    assert "at least 2" in capsys.readouterr().err


@pytest.mark.parametrize("n", [40])
def test_long_token_axes_stay_readable(n):
    """Up to ~40 tokens: one tick label per token, no overlapping tick labels."""
    from aiayn.viz.attention import plot_attention
    labels = [f"▁tok{i}" for i in range(n)]
    w = torch.softmax(torch.randn(2, n, n), -1)
    fig = plot_attention(w, labels, labels, title="t")
    fig.canvas.draw()
    ax = fig.axes[0]
    for ticks in (ax.get_xticklabels(), ax.get_yticklabels()):
        assert [t.get_text() for t in ticks] == labels
        boxes = [t.get_window_extent() for t in ticks]
        assert not any(a.overlaps(b) for a, b in zip(boxes, boxes[1:], strict=False))


def test_the_curves_figure_shows_the_nll_beside_the_smoothed_loss():
    rows = [{"step": s, "loss": 3.0 - s / 100, "nll": 2.5 - s / 50, "lr": 1e-3} for s in range(1, 50)]
    rows.append({"step": 49, "valid_loss": 2.7, "valid_nll": 2.2})
    fig = plot_curves(rows)
    loss_axis = next(ax for ax in fig.axes if ax.get_label() == "loss")
    labels = {line.get_label() for line in loss_axis.get_lines()}
    assert {"loss", "nll", "valid_loss", "valid_nll"} <= labels
    assert not math.isnan(loss_axis.get_lines()[1].get_ydata()[0])

