"""Opening a model folder by its family: the family-table entry its config.json names
(aiayn.folder.families), the model built from its config and filled with its weights, and
`aiayn.load(DIR)`, the object that uses it (a translation model loads as a Translator, a
language model as a LanguageModel, ...). Task modules are imported only when a folder of theirs
is opened.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import torch
from torch import nn

from aiayn.errors import UserError
from aiayn.folder.families import FAMILIES, SEQ2SEQ, Family
from aiayn.folder.files import CONFIG_FILE, WEIGHTS_FILE
from aiayn.folder.format import ENSEMBLE_FILE, checkpoint_path, list_checkpoints, read_meta
from aiayn.folder.weights import load_weights
from aiayn.sizes import check_fits


def folder_family(folder: str | Path, meta: dict[str, Any] | None = None) -> Family:
    """The family-table entry (aiayn.folder.families) of a model folder; an unknown family is an
    error."""
    family = (meta or read_meta(folder))["family"]
    if family not in FAMILIES:
        raise UserError(f"{Path(folder) / CONFIG_FILE}: unknown model family {family!r} "
                        f"(known: {', '.join(sorted(FAMILIES))})")
    return FAMILIES[family]


def load_config(folder: str | Path, expect: str | None = None,
                checkpoint: int | None = None) -> tuple[Any, dict[str, Any], Path]:
    """(model config, meta, weights file) of a folder: what load_model reads before it builds
    the model, for an engine that runs without it (CTranslate2). With `expect` (a family name),
    a folder of another family is refused with a message naming what was expected (e.g. "not a
    language model"); with `checkpoint`, the weights file is that numbered checkpoint's."""
    meta = read_meta(folder)
    family = folder_family(folder, meta)
    if expect is not None and family.name != expect:
        raise UserError(f"{folder}: a {family.name!r} model, not {FAMILIES[expect].what}")
    folder = Path(folder)
    try:
        config = family.config.from_dict(meta["model"])
    except ValueError as e:
        raise UserError(f"{folder / CONFIG_FILE}: {e}") from None
    weights = folder / WEIGHTS_FILE
    if checkpoint is not None:
        weights = checkpoint_path(folder, checkpoint)
        if not weights.is_file():
            steps = [str(s) for s, _ in list_checkpoints(folder)] or ["none"]
            raise UserError(f"{weights}: no checkpoint of step {checkpoint} (saved steps: "
                            f"{', '.join(steps)})")
    return config, meta, weights


def load_model(folder: str | Path, device: str | torch.device = "cpu",
               expect: str | None = None,
               checkpoint: int | None = None) -> tuple[nn.Module, dict[str, Any]]:
    """Build the model a folder describes and load its weights. Returns (model in eval mode, meta).
    `expect` and `checkpoint` as load_config takes them; the model's size is checked against
    the memory before it is built."""
    config, meta, weights = load_config(folder, expect, checkpoint)
    check_fits(config, str(Path(folder) / CONFIG_FILE))
    model = folder_family(folder, meta).model(config)
    load_weights(model, weights)
    return model.to(device).eval(), meta


def load(folder: str | Path, device: str = "cpu") -> Any:
    """The object for the model folder `folder` (e.g. a Translator with .translate()); a folder
    of an ensemble (ensemble.json) gives the Translator that decodes its models as one."""
    ensemble = (Path(folder) / ENSEMBLE_FILE).is_file()  # of translation models
    family = FAMILIES[SEQ2SEQ] if ensemble else folder_family(folder)
    task = importlib.import_module(f"aiayn.tasks.{family.task}")
    return getattr(task, family.object).load(folder, device=device)


__all__ = ["folder_family", "load", "load_config", "load_model"]
