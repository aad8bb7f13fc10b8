"""Moved to aiayn.folder.files (atomic writes, refuse-inside-folder); kept as an alias until every
import names the new path. Torch-free, as the module it names."""

from __future__ import annotations

from aiayn.folder.files import (
    CONFIG_FILE,
    WEIGHTS_FILE,
    atomic_path,
    atomic_write,
    atomic_write_text,
    model_folder_around,
    refuse_inside_model_folder,
)

__all__ = ["CONFIG_FILE", "WEIGHTS_FILE", "atomic_path", "atomic_write", "atomic_write_text",
           "model_folder_around", "refuse_inside_model_folder"]
