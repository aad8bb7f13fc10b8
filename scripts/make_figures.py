#!/usr/bin/env python
"""Write the README's figures with the package's own code:

    python scripts/make_figures.py MODEL_DIR [--text "..."] [--out docs/figures]

docs/figures/attention.png  cross-attention (translation; self-attention for other families),
                            last layer, all heads, of --text through MODEL_DIR
docs/figures/positions.png  the §3.5 sinusoidal encoding (d_model 64, 100 positions)
docs/figures/masks.png      the causal mask; bidirectional vs causal attention
docs/figures/curves.png     MODEL_DIR/metrics.jsonl (skipped, with a message, when absent)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from aiayn.errors import UserError
from aiayn.viz import (
    Inspector,
    plot_curves,
    plot_maps,
    plot_masks,
    plot_positions,
    read_metrics,
    save_figure,
)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model", help="model folder (translation, LM or encoder)")
    p.add_argument("--text", default="Tuesday, March 5, 2024",
                   help="input for the attention figure")
    p.add_argument("--out", default="docs/figures", help="output folder (default docs/figures)")
    args = p.parse_args(argv)
    out = Path(args.out)
    try:
        result = Inspector.load(args.model).run(args.text)
        maps = next((m for m in result.maps if m.kind == "cross"), result.maps[-1])
        figures = {"attention": plot_maps(maps, maps.n_layers - 1),
                   "positions": plot_positions(64, 100), "masks": plot_masks()}
        try:
            figures["curves"] = plot_curves(read_metrics(args.model), "Training curves: "
                                            + Path(args.model).name)
        except UserError as e:
            print(f"make_figures: no curves ({e})", file=sys.stderr)
        for name, fig in figures.items():
            for path in save_figure(fig, out / name, ("png",)):
                print(path)
    except UserError as e:
        print(f"make_figures: error: {e}", file=sys.stderr)
        return 2
    if result.output is not None:
        print(f"{args.text!r} -> {result.output!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
