"""Moved to aiayn.folder.families (the family table); kept as an alias until every import names the
new path."""

from __future__ import annotations

from aiayn.folder.families import (
    ENCODER,
    FAMILIES,
    LANGUAGE_MODEL,
    TRANSLATION,
    VIT,
    Family,
    task_family,
)

__all__ = ["ENCODER", "FAMILIES", "Family", "LANGUAGE_MODEL", "TRANSLATION", "VIT", "task_family"]
