"""One start of a run for every task: its folder, its processes, its record, its seed.

    with start_run(exp, resume=False, out=None, say=print) as run:  # before any data is read
        ...                                                         # the task's data and model
        result = Trainer(model, exp.train, batches, loss_fn, run, family=..., meta=...).fit()

What every task's train() gets from here, the same way:
  * one writer: rank 0 holds the folder's writer lock (aiayn.folder.lock) from before the folder is
    checked until the run's last save (the end of the `with`); a second command writing the same
    folder (another train, a --resume, an average into it) is refused in one line naming this
    one, before it touches anything;
  * the output folder: a new run never writes into a folder holding anything but the leftovers of
    a run stopped before its first checkpoint, and a resumed one needs its train state
    (checkpoint.check_out_folder). The folder is created and marked as aiayn's only when the
    first file goes into it (Run.begin_folder), so a run that fails on its data leaves nothing;
  * the processes: under torchrun each joins the process group (distributed.setup); rank 0
    alone speaks (Run.say) and writes;
  * the record: config.json's "experiment" is the experiment as loaded (Experiment.to_dict()
    without `out`, since a folder may move), plus what the task read from outside the config
    (the language model's --text files). The Trainer writes it; every task's has this form;
  * resuming: every part of the record but train.* must be the run's own (check_resume); the
    files it read are compared by content (sizes and SHA-256, record["data_content"]), not by
    the spelling of their paths;
  * the seed: Python, NumPy and torch seeded with train.seed before the task builds its model.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from aiayn.config.experiment import Experiment, require_out
from aiayn.config.train import TrainConfig
from aiayn.data.fingerprint import content_of, describe
from aiayn.errors import UserError
from aiayn.folder.checkpoint import TRAIN_STATE_FILE, check_out_folder, mark_started
from aiayn.folder.families import task_name
from aiayn.folder.files import refuse_inside_model_folder
from aiayn.folder.format import folder_contents, read_meta
from aiayn.folder.lock import writer_lock
from aiayn.training import distributed

CONTENT = "data_content"  # the record's key of the data's fingerprints


@dataclass
class TrainResult:
    """What every task's train() returns: the Trainer's account of the run, and its folder."""

    step: int
    tokens: int
    seconds: float  # training wall time, resumed runs included
    interrupted: bool = False
    # "max_steps", "max_minutes", "saturated" (train.stop_when), "interrupt" (Ctrl-C), "sigterm"
    stopped_by: str = ""
    # The last logged values; a task adds its own figures (the classifiers' "test_accuracy").
    metrics: dict[str, Any] = field(default_factory=dict)
    folder: Path | None = None  # the model folder written
    why: str = ""  # why it stopped, in words: "train.max_steps=20 reached", ...
    # What the task holds in memory at the end, for a caller to score without reading the folder
    # back (table3): its user-facing object over the trained model, whose weights are the
    # folder's (Trainer.fit), and the data it read by split. None where a task sets none.
    trained: Any = None
    splits: dict[str, Any] | None = None

    @property
    def exit_code(self) -> int:
        """What a command should exit with: 0, or 128 + the signal that stopped it (130, 143)."""
        if not self.interrupted:
            return 0
        return 128 + (signal.SIGTERM if self.stopped_by == "sigterm" else signal.SIGINT)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


@dataclass(frozen=True)
class Run:
    """A started run: the folder it writes, this process's place, whether it continues one."""

    folder: Path
    world: distributed.World
    resume: bool = False
    # config.json's "experiment" (None: a Trainer given a bare folder records none)
    record: dict[str, Any] | None = None
    say: Callable[[str], None] = print  # rank 0's messages; silent on the other ranks
    # The folder's writer lock (rank 0 of a started run); closed by the `with` around the run.
    lock: contextlib.ExitStack = field(default_factory=contextlib.ExitStack, compare=False)

    def __enter__(self) -> Run:
        return self

    def __exit__(self, *exc: object) -> None:
        self.lock.close()

    def begin_folder(self) -> bool:
        """Before a new run's first file: create its folder and mark it as aiayn's (rank 0; a
        folder that already holds something is left unmarked). True where this process writes
        the new run's first files (e.g. its tokenizer); False on a resumed run or another rank."""
        if self.resume or not self.world.is_main:
            return False
        if not self.folder.is_dir() or not folder_contents(self.folder):
            mark_started(self.folder)
        return True

    def stage(self, folder: Path, resume: bool) -> Run:
        """The same run writing another folder (the classifier's masked-LM pretraining), inside
        this one's lock (which it does not own)."""
        return replace(self, folder=folder, resume=resume, lock=contextlib.ExitStack())


def folder_run(folder: str | Path, train: TrainConfig) -> Run:
    """The Run of a Trainer given a folder alone (scripts, tests): this process's place among
    torchrun's processes; nothing checked, recorded or seeded."""
    return Run(Path(folder), distributed.setup(train.device))


def start_run(exp: Experiment, resume: bool = False, out: str | Path | None = None,
              say: Callable[[str], None] = print, *, inputs: dict[str, Any] | None = None,
              may_change: Sequence[str] = (), added: dict[str, Any] | None = None,
              stage: str | None = None, world: distributed.World | None = None) -> Run:
    """Start (or resume) `exp` into `out` (else the experiment's folder); see the module's doc.

    `inputs`: what the task reads besides the config, recorded beside it ({"texts": [...]});
    `may_change`: the keys of `inputs` a resumed run may change (the validation files);
    `added`: settings aiayn gained after some folders were written, with the value that means
    what those folders did ({"data.source_eos": False}; see check_resume);
    `stage`: a first stage's subfolder (the classifier's "pretrain"): a resumed run whose folder
    has no train state yet continues that stage's;
    `world`: the processes as a caller that starts many runs joined them, once (table3: once
    per table); None: joined here (distributed.setup)."""
    folder = require_out(exp, out)
    refuse_inside_model_folder(folder)  # another model's checkpoints/ or a folder within one
    world = distributed.setup(exp.train.device) if world is None else world
    record = {k: v for k, v in exp.to_dict().items() if k != "out"}
    record.update(inputs or {})
    record[CONTENT] = content_of(record)  # the data by content, for --resume
    state_in = folder
    if resume and stage and not (folder / TRAIN_STATE_FILE).is_file() \
            and (folder / stage / TRAIN_STATE_FILE).is_file():
        state_in = folder / stage
    lock = contextlib.ExitStack()
    with lock:  # released here only when a check fails; else by the run's `with`
        if world.is_main:
            lock.enter_context(writer_lock(folder))
            check_out_folder(state_in, resume)
        if resume:
            now = {k: v for k, v in record.items() if k != "train" and k not in may_change}
            now[CONTENT] = {k: v for k, v in record[CONTENT].items() if k not in may_change}
            check_resume(state_in, exp, now, added or {})
        seed_everything(exp.train.seed)
        return Run(folder, world, resume, record, say if world.is_main else distributed.silent,
                   lock.pop_all())


def check_resume(folder: Path, exp: Experiment, now: dict[str, Any],
                 added: dict[str, Any]) -> None:
    """A resumed run must have the settings of the run in `folder` for every part of `now`, as
    its config.json's "experiment" records them; only train.* may change.

    `added`: keys that aiayn gained after some folders were written, with the value that means
    what those folders did ({"data.source_eos": False}); a record without the key reads as it.
    Records written before every task recorded the same form have no "task", and those of
    language models and ViTs hold the model config as resolved (with the sizes the data set):
    this run's is resolved with the folder's sizes to compare with them."""
    meta = read_meta(folder)
    before = meta.get("experiment", {})
    if "task" in before:  # a record of the task by its old name ("translation") names it today
        before = {**before, "task": task_name(before["task"])}
    now = dict(now)
    by_content = _check_content(folder, before.get(CONTENT), now.pop(CONTENT, {}), now)
    if "task" not in before:
        now = {k: v for k, v in now.items() if k != "task"}
        if before.get("model") == meta["model"]:
            sizes = {k: v for k, v in meta["model"].items() if k in exp.task.set_by_data}
            now["model"] = exp.model_config(**sizes).to_dict()
    for section, new in now.items():
        old = before.get(section)
        if isinstance(new, dict) and isinstance(old, dict):
            for key in sorted(set(old) | set(new)):
                was = old[key] if key in old else added.get(f"{section}.{key}")
                if f"{section}.{key}" not in by_content and not _same(was, new.get(key)):
                    raise UserError(f"--resume: {section}.{key}={new.get(key)!r} differs from the "
                                    f"run in {folder} ({was!r}); only train.* may change")
        elif section not in by_content and not _same(old, new):
            raise UserError(f"--resume: the {section} settings differ from the run in {folder} "
                            f"({old!r}, now {new!r}); only train.* may change")


def _check_content(folder: Path, before: dict | None, now: dict[str, Any],
                   settings: dict[str, Any]) -> set[str]:
    """The data a run read, compared by content (aiayn.data.fingerprint) where its record holds
    it: the same files moved or spelled otherwise resume; changed files are refused. Returns the
    keys so compared, whose paths need not match. A record from before (none) compares paths."""
    if not isinstance(before, dict):
        return set()
    for key in sorted(set(before) | set(now)):
        if before.get(key) != now.get(key):
            section, _, name = key.rpartition(".")
            path = (settings.get(section) or {}).get(name) if section else settings.get(key)
            raise UserError(f"--resume: {key}={path!r} is not the data the run in {folder} "
                            f"trained on ({describe(before.get(key))}; now "
                            f"{describe(now.get(key))}); only train.* may change")
    return set(before)


def _same(was: Any, new: Any) -> bool:
    """Equal settings; two spellings of one existing path (`a/../b` and `b`) are equal too."""
    if was == new:
        return True
    try:
        return isinstance(was, str) and isinstance(new, str) and os.path.samefile(was, new)
    except OSError:
        return False


__all__ = ["Run", "TrainResult", "check_resume", "folder_run", "seed_everything", "start_run"]
