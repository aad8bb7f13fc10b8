"""What the encoder-only converters (hf_bert.py, hf_vit.py) share: a checkpoint's parameter names
mapped one by one to aiayn's, and the typed config of a config.json checked before the model is
made."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from torch import Tensor

from aiayn.errors import UserError
from aiayn.sizes import check_fits


def renamed_state(named: Iterable[tuple[str, Tensor]], map_name: Callable[[str], str | None],
                  ignored: tuple[str, ...], what: str, model: str,
                  layout: Callable[[str, Tensor], Tensor] | None = None) -> dict[str, Tensor]:
    """aiayn's state dict of a `what` checkpoint's (name, tensor) pairs: each name through
    map_name (names starting with one of `ignored` left out), each tensor through
    layout(aiayn name, tensor) where given, then copied; a UserError naming the first names
    that have no counterpart in the aiayn `model`."""
    out: dict[str, Tensor] = {}
    unknown = []
    for name, tensor in named:
        if name.startswith(ignored):
            continue
        ours = map_name(name)
        if ours is None:
            unknown.append(name)
        else:
            out[ours] = (tensor if layout is None else layout(ours, tensor)).detach().clone()
    if unknown:
        raise UserError(f"{what} checkpoint has parameters with no {model} counterpart: "
                        f"{unknown[:3]}")
    return out


def checked_config(config_from_hf: Callable[[dict[str, Any], dict[str, Tensor]], Any],
                   hf_config: dict[str, Any], state: dict[str, Tensor], config_path: Path) -> Any:
    """config_from_hf(hf_config, state), a ValueError of the typed config as a UserError naming
    config.json, checked to fit in memory before any tensor of the model is made."""
    try:
        config = config_from_hf(hf_config, state)
    except ValueError as e:
        raise UserError(f"{config_path}: {e}") from None
    check_fits(config, str(config_path))
    return config


__all__ = ["checked_config", "renamed_state"]
