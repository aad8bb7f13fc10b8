"""Converters from other libraries' checkpoints to aiayn models. Foreign parameter names
(``c_attn``, ``query``, ...) live only in these modules, which map them to aiayn's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from torch import Tensor

from aiayn.errors import UserError

# transformers' activation names (ACT2FN) -> aiayn's (nn/feedforward.py), and back
FROM_HF_ACTIVATION = {"relu": "relu", "gelu": "gelu", "gelu_new": "gelu_tanh",
                      "gelu_pytorch_tanh": "gelu_tanh", "silu": "silu", "swish": "silu"}
TO_HF_ACTIVATION = {"relu": "relu", "gelu": "gelu", "gelu_tanh": "gelu_new", "silu": "silu"}


def activation_from_hf(name: Any, what: str) -> str:
    """aiayn's activation for transformers' `name`; a UserError naming `what` (the config key)."""
    if name not in FROM_HF_ACTIVATION:
        raise UserError(f"{what}={name!r} is not supported (known: "
                        f"{', '.join(FROM_HF_ACTIVATION)})")
    return FROM_HF_ACTIVATION[name]


def read_hf_folder(folder: str | Path, what: str) -> tuple[dict[str, Any], dict[str, Tensor], Path]:
    """A local checkpoint folder (config.json + model.safetensors) -> (config dict, state, config path).

    Reads safetensors only (never a pickle); every problem is a one-line UserError naming the file.
    `what` names the expected kind of checkpoint in messages ("BERT", "ViT", "GPT-2").
    """
    from safetensors.torch import load_file

    folder = Path(folder)
    if not folder.is_dir():
        raise UserError(f"{folder}: folder not found")
    config_path, weights_path = folder / "config.json", folder / "model.safetensors"
    if not weights_path.is_file() and (folder / "pytorch_model.bin").is_file():
        raise UserError(f"{folder}: only pytorch_model.bin (a pickle) is there; aiayn reads "
                        "safetensors only (convert it with transformers' save_pretrained first)")
    for path in (config_path, weights_path):
        if not path.is_file():
            raise UserError(f"{path}: not found (is {folder} a {what} checkpoint folder?)")
    try:
        hf_config = json.loads(config_path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise UserError(f"{config_path}: invalid JSON ({e})") from None
    if not isinstance(hf_config, dict):
        raise UserError(f"{config_path}: expected a JSON object")
    try:
        state = load_file(str(weights_path))
    except Exception as e:  # safetensors raises its own error types
        raise UserError(f"{weights_path}: not a readable safetensors file ({e})") from None
    return hf_config, state, config_path
