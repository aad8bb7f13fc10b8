"""Table 3's figure: per row, our dev BLEU change from base against the paper's.

Left: one line per row (the paper's order, top to bottom), the paper's change (a cross) and ours
(a dot, with an error bar of one standard deviation over seeds). Right: ours against the paper's,
one point per row, with the Spearman rank correlation. The two are on their own scales: the
paper's BLEU is WMT14 EN-DE at 100K steps, ours whatever corpus and budget the table ran.
"""

from __future__ import annotations

from typing import Any

from matplotlib.figure import Figure

from aiayn.viz.style import new_figure

GROUP_COLOURS = {"A": "tab:blue", "B": "tab:orange", "C": "tab:green", "D": "tab:red",
                 "E": "tab:purple", "big": "tab:brown"}


def table3_figure(table: dict[str, Any]) -> Figure:
    """The figure of a table (aiayn.table3.table.build_table); rows without a change from base
    (base itself, or every row when base has not run) are left out."""
    rows = [r for r in table["rows"] if "delta_bleu" in r]
    fig = new_figure(11, max(3.6, 0.32 * len(rows) + 1.6))
    left, right = fig.subplots(1, 2, width_ratios=[1.6, 1])
    ys = list(range(len(rows)))[::-1]
    for y, r in zip(ys, rows, strict=True):
        colour = GROUP_COLOURS.get(r["group"], "black")
        d = r["delta_bleu"]
        left.errorbar(d["mean"], y, xerr=d["sd"] if d["n"] > 1 else None, fmt="o",
                      color=colour, capsize=3, ms=5)
        if r["paper"]["delta_bleu"] is not None:
            left.plot(r["paper"]["delta_bleu"], y, "x", color="black", ms=6)
            right.errorbar(r["paper"]["delta_bleu"], d["mean"],
                           yerr=d["sd"] if d["n"] > 1 else None, fmt="o", color=colour,
                           capsize=3, ms=5)
            right.annotate(r["row"], (r["paper"]["delta_bleu"], d["mean"]), fontsize=7,
                           xytext=(3, 2), textcoords="offset points")
    left.axvline(0, color="grey", lw=0.8)
    left.set_yticks(ys, [r["row"] for r in rows], fontsize=8)
    left.set_xlabel("dev BLEU change from base")
    left.plot([], [], "x", color="black", label="paper (WMT14 EN-DE)")
    left.plot([], [], "o", color="grey", label=f"aiayn ({table['corpus']}, scale {table['scale']})")
    left.legend(fontsize=8, loc="upper left", bbox_to_anchor=(0, -0.08), ncol=2, frameon=False)
    left.set_title("Table 3: each row's change from base", fontsize=10)
    right.axhline(0, color="grey", lw=0.8)
    right.axvline(0, color="grey", lw=0.8)
    right.set_xlabel("paper's BLEU change")
    right.set_ylabel("our BLEU change (± sd, seeds)")
    rho = table["agreement"]["bleu"]["spearman"]
    right.set_title("Spearman " + ("n/a" if rho is None else f"{rho:+.2f}") +
                    f" over {table['agreement']['bleu']['rows']} rows", fontsize=10)
    if not rows:
        left.text(0.5, 0.5, "no row beside a base yet", ha="center", transform=left.transAxes)
    return fig


__all__ = ["table3_figure"]
