"""Sub-commands of this family (registered by aiayn.cli.main)."""

from __future__ import annotations


def register(sub) -> None:
    """Add this module's sub-commands to the `aiayn` parser (none yet)."""
