"""Moved to aiayn.folder.lock (one writer per model folder); kept as an alias until every import
names the new path."""

from __future__ import annotations

from aiayn.folder.lock import (
    LOCK_FILE,
    FolderBusy,
    holder,
    is_locked,
    writer_lock,
)

__all__ = ["FolderBusy", "LOCK_FILE", "holder", "is_locked", "writer_lock"]
