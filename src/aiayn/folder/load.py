"""`aiayn.load(DIR)`: open any model folder as the object that uses it.

The folder's config.json names its family; the family table (aiayn.families) says which task
module holds that family's object (a translation model loads as a Translator, a language model as
a LanguageModel, ...). Task modules are imported only when a folder of theirs is opened.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from aiayn.folder import folder_family


def load(folder: str | Path, device: str = "cpu") -> Any:
    """The object for the model folder `folder` (e.g. a Translator with .translate())."""
    family = folder_family(folder)
    task = importlib.import_module(f"aiayn.tasks.{family.task}")
    return getattr(task, family.object).load(folder, device=device)


__all__ = ["load"]
