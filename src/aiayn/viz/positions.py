"""The sinusoidal positional encoding (§3.5) as figures.

PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(same), computed by the ONE
implementation in aiayn.nn.positions. §3.5 chose it because PE(pos + k) is a linear function of
PE(pos): the dot product PE(p) . PE(p + k) = sum_i cos(k * w_i) depends only on the offset k, which
the last two panels show (a Toeplitz similarity matrix; curves from different p lying on top of
each other).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.figure import Figure

from aiayn.nn.positions import sinusoidal_positions
from aiayn.viz.style import new_figure


def encoding(max_len: int, d_model: int) -> np.ndarray:
    """(max_len, d_model) table of §3.5, as a float64 numpy array."""
    if max_len < 2 or d_model < 2:
        raise ValueError(f"need max_len >= 2 and d_model >= 2 (got {max_len}, {d_model})")
    return sinusoidal_positions(max_len, d_model).double().numpy()


def similarity(pe: np.ndarray) -> np.ndarray:
    """Dot products PE(p) . PE(q) of every pair of positions: (max_len, max_len)."""
    return pe @ pe.T


def default_dims(d_model: int) -> list[int]:
    """A few dimensions from fast (0, 1) to slow (d_model - 2) wavelengths."""
    dims = [0, 1, d_model // 8 * 2, d_model // 4 * 2, d_model - 2]
    return sorted({d for d in dims if 0 <= d < d_model})


def plot_positions(d_model: int = 64, max_len: int = 100, dims: Sequence[int] | None = None,
                   starts: Sequence[int] | None = None) -> Figure:
    """Four panels: the encoding (position x dimension), selected dimensions as curves, the
    position-position dot products, and PE(p) . PE(p + k) against the offset k for several p."""
    pe = encoding(max_len, d_model)
    sim = similarity(pe)
    dims = default_dims(d_model) if dims is None else list(dims)
    bad = [d for d in dims if not 0 <= d < d_model]
    if bad:
        raise ValueError(f"dimension {bad[0]} is out of range for d_model={d_model}")
    fig = new_figure(12.0, 9.0)
    (ax_pe, ax_dims), (ax_sim, ax_off) = fig.subplots(2, 2)

    im = ax_pe.imshow(pe, cmap="RdBu_r", vmin=-1, vmax=1, aspect="auto", interpolation="nearest")
    ax_pe.set_label("encoding")
    ax_pe.set_title(f"Sinusoidal encoding (d_model={d_model})", fontsize=11)
    ax_pe.set_xlabel("dimension (even: sin, odd: cos)")
    ax_pe.set_ylabel("position")
    fig.colorbar(im, ax=ax_pe, label="PE value")

    pos = np.arange(max_len)
    for d in dims:
        kind = "sin" if d % 2 == 0 else "cos"
        ax_dims.plot(pos, pe[:, d], label=f"dim {d} ({kind}, λ={_wavelength(d, d_model):.3g})")
    ax_dims.set_label("dimensions")
    ax_dims.set_title("Selected dimensions: wavelengths from 2π to 10000·2π", fontsize=11)
    ax_dims.set_xlabel("position")
    ax_dims.set_ylabel("PE value")
    ax_dims.set_ylim(-1.15, 1.6)
    ax_dims.legend(fontsize=8, ncols=2, loc="upper right")

    im = ax_sim.imshow(sim, cmap="viridis", aspect="auto", interpolation="nearest")
    ax_sim.set_label("similarity")
    ax_sim.set_title("Dot product PE(p) · PE(q): constant along diagonals", fontsize=11)
    ax_sim.set_xlabel("position q")
    ax_sim.set_ylabel("position p")
    fig.colorbar(im, ax=ax_sim, label="PE(p) · PE(q)")

    starts = _default_starts(max_len) if starts is None else list(starts)
    for p in starts:
        k = np.arange(0, max_len - p)
        ax_off.plot(k, sim[p, p + k], label=f"p = {p}", linewidth=2.2 - 0.4 * starts.index(p))
    ax_off.set_label("offset")
    ax_off.set_title("PE(p) · PE(p + k) depends only on the offset k", fontsize=11)
    ax_off.set_xlabel("offset k")
    ax_off.set_ylabel("dot product")
    ax_off.legend(fontsize=8)
    fig.suptitle("§3.5 positional encoding", fontsize=13)
    return fig


def _wavelength(dim: int, d_model: int) -> float:
    """The wavelength of dimension `dim`: 2π · 10000^(2i/d_model), 2i = dim rounded down to even."""
    return 2 * np.pi * 10000.0 ** ((dim - dim % 2) / d_model)


def _default_starts(max_len: int) -> list[int]:
    return sorted({0, max_len // 4, max_len // 2})
