"""The machinery every typed config shares (aiayn.config.models, aiayn.config.train, each task's
data config, aiayn.generation.config): field type checks, unknown-key rejection with a
suggestion, named presets, and JSON round-trips.

Every check lives in ``__post_init__`` and raises ``ValueError`` naming the field and the value, so a
bad config fails where it is written, not three layers deep in a matmul.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import math
import typing
from dataclasses import fields
from pathlib import Path
from typing import Any, TypeVar

from aiayn.config.files import load_json, read_text
from aiayn.errors import ConfigError, UserError

C = TypeVar("C", bound="Config")


def did_you_mean(name: str, choices: typing.Iterable[str]) -> str:
    """' (did you mean 'warmup_steps'?)' for a near miss among `choices`, else ''. Options
    (--beam) are compared without their dashes, which every option shares."""
    bare = {c.lstrip("-"): c for c in choices}
    close = difflib.get_close_matches(name.lstrip("-"), list(bare), n=1, cutoff=0.6)
    return f" (did you mean {bare[close[0]]!r}?)" if close else ""


def _fail(field: str, value: Any, why: str) -> typing.NoReturn:
    raise ConfigError(f"invalid config: {field}={value!r}: {why}")


class Config:
    """Shared by every typed config: field type checks, unknown-key rejection, JSON round-trips.

    Subclasses are @dataclass classes whose __post_init__ calls `self._check_types()` first.
    """

    def _check_types(self) -> None:
        hints = typing.get_type_hints(type(self))
        for f in fields(self):
            value = getattr(self, f.name)
            hint = hints[f.name]
            allowed = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, _UnionType) else (hint,)
            if value is None and type(None) in allowed:
                continue
            if float in allowed and isinstance(value, int) and not isinstance(value, bool):
                setattr(self, f.name, float(value))
                continue
            if not any(_isinstance(value, t) for t in allowed if t is not type(None)):
                names = " or ".join(getattr(t, "__name__", str(t)) for t in allowed)
                _fail(f.name, value, f"must be {names}")
            if isinstance(value, float) and not math.isfinite(value):  # nan / inf: never useful
                _fail(f.name, value, "must be a finite number")

    # -- presets and serialisation -----------------------------------------------------------

    # Named presets of a config class (data: name -> field overrides), set after each class.
    PRESETS: typing.ClassVar[dict[str, dict[str, Any]]] = {}

    @classmethod
    def preset(cls: type[C], name: str, **overrides: Any) -> C:
        """The named preset (e.g. `TransformerConfig.preset("base")`) with field overrides."""
        if name not in cls.PRESETS:
            _fail("preset", name, f"unknown preset for {cls.__name__}; choose one of "
                  f"{', '.join(cls.PRESETS) or '(none)'}")
        return cls.from_dict({**cls.PRESETS[name], **overrides})

    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in fields(cls)]

    @classmethod
    def from_dict(cls: type[C], data: dict[str, Any]) -> C:
        unknown = sorted(set(data) - set(cls.field_names()))
        if unknown:
            _fail(unknown[0], data[unknown[0]], f"unknown field for {cls.__name__}"
                  + did_you_mean(unknown[0], cls.field_names()))
        return cls(**data)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_json(cls: type[C], text: str, where: str | Path | None = None) -> C:
        """The config in a JSON text (read within aiayn.config.files' bounds; `where` names it
        in errors)."""
        try:
            data = load_json(text, where or f"{cls.__name__} JSON")
        except UserError as e:  # a ValueError, as every config error of the Python API
            raise ConfigError(str(e)) from None
        if not isinstance(data, dict):
            _fail(cls.__name__, data, "expected a JSON object of fields")
        return cls.from_dict(data)

    def save(self, path: str | Path) -> None:
        Path(path).write_text(self.to_json() + "\n", encoding="utf-8")

    @classmethod
    def load(cls: type[C], path: str | Path) -> C:
        return cls.from_json(read_text(path), path)

    def replace(self: C, **changes: Any) -> C:
        return self.from_dict({**self.to_dict(), **changes})


try:  # Python 3.10+: `int | None` is a types.UnionType, not typing.Union
    from types import UnionType as _UnionType
except ImportError:  # pragma: no cover
    _UnionType = typing.Union  # type: ignore[misc,assignment]


def _isinstance(value: Any, hint: Any) -> bool:
    if hint is float:
        return isinstance(value, float)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if typing.get_origin(hint) is typing.Literal:
        return value in typing.get_args(hint)
    return isinstance(value, typing.get_origin(hint) or hint)



__all__ = ["Config", "did_you_mean"]
