"""Training state and numbered checkpoints inside a model folder; checkpoint averaging (§6.1).

    DIR/checkpoints/step_00001000.safetensors   weights after update 1000 (kept: the last N)
    DIR/train_state.pt                          optimizer, step, RNG states, data position, and
                                                the name of the checkpoint they belong to

Write order makes every moment consistent: the numbered weights first, then model.safetensors, then
train_state.pt, each atomically. A resume reads train_state.pt and the checkpoint it names, so a
crash between two writes resumes from the previous complete checkpoint.
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from aiayn.errors import ConfigError, UserError
from aiayn.folder.files import CONFIG_FILE, WEIGHTS_FILE, atomic_write, atomic_write_text
from aiayn.folder.format import (
    CHECKPOINT_DIR,
    TOKENIZER_FILE,
    folder_contents,
    list_checkpoints,
    new_folder,
    read_meta,
    remove_stale_tmp,
    require_new_folder,
)

TRAIN_STATE_FILE = "train_state.pt"
# What an averaged folder takes from the run besides its new config.json and weights.
COPIED_BY_AVERAGE = (TOKENIZER_FILE,)


def save_checkpoint_weights(state: dict[str, torch.Tensor], path: Path, step: int) -> None:
    atomic_write(path, lambda tmp: save_file(state, str(tmp), metadata={"format": "pt", "step": str(step)}))


def prune_checkpoints(folder: str | Path, keep: int, protect: Path | None = None) -> None:
    """Delete all but the newest `keep` numbered checkpoints (never `protect`)."""
    for _, path in list_checkpoints(folder)[:-keep]:
        if protect is None or path.resolve() != protect.resolve():
            path.unlink(missing_ok=True)


# What a run leaves before its first checkpoint: nothing worth keeping, nothing to resume. The
# marker says that aiayn started a run there (so a user's own files are never taken for these).
_BEFORE_FIRST_CHECKPOINT = {"tokenizer.json", "metrics.jsonl", "metrics.csv", "tb"}
STARTED_MARKER = ".aiayn-run"


def _never_checkpointed(out: Path) -> bool:
    names = {p.name for p in out.iterdir() if not p.name.startswith(".")}
    return (out / STARTED_MARKER).is_file() and names <= _BEFORE_FIRST_CHECKPOINT


def check_out_folder(out: Path, resume: bool) -> None:
    """A new run never writes into an existing folder, except one left by a run stopped before
    its first checkpoint (its leftovers are removed); a resumed one needs its train state.
    Called by the folder's one writer, holding its lock (aiayn.folder.lock): the lock file is
    not content, and nothing here is removed while another process may be writing."""
    if resume:
        if out.is_dir() and not (out / TRAIN_STATE_FILE).is_file() and _never_checkpointed(out):
            raise UserError(f"{out}: the run there stopped before its first checkpoint; nothing "
                            "to resume: start it again without --resume")
        read_meta(out)
        if not (out / TRAIN_STATE_FILE).is_file():
            raise UserError(f"{out / TRAIN_STATE_FILE}: not found: nothing to resume")
        remove_stale_tmp(out)  # left by a run killed mid-save
    elif out.exists() and (not out.is_dir() or folder_contents(out)):
        if not (out.is_dir() and _never_checkpointed(out)):
            what = "holds a model" if (out / CONFIG_FILE).exists() else "is not empty"
            raise UserError(f"{out}: already exists and {what}; continue it with --resume or "
                            "choose another out folder")
        for item in folder_contents(out):
            shutil.rmtree(item) if item.is_dir() else item.unlink()
    elif not out.exists():
        _probe_creatable(out)


def _probe_creatable(out: Path) -> None:
    """Create `out` (and missing parents) and remove them again, so that an impossible folder
    (under a file, on a read-only filesystem, in /proc) fails now, before any data is read; the
    OSError is turned into one line by the command line."""
    created = []
    try:
        for folder in [*reversed(out.parents), out]:
            if not folder.exists():
                folder.mkdir()
                created.append(folder)
    finally:
        for folder in reversed(created):
            folder.rmdir()


def mark_started(out: Path) -> None:
    """Create the folder of a new run and mark it as aiayn's (before its first file is written)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / STARTED_MARKER).touch()


# -- RNG state: torch, numpy and Python, as plain tensors / lists (loadable with weights_only) --

def rng_state() -> dict[str, Any]:
    name, keys, pos, has_gauss, cached = np.random.get_state(legacy=True)
    version, py_state, gauss = random.getstate()
    state = {
        "torch": torch.get_rng_state(),
        "numpy": [name, torch.from_numpy(keys.astype(np.int64)), pos, has_gauss, cached],
        "python": [version, list(py_state), gauss],
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    name, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((name, keys.numpy().astype(np.uint32), pos, has_gauss, cached))
    version, py_state, gauss = state["python"]
    random.setstate((version, tuple(py_state), gauss))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_train_state(folder: str | Path, state: dict[str, Any]) -> None:
    atomic_write(Path(folder) / TRAIN_STATE_FILE, lambda tmp: torch.save(state, tmp))


def load_train_state(folder: str | Path) -> dict[str, Any]:
    path = Path(folder) / TRAIN_STATE_FILE
    if not path.is_file():
        raise UserError(f"{path}: not found: nothing to resume (train without --resume first)")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # unpickling errors come in many types
        raise UserError(f"{path}: unreadable train state ({type(e).__name__}: {e})") from None
    if not isinstance(state, dict) or not isinstance(state.get("step"), int):
        raise UserError(f"{path}: not a train state (no step)")
    weights = state.get("weights")
    if weights is not None:  # a path inside the folder, never one that leaves it
        inside = Path(folder).resolve()
        target = (inside / str(weights)).resolve()
        if not target.is_relative_to(inside):
            raise UserError(f"{path}: names weights outside the folder ({weights!r})")
    return state


# -- averaging (§6.1) ------------------------------------------------------------------------

def average_state_dicts(states: list[dict[str, torch.Tensor]],
                        names: list[str] | None = None) -> dict[str, torch.Tensor]:
    """Element-wise mean of floating tensors (accumulated in float64); others from the last.

    Every state must hold the same tensors in the same shapes; the first that differs is named
    in a UserError, with the two states (`names`, e.g. "step 500") and their shapes."""
    if not states:
        raise UserError("no checkpoints to average")
    names = names or [f"state {i + 1}" for i in range(len(states))]
    first = states[0]
    for name, s in zip(names[1:], states[1:], strict=True):
        for key in [*first, *(k for k in s if k not in first)]:
            if key not in s or key not in first:
                has, lacks = (names[0], name) if key in first else (name, names[0])
                raise UserError(f"checkpoints to average hold different tensors: {key} is in "
                                f"{has} but not in {lacks}")
            if first[key].shape != s[key].shape:
                raise UserError(f"checkpoints to average hold different tensors: {key} is "
                                f"{tuple(first[key].shape)} in {names[0]} but "
                                f"{tuple(s[key].shape)} in {name}")
    out = {}
    for key, last in states[-1].items():
        if last.is_floating_point():
            total = sum(s[key].double() for s in states)
            out[key] = (total / len(states)).to(last.dtype)
        else:
            out[key] = last.clone()
    return out


# §6.1 averages the last 5 checkpoints "written at 10-minute intervals" of a 100k-step (12-hour)
# run: the last ~7% of it. Averaging a stretch that reaches back into the steep early part of
# training mixes in much worse weights (it cost 5 BLEU on a 1,153-step run averaged from 500 on).
MAX_AVERAGED_SPAN = 0.25


def averaging_warning(steps: list[int], final_step: int) -> str | None:
    """A warning when the checkpoints to average span more than MAX_AVERAGED_SPAN of the run."""
    if len(steps) < 2 or final_step <= 0:
        return None
    span = (steps[-1] - steps[0]) / final_step
    if span <= MAX_AVERAGED_SPAN:
        return None
    return (f"the checkpoints averaged (steps {steps[0]}..{steps[-1]}) span {span:.0%} of the "
            f"{final_step}-step run; §6.1 averages checkpoints close together at the end (save "
            "more often, e.g. train.save_every, or average fewer with --last)")


def running_average_note(meta: dict[str, Any]) -> str | None:
    """A note when the folder's run kept a running average (train.average_width): each of its
    checkpoints already holds one, and averaging several of them widens that window."""
    experiment = meta.get("experiment")
    train = experiment.get("train") if isinstance(experiment, dict) else None
    width = train.get("average_width") if isinstance(train, dict) else None
    if not isinstance(width, (int, float)) or not width:
        return None
    return (f"each checkpoint already holds the run's running average of the weights "
            f"(train.average_width={width}); averaging them widens that window")


def average_checkpoints(folder: str | Path, last: int, out: str | Path,
                        allow_fewer: bool = False) -> list[int]:
    """§6.1: average the weights of the last `last` numbered checkpoints of `folder` into a new
    model folder `out` (config and tokenizer copied, no training state). Returns the steps used.
    Fewer checkpoints than `last` is an error unless `allow_fewer`."""
    folder, out = Path(folder), Path(out)
    read_meta(folder)  # a readable model folder, or a one-line error
    found = list_checkpoints(folder)
    if not found:
        raise UserError(f"{folder / CHECKPOINT_DIR}: no numbered checkpoints to average")
    if last <= 0:
        raise ConfigError(f"last={last}: must be a positive integer")
    if len(found) < last and not allow_fewer:
        raise UserError(f"{folder / CHECKPOINT_DIR}: only {len(found)} checkpoints (steps "
                        f"{', '.join(str(s) for s, _ in found)}) for --last {last}; average "
                        f"them with --last {len(found)} (or --allow-fewer)")
    require_new_folder(out)
    chosen = found[-last:]
    states = []
    for _, path in chosen:
        try:
            states.append(load_file(str(path)))
        except Exception as e:
            raise UserError(f"{path}: not a readable safetensors file ({e})") from None
    try:
        averaged = average_state_dicts(states, [f"step {step}" for step, _ in chosen])
    except UserError as e:
        raise UserError(f"{folder / CHECKPOINT_DIR}: {e}") from None
    with new_folder(out):
        # Only the files a model needs besides config and weights, and never through a symlink.
        for name in COPIED_BY_AVERAGE:
            item = folder / name
            if item.is_file() and not item.is_symlink():
                shutil.copyfile(item, out / name)
        steps = [s for s, _ in chosen]
        atomic_write(out / WEIGHTS_FILE, lambda tmp: save_file(
            averaged, str(tmp), metadata={"format": "pt", "averaged_steps": ",".join(map(str, steps))}))
        meta = read_meta(folder)
        meta["averaged_steps"] = steps
        atomic_write_text(out / CONFIG_FILE, json.dumps(meta, indent=2, sort_keys=True) + "\n")
    return steps


__all__ = ["COPIED_BY_AVERAGE", "MAX_AVERAGED_SPAN", "STARTED_MARKER", "TRAIN_STATE_FILE",
           "average_checkpoints", "average_state_dicts", "averaging_warning", "check_out_folder",
           "load_train_state", "mark_started", "prune_checkpoints", "rng_state",
           "running_average_note", "save_checkpoint_weights", "save_train_state",
           "set_rng_state"]
