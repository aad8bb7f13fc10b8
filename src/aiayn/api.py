"""Moved to aiayn.folder.load (`aiayn.load(DIR)`); kept as an alias until every import names the
new path."""

from __future__ import annotations

from aiayn.folder.load import (
    load,
)

__all__ = ["load"]
