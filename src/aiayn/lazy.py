"""Names a package imports on first use (PEP 562), so that importing it (and the command line's
parser) loads neither torch nor matplotlib until a name that needs them is asked for.

    __getattr__, __dir__ = lazy_names(__name__, {"Inspector": "aiayn.viz.inspect"}, globals())
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_names(package: str, exports: dict[str, str], namespace: dict[str, Any]
               ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A package's module-level __getattr__ and __dir__ for `exports` ({name: module})."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value  # found at once from now on
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *exports})

    return __getattr__, __dir__


__all__ = ["lazy_names"]
