"""What a model folder holds, and where: its files, its numbered checkpoints, its config.json
("meta"), and how a fresh folder is written (new_folder). Torch-free: the weights are read and
written by aiayn.folder.weights, the model built by aiayn.folder.load.

    DIR/config.json        {"family": "transformer", "model": {...config fields...}, ...extra}
    DIR/model.safetensors  weights (safetensors: never unpickled)
    DIR/tokenizer.json     the tokenizer, when the family uses one
    DIR/checkpoints/       numbered weights: checkpoints/step_00001000.safetensors
    DIR/train_state.pt     optimizer / schedule / RNG / data position (training only;
                           loaded with torch.load(weights_only=True); aiayn.folder.checkpoint)
    DIR/metrics.jsonl      one JSON object per logged step

Every file is written atomically (aiayn.folder.files: temporary file in the same folder, then
os.replace), so a crash or Ctrl-C never leaves a half-written file in place of a good one.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from aiayn.errors import UserError
from aiayn.folder.files import CONFIG_FILE, refuse_inside_model_folder
from aiayn.folder.lock import LOCK_FILE, FolderBusy, holder, is_locked, writer_lock

TOKENIZER_FILE = "tokenizer.json"
# An ensemble's folder (`aiayn train auto`): {"members": [its models' folders, relative], ...}
ENSEMBLE_FILE = "ensemble.json"
EXAMPLE_CHARS = 200  # config.json's "example": an input from the training data, for the explorer
CHECKPOINT_DIR = "checkpoints"  # numbered weights: checkpoints/step_00001000.safetensors
_STEP_RE = re.compile(r"^step_(\d+)\.safetensors$")


def remove_stale_tmp(folder: str | Path) -> list[Path]:
    """Delete the temporary files a killed writer left (".NAME.XXXX.tmp", in the folder and its
    checkpoints/). Only for the folder's own writer (a resumed run), never while another
    process may be writing there."""
    folder = Path(folder)
    stale = [p for d in (folder, folder / CHECKPOINT_DIR) if d.is_dir()
             for p in d.glob(".*.tmp") if p.is_file() and not p.is_symlink()]
    for p in stale:
        p.unlink(missing_ok=True)
    return stale


def folder_contents(folder: str | Path) -> list[Path]:
    """What a folder holds, without its writer lock file (aiayn.folder.lock), which is not
    content."""
    return [p for p in Path(folder).iterdir() if p.name != LOCK_FILE]


# What a command writing a fresh folder (average, export, import) puts there first and removes
# last: a folder holding it was left by such a command interrupted (Ctrl-C, SIGKILL, a full
# disk), and the same command run again clears it and writes it anew.
INCOMPLETE_MARKER = ".aiayn-incomplete"


def _left_unfinished(out: Path) -> bool:
    """Whether `out` holds only what an interrupted fresh-folder write leaves: the marker (with
    whatever was written after it), or nothing but temporary files (written before the marker
    existed)."""
    names = {p.name for p in folder_contents(out)}
    return INCOMPLETE_MARKER in names or all(n.startswith(".") and n.endswith(".tmp")
                                             for n in names)


def _check_new(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise UserError(f"{out}: exists and is not a folder; choose a new --out folder")
    refuse_inside_model_folder(out)
    if out.is_dir() and folder_contents(out) and not _left_unfinished(out):
        raise UserError(f"{out}: already exists and is not empty; choose a new --out folder")


def require_new_folder(out: str | Path) -> Path:
    """`out` as a Path, after checking that a fresh folder may be written there: it is new, empty
    or left unfinished by an interrupted average / export / import, and no other process is
    writing it (a UserError otherwise). Touches nothing: a command checks this before its slow
    work, and writes under new_folder(), which checks again holding the folder's lock."""
    out = Path(out)
    if out.is_dir() and is_locked(out):
        raise FolderBusy(f"{out} is being written by {holder(out) or 'another process'}; wait "
                         "for it or choose another --out")
    _check_new(out)
    return out


@contextlib.contextmanager
def new_folder(out: str | Path) -> Iterator[Path]:
    """Write a fresh model folder `out` in the body, as its one writer (aiayn.folder.lock):
    checked as require_new_folder does, what an interrupted write left is cleared, and
    INCOMPLETE_MARKER stays until the body ends without an error. A body that fails before
    writing anything leaves the folder as it found it (a folder made for it is removed)."""
    with writer_lock(out) as out:
        _check_new(out)
        for item in folder_contents(out):
            shutil.rmtree(item) if item.is_dir() and not item.is_symlink() else item.unlink()
        marker = out / INCOMPLETE_MARKER
        marker.touch()
        try:
            yield out
        except BaseException:
            if {p.name for p in folder_contents(out)} == {INCOMPLETE_MARKER}:
                marker.unlink()
            raise
        marker.unlink()


def checkpoint_path(folder: str | Path, step: int) -> Path:
    return Path(folder) / CHECKPOINT_DIR / f"step_{step:08d}.safetensors"


def list_checkpoints(folder: str | Path) -> list[tuple[int, Path]]:
    """(step, path) of the numbered checkpoints in `folder`, oldest first."""
    ckpt_dir = Path(folder) / CHECKPOINT_DIR
    if not ckpt_dir.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in ckpt_dir.iterdir() if (m := _STEP_RE.match(p.name))]
    return sorted(found)


def read_json(path: Path) -> Any:
    """The JSON in the file `path`, read within bounds (aiayn.config.files: at most 8 MiB,
    nested at most 100 deep); a UserError naming it where it is not that, JSON or UTF-8."""
    from aiayn.config.files import load_json, read_text

    try:
        return load_json(read_text(path), path)
    except json.JSONDecodeError as e:
        raise UserError(f"{path}: invalid JSON ({e})") from None


def _first_member(folder: Path) -> str:
    """The first model folder an ensemble.json lists ("member-1" where it cannot be read)."""
    try:
        members = read_json(folder / ENSEMBLE_FILE)["members"]
        return str(members[0]) if members and isinstance(members[0], str) else "member-1"
    except (UserError, OSError, KeyError, TypeError, IndexError):
        return "member-1"


def read_meta(folder: str | Path) -> dict[str, Any]:
    folder = Path(folder)
    if not folder.is_dir():
        raise UserError(f"{folder}: model folder not found")
    path = folder / CONFIG_FILE
    if not path.is_file() and (folder / ENSEMBLE_FILE).is_file():  # `aiayn train auto`'s
        raise UserError(f"{folder} holds an ensemble ({ENSEMBLE_FILE}), not one model: `aiayn "
                        "translate` and `aiayn eval` decode it as one; for one of its models give "
                        f"{folder / _first_member(folder)}")
    if not path.is_file():
        raise UserError(f"{path}: not found (is {folder} a model folder?)")
    meta = read_json(path)
    if not isinstance(meta, dict) or "family" not in meta or "model" not in meta:
        raise UserError(f"{path}: missing key 'family' or 'model'")
    for key in ("model", "experiment"):
        if key in meta and not isinstance(meta[key], dict):
            raise UserError(f"{path}: {key!r} must be an object of settings, found {meta[key]!r}")
    return meta


__all__ = ["CHECKPOINT_DIR", "EXAMPLE_CHARS", "INCOMPLETE_MARKER", "TOKENIZER_FILE",
           "checkpoint_path", "folder_contents", "list_checkpoints", "new_folder", "read_json",
           "read_meta", "remove_stale_tmp", "require_new_folder"]
