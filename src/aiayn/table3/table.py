"""Our Table 3 beside the paper's: each row's numbers over seeds, its change from our base beside
the paper's change from its base, and how well the two orders of the rows agree.

    table = build_table(results, header)   # results: one record per (row, seed) run (runs.py)
    write_table(table, "runs/table3")      # table3.md, table3.json
    table["summary"]                       # one line: Spearman rank correlation, signs that differ

A change from base is paired by seed: row seed k minus base seed k (the same initialisation seed
and data order), then mean and spread (sample standard deviation) over the seeds; a row's seed
without a base of the same seed reads against the base's mean. The paper's change is its row's
figure minus its base's (25.8 BLEU, 4.92 PPL); a blank PPL or params in the paper is as base.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aiayn.errors import UserError
from aiayn.folder.files import atomic_write_text
from aiayn.table3.rows import COLUMNS, ROWS

METRICS = ("bleu", "ppl")


# -- a result record, as read back from results/ROW-seedK.json ----------------------------------

def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _count(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


AGAIN = "; delete the file to run that row again (aiayn table3 --resume)"  # the way out
_NUMBER = ("a finite number", _number)
# Each key of a record the table (and --merge) reads: what it must be, and the test of it.
RECORD_KEYS = {"row": ("a row of Table 3", lambda v: isinstance(v, str) and v in ROWS),
               "seed": ("a whole number >= 0", _count), "bleu": _NUMBER, "ppl": _NUMBER,
               "params": _NUMBER, "steps": _NUMBER, "seconds": _NUMBER,
               "settings": (f"an object with the columns {', '.join(COLUMNS)}",
                            lambda v: isinstance(v, dict) and all(k in v for k in COLUMNS)),
               "folder": ("a path (text)", lambda v: isinstance(v, str))}
OPTIONAL_KEYS = {"params_paper_size": ("a finite number or null", lambda v: v is None or _number(v)),
                 "dev_pairs": ("a whole number >= 0", _count)}


def check_record(record: Any, path: Path) -> dict[str, Any]:
    """`record` (read from `path`) if it holds every key the table reads, each of its type; else
    a UserError naming the file and the key, and the way out: delete the file (its row and seed
    then run again with --resume)."""
    if not isinstance(record, dict):
        raise UserError(f"{path}: not a table3 result (a JSON object){AGAIN}")
    for key, (want, fits) in [*RECORD_KEYS.items(), *OPTIONAL_KEYS.items()]:
        if key not in record:
            if key in RECORD_KEYS:
                raise UserError(f"{path}: no {key!r} (must be {want}){AGAIN}")
        elif not fits(record[key]):
            raise UserError(f"{path}: {key}={_short(record[key])} must be {want}{AGAIN}")
    return record


def _short(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _spread(values: Sequence[float]) -> dict[str, Any]:
    """{"mean", "sd" (sample; 0 for one value), "n", "values"} of a metric over seeds."""
    values = [float(v) for v in values]
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return {"mean": statistics.fmean(values), "sd": sd, "n": len(values), "values": values}


def _paper(row_name: str, metric: str) -> float | None:
    row, base = ROWS[row_name], ROWS["base"]
    value = getattr(row, metric)
    if value is None or row is base:
        return None
    return round(value - getattr(base, metric), 2)


def build_table(results: Sequence[dict[str, Any]], header: dict[str, Any]) -> dict[str, Any]:
    """The table of `results` (records of runs.evaluate_row: "row", "seed", "bleu", "ppl",
    "params", "settings", ...), in the paper's row order, with the agreement summary."""
    by_row: dict[str, dict[int, dict[str, Any]]] = {}
    for r in results:
        by_row.setdefault(r["row"], {})[int(r["seed"])] = r
    base = by_row.get("base", {})
    rows = []
    for row in (r for r in ROWS.values() if r.name in by_row):
        seeds = by_row[row.name]
        first = seeds[min(seeds)]
        entry: dict[str, Any] = {
            "row": row.name, "group": row.group, "settings": first["settings"],
            "paper": {"changes": row.changes, "ppl": row.ppl, "bleu": row.bleu,
                      "params_millions": row.paper_params,
                      "delta_bleu": _paper(row.name, "bleu"), "delta_ppl": _paper(row.name, "ppl")},
            "params": first["params"], "params_paper_size": first.get("params_paper_size"),
            "steps": _spread([s["steps"] for s in seeds.values()])["mean"],
            "seconds": sum(s["seconds"] for s in seeds.values()),
            "seeds": sorted(seeds)}
        for m in METRICS:
            entry[m] = _spread([seeds[k][m] for k in sorted(seeds)])
            if base and row.name != "base":
                base_mean = statistics.fmean(b[m] for b in base.values())
                entry[f"delta_{m}"] = _spread([seeds[k][m] - (base[k][m] if k in base else base_mean)
                                               for k in sorted(seeds)])
        rows.append(entry)
    table = {**header, "rows": rows}
    table["agreement"] = agreement(rows)
    table["summary"] = summary_line(table["agreement"])
    return table


def _spearman(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Spearman's rank correlation (average ranks for ties); None under 3 pairs or a constant."""
    if len(a) < 3 or len(set(a)) < 2 or len(set(b)) < 2:
        return None
    from scipy.stats import spearmanr

    rho = float(spearmanr(a, b).statistic)
    return None if math.isnan(rho) else rho


def agreement(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per metric: the rank correlation of our changes with the paper's over the rows that have
    both, and the rows whose change has the other sign (rows where the paper's change is 0
    have no sign to differ from)."""
    out: dict[str, Any] = {}
    for m in METRICS:
        pairs = [(r["row"], r[f"delta_{m}"]["mean"], r["paper"][f"delta_{m}"]) for r in rows
                 if f"delta_{m}" in r and r["paper"][f"delta_{m}"] is not None]
        ours, paper = [p[1] for p in pairs], [p[2] for p in pairs]
        out[m] = {"rows": len(pairs), "spearman": _spearman(ours, paper),
                  "sign_differs": [name for name, o, p in pairs if p != 0 and o * p <= 0]}
    return out


def summary_line(agree: dict[str, Any]) -> str:
    """'BLEU change vs the paper's: Spearman 0.41 over 18 rows; sign differs in C-N8, D-ls0.0.
    PPL: ...'"""
    parts = []
    for m, label in (("bleu", "BLEU"), ("ppl", "PPL")):
        a = agree[m]
        if not a["rows"]:
            parts.append(f"{label}: no row beside a base to compare")
            continue
        rho = "n/a" if a["spearman"] is None else f"{a['spearman']:+.2f}"
        signs = ", ".join(a["sign_differs"]) or "none"
        parts.append(f"{label} change vs the paper's: Spearman {rho} over {a['rows']} rows, "
                     f"sign differs in {signs}")
    return "; ".join(parts)


# -- the written table ---------------------------------------------------------------------------

def _fmt(spread: dict[str, Any] | None, digits: int, sign: bool = False) -> str:
    if not spread:
        return ""
    mean = f"{spread['mean']:+.{digits}f}" if sign else f"{spread['mean']:.{digits}f}"
    return f"{mean} ± {spread['sd']:.{digits}f}" if spread["n"] > 1 else mean


def _paper_value(value: float | None, digits: int, sign: bool = False) -> str:
    if value is None:
        return ""
    return f"{value:+.{digits}f}" if sign else f"{value:.{digits}f}"


def _setting(row: dict[str, Any], key: str) -> str:
    """A settings cell: the value the row ran with; blank where it is base's (as the paper)."""
    if row["row"] != "base" and key not in row["paper"]["changes"] and key != "steps":
        return ""
    value = row["settings"][key]
    if key == "steps":
        return f"{value:,}" if isinstance(value, int) else str(value)
    return str(value)


# With one seed the table cannot show its own noise; measured once at the cpu scale's default
# budget (benchmarks/RESULTS.md, "The paper's Table 3": base and A-h4 over 3 seeds).
_ONE_SEED = (" (one seed: its changes carry seed noise this table cannot show; at the cpu "
             "scale's default budget a change from base moved by ~0.6 BLEU sd between seeds: "
             "--seeds 3 gives mean ± sd)")


def markdown(table: dict[str, Any]) -> str:
    """table3.md: the header (what ran, the scale rule), then one line per row."""
    lines = [f"# Table 3 at scale {table['scale']}: {table['corpus']}", "",
             f"Scale {table['scale']}: {table['rule']}. Base here: " +
             ", ".join(f"{k} {v}" for k, v in table["base_settings"].items()) + ".",
             f"Budget: {table['budget']}. Seeds: {table['seeds']}"
             f"{_ONE_SEED if len(table['seeds']) == 1 else ''}. Dev split: "
             f"{table['dev_pairs']} pairs, beam {table['beam']} (alpha {table['alpha']}), "
             "no checkpoint averaging; PPL = exp(dev NLL per target subword, no label smoothing).",
             f"Params: ours at this run's sizes; at the paper's sizes with a {table['paper_vocab']:,}"
             "-token vocabulary beside the paper's (its figures fit a ~41,000-token "
             "vocabulary, big's 37,000: ours read 4,000 x d_model lower).", "",
             f"**{table['summary']}**", ""]
    head = ["row", *COLUMNS, "PPL paper", "PPL ours", "BLEU paper", "BLEU ours", "ΔBLEU paper",
            "ΔBLEU ours", "ΔPPL paper", "ΔPPL ours", "params paper (M)",
            "params ours at paper size (M)", "params ours (M)"]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in table["rows"]:
        p = r["paper"]
        at_paper = r.get("params_paper_size")
        cells = [r["row"], *(_setting(r, k) for k in COLUMNS),
                 _paper_value(p["ppl"], 2), _fmt(r["ppl"], 2), _paper_value(p["bleu"], 1),
                 _fmt(r["bleu"], 1), _paper_value(p["delta_bleu"], 1, True),
                 _fmt(r.get("delta_bleu"), 1, True), _paper_value(p["delta_ppl"], 2, True),
                 _fmt(r.get("delta_ppl"), 2, True), f"{p['params_millions']:g}",
                 "" if at_paper is None else f"{at_paper / 1e6:.1f}", f"{r['params'] / 1e6:.3f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write_table(table: dict[str, Any], out: str | Path) -> list[Path]:
    """DIR/table3.md and DIR/table3.json (each written atomically); the paths written."""
    out = Path(out)
    md, js = out / "table3.md", out / "table3.json"
    atomic_write_text(md, markdown(table))
    atomic_write_text(js, json.dumps(table, indent=1) + "\n")
    return [md, js]


__all__ = ["AGAIN", "METRICS", "OPTIONAL_KEYS", "RECORD_KEYS", "agreement", "build_table", "check_record",
           "markdown", "summary_line", "write_table"]
