"""T5's learned relative position bias (nn/relative_position.py) as a figure: what a model with
no absolute positions (§3.5 replaced) knows about order.

One row per stack (encoder: bidirectional buckets; decoder: causal ones). Left, the learned table
itself, head x bucket. Right, the bias each head adds to a score as a function of the key's
offset from the query (j - i): flat steps where offsets share a bucket, one step per offset near
0, logarithmically wider ones further out, constant beyond max_distance.
"""

from __future__ import annotations

import numpy as np
import torch
from matplotlib.figure import Figure

from aiayn.errors import UserError
from aiayn.nn.relative_position import RelativePositionBias
from aiayn.viz.style import new_figure


def bias_by_offset(bias: RelativePositionBias, max_offset: int) -> tuple[np.ndarray, np.ndarray]:
    """(offsets -max_offset..max_offset (a causal table: -max_offset..0), bias (H, offsets))."""
    high = max_offset if bias.bidirectional else 0
    offsets = torch.arange(-max_offset, high + 1)
    with torch.no_grad():  # key j = query + offset, the query at max_offset
        values = bias(1, max_offset + high + 1, max_offset)[0, :, 0]  # (H, offsets)
    return offsets.numpy(), values.float().cpu().numpy()


def stacks(model) -> list[tuple[str, RelativePositionBias]]:
    """The (name, bias) of each stack of `model` that has a relative position bias."""
    found = [(name, getattr(model, name).relative_bias) for name in ("encoder", "decoder")
             if getattr(getattr(model, name, None), "relative_bias", None) is not None]
    if not found:
        raise UserError("this model has no relative position bias (a T5-shaped translation "
                        "model has: model.relative_attention_num_buckets > 0)")
    return found


def plot_relative_bias(model, max_offset: int | None = None) -> Figure:
    """Per stack: the learned bias, head x bucket, and the bias against the key-query offset."""
    found = stacks(model)
    fig = new_figure(12.0, 4.2 * len(found))
    axes = fig.subplots(len(found), 2, squeeze=False)
    for (name, bias), (ax_table, ax_offset) in zip(found, axes, strict=True):
        table = bias.weight.detach().float().cpu().numpy().T  # (H, buckets)
        limit = float(np.abs(table).max()) or 1.0
        im = ax_table.imshow(table, cmap="RdBu_r", vmin=-limit, vmax=limit, aspect="auto",
                             interpolation="nearest")
        kind = "bidirectional" if bias.bidirectional else "causal"
        ax_table.set_title(f"{name}: learned bias ({kind} buckets)", fontsize=11)
        ax_table.set_xlabel("bucket")
        ax_table.set_ylabel("head")
        ax_table.set_yticks(range(table.shape[0]), [str(h + 1) for h in range(table.shape[0])])
        fig.colorbar(im, ax=ax_table, label="added to the score")
        reach = bias.max_distance + 8 if max_offset is None else max_offset
        offsets, values = bias_by_offset(bias, reach)
        for h, row in enumerate(values):
            ax_offset.step(offsets, row, where="mid", linewidth=1.2, label=f"head {h + 1}")
        ax_offset.axvline(0, color="grey", linewidth=0.6)
        ax_offset.set_title(f"{name}: bias by offset (max_distance {bias.max_distance})",
                            fontsize=11)
        ax_offset.set_xlabel("key position - query position")
        ax_offset.set_ylabel("bias")
        if values.shape[0] <= 12:
            ax_offset.legend(fontsize=7, ncol=2)
    return fig


__all__ = ["bias_by_offset", "plot_relative_bias", "stacks"]
