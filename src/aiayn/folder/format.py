"""Self-describing model folders: everything needed to resume, translate, generate or export.

    DIR/config.json        {"family": "transformer", "model": {...config fields...}, ...extra}
    DIR/model.safetensors  weights (safetensors: never unpickled)
    DIR/tokenizer.json     the tokenizer, when the family uses one
    DIR/train_state.pt     optimizer / schedule / RNG / data position (training only;
                           loaded with torch.load(weights_only=True))
    DIR/metrics.jsonl      one JSON object per logged step

Every file is written atomically (temporary file in the same folder, then os.replace), so a crash
or Ctrl-C never leaves a half-written file in place of a good one.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from torch import nn

from aiayn.errors import UserError
from aiayn.files import (  # noqa: F401 (the model folder's file helpers, as they were here)
    CONFIG_FILE,
    WEIGHTS_FILE,
    atomic_path,
    atomic_write,
    atomic_write_text,
    model_folder_around,
    refuse_inside_model_folder,
)
from aiayn.lock import LOCK_FILE, FolderBusy, holder, is_locked, writer_lock
from aiayn.sizes import check_fits

TOKENIZER_FILE = "tokenizer.json"
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
    """What a folder holds, without its writer lock file (aiayn.lock), which is not content."""
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
    """Write a fresh model folder `out` in the body, as its one writer (aiayn.lock): checked as
    require_new_folder does, what an interrupted write left is cleared, and INCOMPLETE_MARKER
    stays until the body ends without an error. A body that fails before writing anything
    leaves the folder as it found it (a folder made for it is removed)."""
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


def save_weights(model: nn.Module, path: str | Path) -> None:
    """Weights as safetensors; tied tensors are stored once (safetensors rejects shared storage)."""
    state, seen = {}, {}
    for name, tensor in model.state_dict().items():
        key = (tensor.data_ptr(), tuple(tensor.shape))
        if key in seen:
            continue  # a tied copy (e.g. output projection = target embedding)
        seen[key] = name
        state[name] = tensor.detach().contiguous().cpu()
    atomic_write(path, lambda tmp: save_file(state, str(tmp), metadata={"format": "pt"}))


def load_weights(model: nn.Module, path: str | Path) -> None:
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: weights file not found")
    try:
        state = load_file(str(path))
    except Exception as e:  # safetensors raises its own error types
        raise UserError(f"{path}: not a readable safetensors file ({e})") from None
    expected = model.state_dict()
    wrong = [(n, tuple(t.shape), tuple(expected[n].shape)) for n, t in state.items()
             if n in expected and t.shape != expected[n].shape]
    if wrong:
        name, got, want = wrong[0]
        more = f" (and {len(wrong) - 1} more)" if len(wrong) > 1 else ""
        raise UserError(f"{path}: weights do not match the config: {name} is {got} in the file, "
                        f"{want} by the config{more}")
    missing, unexpected = model.load_state_dict(state, strict=False)
    # Tied parameters were saved once; they are filled through the tie.
    tied = {n for n in missing if _is_tied(model, n, state)}
    missing = [n for n in missing if n not in tied]
    if missing or unexpected:
        raise UserError(f"{path}: weights do not match the config (missing {missing[:3]}, "
                        f"unexpected {unexpected[:3]})")


def _is_tied(model: nn.Module, name: str, state: dict[str, torch.Tensor]) -> bool:
    params = dict(model.named_parameters(remove_duplicate=False))
    if name not in params:
        return False
    ptr = params[name].data_ptr()
    return any(p.data_ptr() == ptr and n in state for n, p in params.items() if n != name)


def save_model(folder: str | Path, family: str, model: nn.Module, extra: dict[str, Any] | None = None) -> Path:
    """Write config.json + model.safetensors for `model` (whose `.config` is a BlockConfig)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    meta = {"family": family, "model": model.config.to_dict(), **(extra or {})}
    save_weights(model, folder / WEIGHTS_FILE)
    atomic_write_text(folder / CONFIG_FILE, json.dumps(meta, indent=2, sort_keys=True) + "\n")
    return folder


def read_json(path: Path) -> Any:
    """The JSON in the file `path`, read within bounds (aiayn.config.files: at most 8 MiB,
    nested at most 100 deep); a UserError naming it where it is not that, JSON or UTF-8."""
    from aiayn.config.files import load_json, read_text

    try:
        return load_json(read_text(path), path)
    except json.JSONDecodeError as e:
        raise UserError(f"{path}: invalid JSON ({e})") from None


def read_meta(folder: str | Path) -> dict[str, Any]:
    folder = Path(folder)
    if not folder.is_dir():
        raise UserError(f"{folder}: model folder not found")
    path = folder / CONFIG_FILE
    if not path.is_file():
        raise UserError(f"{path}: not found (is {folder} a model folder?)")
    meta = read_json(path)
    if not isinstance(meta, dict) or "family" not in meta or "model" not in meta:
        raise UserError(f"{path}: missing key 'family' or 'model'")
    for key in ("model", "experiment"):
        if key in meta and not isinstance(meta[key], dict):
            raise UserError(f"{path}: {key!r} must be an object of settings, found {meta[key]!r}")
    return meta


def folder_family(folder: str | Path, meta: dict[str, Any] | None = None):
    """The family-table entry (aiayn.families) of a model folder; an unknown family is an error."""
    from aiayn.families import FAMILIES

    family = (meta or read_meta(folder))["family"]
    if family not in FAMILIES:
        raise UserError(f"{Path(folder) / CONFIG_FILE}: unknown model family {family!r} "
                        f"(known: {', '.join(sorted(FAMILIES))})")
    return FAMILIES[family]


def load_model(folder: str | Path, device: str | torch.device = "cpu",
               expect: str | None = None,
               checkpoint: int | None = None) -> tuple[nn.Module, dict[str, Any]]:
    """Build the model a folder describes and load its weights. Returns (model in eval mode, meta).

    With `expect` (a family name), a folder of another family is refused before any weights are
    read, with a message naming what was expected (e.g. "not a language model"). With
    `checkpoint`, the weights are those of that numbered checkpoint (a training step).
    """
    from aiayn.families import FAMILIES

    meta = read_meta(folder)
    family = folder_family(folder, meta)
    if expect is not None and family.name != expect:
        raise UserError(f"{folder}: a {family.name!r} model, not {FAMILIES[expect].what}")
    folder = Path(folder)
    try:
        config = family.config.from_dict(meta["model"])
    except ValueError as e:
        raise UserError(f"{folder / CONFIG_FILE}: {e}") from None
    check_fits(config, str(folder / CONFIG_FILE))
    model = family.model(config)
    weights = folder / WEIGHTS_FILE
    if checkpoint is not None:
        weights = checkpoint_path(folder, checkpoint)
        if not weights.is_file():
            steps = [str(s) for s, _ in list_checkpoints(folder)] or ["none"]
            raise UserError(f"{weights}: no checkpoint of step {checkpoint} (saved steps: "
                            f"{', '.join(steps)})")
    load_weights(model, weights)
    return model.to(device).eval(), meta
