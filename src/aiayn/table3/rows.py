"""The rows of the paper's Table 3 (variations on the base model), as data, and the scales they run at.

    from aiayn.table3.rows import ROWS, settings, model_overrides, count_parameters
    row = ROWS["B-dk16"]                      # (B): d_k 16 alone; the paper's 5.16 PPL, 25.1 BLEU, 58M
    s = settings(row, "cpu", updates=1000)    # the paper's columns at the CPU scale
    model_overrides(s)                        # ["model.n_layers=3", "model.d_model=128", ...]
    count_parameters(settings(row, "base"))   # at the paper's sizes, 37,000-token vocabulary

A row is its name, its group ((A) .. (E), "base", "big"), the paper's columns it changes (blank
in the paper = as base) and the paper's dev perplexity, BLEU and parameter count. The rows are
the paper's Table 3 (EN-DE newstest2013, beam 4, no checkpoint averaging) as PAPER.md holds it:

  (A) h and d_k = d_v with h x d_k = d_model, so the compute stays the same;
  (B) d_k alone (d_v stays 64): TransformerConfig.value_dim keeps d_v while head_dim narrows
      the queries and keys (the paper's 58M and 60M count d_v at 64);
  (C) N, d_model (with d_k = d_v = d_model / h), d_ff;
  (D) P_drop (§5.4: residual and embedding dropout) and eps_ls (label smoothing);
  (E) learned positions instead of §3.5's sinusoids.

A scale maps the paper's sizes to what runs: "base" is the paper's sizes; "cpu" divides every
width (d_model, d_ff, d_k, d_v, and the 37k vocabulary) by 4 and the depth N by 2, and keeps
the head count h, so that the whole table trains on a 2-core CPU in about an hour at its default
budget. (Widths / 8 at full depth, d_model 64 in 6 + 6 layers, cost as much per update as
d_model 128 in 3 + 3 and learned half as fast on gettext: dev NLL 6.24 vs 5.66 after 200
updates.) Steps: the paper trains every row 100K steps (big 300K); a run gives the base `updates`
updates and every row the same fraction of the paper's steps.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

from aiayn.errors import UserError

# The paper's base model (Table 3, first row; §3, §5.2-§5.4). Keys are the table's columns.
BASE: dict[str, Any] = {"N": 6, "d_model": 512, "d_ff": 2048, "h": 8, "d_k": 64, "d_v": 64,
                        "P_drop": 0.1, "eps_ls": 0.1, "positions": "sinusoid", "steps": 100_000}
COLUMNS = tuple(BASE)
WIDTHS = ("d_model", "d_ff", "d_k", "d_v")  # what a scale divides
PAPER_VOCAB = 37_000  # §5.1: a shared source-target BPE vocabulary of about 37,000 tokens


@dataclass(frozen=True)
class Row:
    """One row of Table 3: the columns it changes from base, and the paper's results."""

    name: str
    group: str  # "base", "A" .. "E", "big"
    changes: dict[str, Any] = field(default_factory=dict)
    ppl: float | None = None  # dev perplexity per word-piece
    bleu: float | None = None  # dev BLEU (newstest2013)
    params: float | None = None  # x10^6; None: blank in the paper (as base)

    @property
    def paper_params(self) -> float:
        """The paper's parameter count in millions (a blank reads as base's 65)."""
        return self.params if self.params is not None else 65.0


# Table 3 of the paper, row by row (PAPER.md). Blank columns are left out of `changes`.
_TABLE: list[Row] = [
    Row("base", "base", {}, 4.92, 25.8, 65),
    Row("A-h1", "A", {"h": 1, "d_k": 512, "d_v": 512}, 5.29, 24.9),
    Row("A-h4", "A", {"h": 4, "d_k": 128, "d_v": 128}, 5.00, 25.5),
    Row("A-h16", "A", {"h": 16, "d_k": 32, "d_v": 32}, 4.91, 25.8),
    Row("A-h32", "A", {"h": 32, "d_k": 16, "d_v": 16}, 5.01, 25.4),
    Row("B-dk16", "B", {"d_k": 16}, 5.16, 25.1, 58),
    Row("B-dk32", "B", {"d_k": 32}, 5.01, 25.4, 60),
    Row("C-N2", "C", {"N": 2}, 6.11, 23.7, 36),
    Row("C-N4", "C", {"N": 4}, 5.19, 25.3, 50),
    Row("C-N8", "C", {"N": 8}, 4.88, 25.5, 80),
    Row("C-d256", "C", {"d_model": 256, "d_k": 32, "d_v": 32}, 5.75, 24.5, 28),
    Row("C-d1024", "C", {"d_model": 1024, "d_k": 128, "d_v": 128}, 4.66, 26.0, 168),
    Row("C-ff1024", "C", {"d_ff": 1024}, 5.12, 25.4, 53),
    Row("C-ff4096", "C", {"d_ff": 4096}, 4.75, 26.2, 90),
    Row("D-drop0.0", "D", {"P_drop": 0.0}, 5.77, 24.6),
    Row("D-drop0.2", "D", {"P_drop": 0.2}, 4.95, 25.5),
    Row("D-ls0.0", "D", {"eps_ls": 0.0}, 4.67, 25.3),
    Row("D-ls0.2", "D", {"eps_ls": 0.2}, 5.47, 25.7),
    Row("E-learned", "E", {"positions": "learned"}, 4.92, 25.7),
    Row("big", "big", {"d_model": 1024, "d_ff": 4096, "h": 16, "P_drop": 0.3, "steps": 300_000},
        4.33, 26.4, 213),
]
ROWS: dict[str, Row] = {row.name: row for row in _TABLE}
GROUPS = ("base", "A", "B", "C", "D", "E", "big")
DEFAULT_GROUPS = ("base", "A", "B", "C", "D", "E")  # "big" when asked for


@dataclass(frozen=True)
class Scale:
    """How the paper's sizes map to a run's: widths (and the vocabulary) divided by `width`,
    the depth N by `depth`."""

    name: str
    width: int
    depth: int
    config: str  # the built-in config holding the training recipe at this scale
    rule: str  # said in the table's header

    @property
    def vocab_size(self) -> int:
        return PAPER_VOCAB // self.width


SCALES: dict[str, Scale] = {
    "cpu": Scale("cpu", 4, 2, "table3-cpu", "widths (d_model, d_ff, d_k, d_v) and the 37k "
                 "vocabulary divided by 4, the depth N by 2; h as the paper's"),
    "base": Scale("base", 1, 1, "table3-base", "the paper's sizes"),
}


def select_rows(groups: str | None) -> list[Row]:
    """The rows of `groups` ("base,A,B,C,D,E", "big", or row names such as "C-N2"), in the
    paper's order. None: base and (A) .. (E). Every change is read from base: rows run without
    it (in another process, to be merged) show their changes once a table holds both."""
    wanted = list(DEFAULT_GROUPS) if groups is None else \
        [g.strip() for g in groups.split(",") if g.strip()]
    if not wanted:
        raise UserError("--rows: name at least one group (base, A, B, C, D, E, big) or row")
    for g in wanted:
        if g not in GROUPS and g not in ROWS:
            from aiayn.config import did_you_mean
            raise UserError(f"--rows: unknown row or group {g!r}; groups: {', '.join(GROUPS)}; "
                            f"rows: {', '.join(ROWS)}{did_you_mean(g, [*GROUPS, *ROWS])}")
    return [r for r in _TABLE if r.group in wanted or r.name in wanted]


def settings(row: Row, scale: str = "base", updates: int | None = None) -> dict[str, Any]:
    """The row's columns as a run at `scale` has them: base's, the row's changes over them,
    widths divided by the scale's rule; steps = updates x (the row's steps / base's) when
    `updates` is given (the paper's steps otherwise)."""
    s = {**BASE, **row.changes}
    rule = SCALES[scale]
    for key, div in [*((k, rule.width) for k in WIDTHS), ("N", rule.depth)]:
        if s[key] % div:
            raise ValueError(f"{row.name}: {key}={s[key]} does not divide by {div}")
        s[key] //= div
    if updates is not None:
        s["steps"] = updates * s["steps"] // BASE["steps"]
    return s


def model_overrides(s: dict[str, Any]) -> list[str]:
    """The model.* and train.* overrides of an experiment that trains settings `s`.

    d_k = d_model / h is the model's own (head_dim null); another d_k is head_dim, and a d_v
    other than d_k is value_dim (row B). The vocabulary is the data's (data.vocab_size)."""
    d_k = s["d_k"] if s["d_k"] * s["h"] != s["d_model"] else None
    d_v = s["d_v"] if s["d_v"] != s["d_k"] else None
    positions = {"sinusoid": "sinusoidal", "learned": "learned"}[s["positions"]]
    return [f"model.n_layers={s['N']}", f"model.d_model={s['d_model']}",
            f"model.d_ff={s['d_ff']}", f"model.n_heads={s['h']}",
            f"model.head_dim={'null' if d_k is None else d_k}",
            f"model.value_dim={'null' if d_v is None else d_v}",
            f"model.dropout={s['P_drop']}", f"model.positions={positions}",
            f"train.label_smoothing={s['eps_ls']}", f"train.max_steps={s['steps']}"]


def model_config(s: dict[str, Any], vocab_size: int, max_len: int = 1024):
    """The TransformerConfig of settings `s` (the paper's defaults for everything else)."""
    from aiayn.config import TransformerConfig
    from aiayn.config.experiment import parse_value

    fields = {}
    for item in model_overrides(s):
        key, _, value = item.partition("=")
        if key.startswith("model."):
            fields[key[len("model."):]] = parse_value(value)
    return TransformerConfig(vocab_size=vocab_size, max_len=max_len, **fields)


def count_parameters(s: dict[str, Any], vocab_size: int = PAPER_VOCAB, max_len: int = 1024) -> int:
    """The parameters of the model of settings `s` (aiayn.sizes.count_parameters: built on the
    meta device, no memory): one shared embedding matrix (§3.4) and every layer's weights and
    biases, as the paper counts; a learned position table (row E) counts too. Counted once per
    shape (SHAPE's columns, the vocabulary, max_len) in a process: the rows that differ only in
    dropout, label smoothing or steps (D, and each row's time estimate against base) share it."""
    return _count_shape(tuple(s[k] for k in SHAPE), vocab_size, max_len)


# The columns a parameter count reads (P_drop, eps_ls and steps hold no parameters).
SHAPE = ("N", "d_model", "d_ff", "h", "d_k", "d_v", "positions")


@functools.lru_cache(maxsize=1024)
def _count_shape(shape: tuple, vocab_size: int, max_len: int) -> int:
    from aiayn.sizes import count_parameters as count

    return count(model_config({**BASE, **dict(zip(SHAPE, shape, strict=True))}, vocab_size,
                              max_len))


__all__ = ["BASE", "COLUMNS", "DEFAULT_GROUPS", "GROUPS", "PAPER_VOCAB", "ROWS", "Row", "SCALES",
           "SHAPE", "Scale", "count_parameters", "model_config", "model_overrides", "select_rows",
           "settings"]
