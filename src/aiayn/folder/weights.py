"""A model's weights in its folder, as safetensors (never unpickled): written with tied tensors
stored once, read back against the model the config builds, with a one-line error naming the
first tensor that does not fit.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from torch import nn

from aiayn.errors import UserError
from aiayn.folder.files import CONFIG_FILE, WEIGHTS_FILE, atomic_write, atomic_write_text


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



__all__ = ["load_weights", "save_model", "save_weights"]
