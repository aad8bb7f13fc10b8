"""What the rows of one Table 3 share (the plan), and the experiment of each row and seed.

    plan = Plan(scale="cpu", corpus="gettext", groups="base,A", seeds=1, updates=600)
    exp = row_experiment(ROWS["B-dk16"], seed=0, plan=plan, folder=Path("runs/t3/rows/B-dk16/seed0"))

A table's folder records its plan's shared part in table3-plan.json: `--resume` and `--merge`
check that every row of one table was trained under the same one (check_plan, read_plan).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from aiayn.errors import UserError
from aiayn.folder.format import folder_contents, read_json
from aiayn.table3.rows import BASE, SCALES, Row, model_overrides, settings

PLAN_FILE = "table3-plan.json"
# What every row of one table must share (merge and --resume check them).
SHARED = ("scale", "corpus", "updates", "minutes_per_row", "dev_pairs", "overrides", "corpus_content")
MAX_SEEDS = 100  # a bound on --seeds, as on every count flag (issue 29): 100 x 19 runs is plenty


@dataclass
class Plan:
    """What the rows of one table share, and which rows and seeds to run."""

    scale: str = "cpu"
    corpus: str = "gettext"  # a built-in corpus, or a folder of {train,valid}.{src,tgt}
    groups: str | None = None  # rows.select_rows: None = base and (A) .. (E)
    seeds: int = 1
    updates: int | None = None  # the base row's updates (each row: the paper's ratio of steps)
    minutes_per_row: float | None = None  # or a time budget per row (big: 3x)
    dev_pairs: int | None = None  # score the first N dev pairs; None: all of them
    overrides: list[str] = field(default_factory=list)  # more key=value for every row

    def __post_init__(self) -> None:
        if self.scale not in SCALES:
            raise UserError(f"--scale {self.scale!r}: choose one of {', '.join(SCALES)}")
        if self.updates is None and self.minutes_per_row is None:
            self.updates = default_updates(self.scale)
        if self.updates is not None and self.minutes_per_row is not None:
            raise UserError("give --updates or --minutes-per-row, not both")
        if self.updates is not None and self.updates < 1:
            raise UserError(f"--updates {self.updates}: must be a positive integer")
        if self.minutes_per_row is not None and not 0 < self.minutes_per_row < math.inf:
            raise UserError(f"--minutes-per-row {self.minutes_per_row}: must be positive")
        if not 1 <= self.seeds <= MAX_SEEDS:
            raise UserError(f"--seeds {self.seeds}: must be 1 .. {MAX_SEEDS} (each seed trains "
                            "every row once more)")

    def shared(self) -> dict[str, Any]:
        """The settings every row shares, and the corpus by content (its train and valid pairs'
        count and SHA-256: two corpora under one name or path are not one table's)."""
        return {**{k: v for k, v in asdict(self).items() if k in SHARED},
                "corpus_content": corpus_content(self.corpus)}

    @property
    def budget(self) -> str:
        if self.minutes_per_row is not None:
            return f"{self.minutes_per_row:g} minutes per row (big: 3x)"
        return f"{self.updates:,} updates for base (every row: the paper's steps x " \
               f"{self.updates:,} / {BASE['steps']:,})"


def corpus_content(corpus: str) -> dict[str, Any]:
    """The fingerprint of the pairs `corpus` (a built-in name or a folder) gives, train + valid."""
    from aiayn.data.fingerprint import pairs_fingerprint
    from aiayn.tasks.seq2seq import DataConfig, load_pairs

    splits = load_pairs(DataConfig(**data_section(corpus)))
    return pairs_fingerprint({k: v for k, v in splits.items() if k in ("train", "valid")})


def same_setting(key: str, a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two plans agree on `key`. A corpus is the same when its content is (its path may
    differ: a folder moved, or on another machine); a plan written before the corpus was
    identified by content (no corpus_content) agrees on it with any, and compares paths."""
    content = [p.get("corpus_content") for p in (a, b)]
    if key == "corpus_content":
        return None in content or content[0] == content[1]
    if key == "corpus" and None not in content:
        return True  # corpus_content decides
    return a.get(key) == b.get(key)


def default_updates(scale: str) -> int:
    """The base row's updates when neither budget is given: the scale's config's max_steps (at
    "cpu", what trains the default table in about an hour on 2 cores; at "base", §5.2's 100K)."""
    from aiayn.config.experiment import CONFIG_DIR, read_config_file

    return int(read_config_file(CONFIG_DIR / f"{SCALES[scale].config}.yaml")["train"]["max_steps"])


# -- one row -------------------------------------------------------------------------------------

def data_section(corpus: str) -> dict[str, Any]:
    """The data fields of `corpus`: a built-in corpus's name, or a corpus folder."""
    from aiayn.data.corpora import CORPORA

    if corpus in CORPORA:
        return {"corpus": corpus, "corpus_dir": None}
    if Path(corpus).is_dir():
        return {"corpus": None, "corpus_dir": str(corpus)}
    raise UserError(f"--corpus {corpus!r}: neither a built-in corpus ({', '.join(CORPORA)}) nor "
                    "a folder of {train,valid}.{src,tgt} files (aiayn data writes one)")


def row_settings(row: Row, plan: Plan) -> dict[str, Any]:
    return settings(row, plan.scale, plan.updates)


def row_experiment(row: Row, seed: int, plan: Plan, folder: Path):
    """The seq2seq experiment of one row and seed."""
    from aiayn.tasks import seq2seq

    scale = SCALES[plan.scale]
    s = row_settings(row, plan)
    budget = []  # with updates, train.max_steps (model_overrides); else minutes, big 3x
    if plan.minutes_per_row is not None:
        budget = [f"train.max_minutes={plan.minutes_per_row * steps_ratio(row)}"]
    overrides = [*model_overrides(s), f"train.seed={seed}", f"data.vocab_size={scale.vocab_size}",
                 "train.average_width=0", *budget, *plan.overrides]
    return seq2seq.experiment(scale.config, overrides, out=folder,
                                  data=data_section(plan.corpus))


def row_device(plan: Plan) -> str:
    """The rows' train.device, as written: the scale's config under the plan's overrides (no row
    sets it), read without building an experiment; TrainConfig's default where neither sets it.
    check_rows has checked each row's whole experiment (the device available)."""
    from aiayn.config.experiment import CONFIG_DIR, apply_overrides, read_config_file
    from aiayn.config.train import TrainConfig

    path = CONFIG_DIR / f"{SCALES[plan.scale].config}.yaml"
    raw = apply_overrides(read_config_file(path), plan.overrides, str(path))
    train = raw.get("train") if isinstance(raw.get("train"), dict) else {}
    return str(train.get("device", TrainConfig.device))


def check_rows(plan: Plan, rows: list[Row]) -> None:
    """Every row's experiment builds: the plan's overrides over each row's settings are valid
    (a d_model that h=16 does not divide, an unknown key), refused naming the row before
    anything is written, rather than after the rows before it have trained."""
    data_section(plan.corpus)  # a bad --corpus is the command's, not a row's
    for row in rows:
        try:
            row_experiment(row, 0, plan, Path("."))
        except UserError as e:
            raise UserError(f"row {row.name}: {e}") from None


def steps_ratio(row: Row) -> float:
    """The row's steps over base's in the paper (big: 3)."""
    return {**BASE, **row.changes}["steps"] / BASE["steps"]



# -- the plan on disk ----------------------------------------------------------------------------

def read_plan(out: Path) -> dict[str, Any]:
    path = out / PLAN_FILE
    if not path.is_file():
        raise UserError(f"{out}: no {PLAN_FILE}: not a folder `aiayn table3` wrote")
    plan = read_json(path)
    if not isinstance(plan, dict):
        raise UserError(f"{path}: not a table3 plan (a JSON object)")
    return plan


def check_plan(out: Path, plan: Plan, resume: bool) -> dict[str, Any]:
    """A new table needs a new (or empty) folder, or one where nothing was done (nothing_done:
    a start that failed before any row finished or saved a checkpoint); a resumed one the same
    shared settings. Returns the plan's shared settings (reading the corpus, once the folder is
    found fit)."""
    if not resume:
        if out.exists() and folder_contents(out) and not nothing_done(out):
            raise UserError(f"{out} already holds files; pass --resume to continue its table, "
                            "or choose another --out")
        return plan.shared()
    if not (out / PLAN_FILE).is_file():
        if out.exists() and folder_contents(out):
            raise UserError(f"--resume: {out} holds no {PLAN_FILE}: not a table3 folder")
        return plan.shared()
    before = read_plan(out)
    shared = plan.shared()
    for key, value in shared.items():
        if not same_setting(key, before, shared):
            afresh = ("; no row of it has finished or saved a checkpoint: leave out --resume "
                      "to start it afresh with these settings") if nothing_done(out) else ""
            raise UserError(f"--resume: {key}={value!r} differs from the table in {out} "
                            f"({before.get(key)!r}); rows of one table share it{afresh}")
    return shared


def nothing_done(out: Path) -> bool:
    """Whether the table folder `out` holds nothing a new start would lose: its plan, and row
    runs stopped before their first checkpoint (a new run of the row clears them), no result.
    That is what a start that failed before any row finished leaves (a row's bad setting, a
    full disk, Ctrl-C in the first minutes): the corrected command may start there afresh."""
    from aiayn.folder.checkpoint import _never_checkpointed  # what a new run clears

    if {p.name for p in folder_contents(out)} - {PLAN_FILE, "rows", "results"}:
        return False
    results, rows = out / "results", out / "rows"
    if results.exists() and (not results.is_dir() or any(results.iterdir())):
        return False
    if not rows.exists():
        return True
    if not rows.is_dir():
        return False
    runs = [run for row in rows.iterdir() for run in (row.iterdir() if row.is_dir() else [row])]
    return all(run.is_dir() and (not folder_contents(run) or _never_checkpointed(run))
               for run in runs)


__all__ = ["MAX_SEEDS", "PLAN_FILE", "SHARED", "Plan", "check_plan", "check_rows", "corpus_content",
           "data_section", "default_updates", "nothing_done", "read_plan", "row_device",
           "row_experiment", "row_settings", "same_setting", "steps_ratio"]
