"""Reading settings files within bounds: every YAML or JSON file aiayn reads as settings (a
config given to `aiayn train`, a model folder's config.json, a Table 3 plan or result) goes
through here, so a hostile or damaged file is refused in one line naming it, before it can
exhaust the memory or the stack.

    text = read_text(path)                 # at most MAX_FILE_BYTES, UTF-8
    data = load_yaml(text, where=path)     # aliases, nesting and expanded size bounded
    data = load_json(text, where=path)     # nesting bounded

The bounds (issue 37):
  * a file of at most MAX_FILE_BYTES: a config is a few KB, a converted model's vocab.json
    ~1-2 MB;
  * at most MAX_DEPTH levels of nesting: Python's parsers recurse, and a 200 KB file of
    brackets overflows the stack (a RecursionError);
  * in YAML, at most MAX_ALIASES aliases (`*name`), and at most MAX_VALUES values once the
    aliases are expanded: a 1 KB "billion laughs" file (an anchor holding 9 aliases of one
    holding 9 of ...) expands to 9^9 values, gigabytes once copied. PyYAML shares an alias's
    object rather than copying it, so the file loads small; the values are counted before
    anything copies them (the count stops at the bound).
Each refusal is a UserError: the CLI prints it as one line and exits 2.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from aiayn.errors import UserError

MAX_FILE_BYTES = 8 * 2**20
MAX_DEPTH = 100
MAX_ALIASES = 20
MAX_VALUES = 100_000
_SCALARS = (str, int, float, bool, type(None))


def read_text(path: str | Path, limit: int = MAX_FILE_BYTES) -> str:
    """The UTF-8 text of the file `path`, refused (naming it) over `limit` bytes or not UTF-8.
    At most limit + 1 bytes are read, whatever the file's size says (a file still growing)."""
    path = Path(path)
    with path.open("rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        size = max(path.stat().st_size, len(data))
        raise UserError(f"{path}: {size:,} bytes; a settings file may hold at most "
                        f"{_size(limit)}: refused unread")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UserError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None


def load_json(text: str, where: str | Path) -> Any:
    """The JSON value of `text` (from `where`, named in errors), nested at most MAX_DEPTH deep.
    A json.JSONDecodeError is the caller's to word (it has the line)."""
    try:
        data = json.loads(text)
    except RecursionError:  # the parser recursed once per level: far deeper than MAX_DEPTH
        raise UserError(f"{where}: nested deeper than {MAX_DEPTH} levels: refused") from None
    check_values(data, where)
    return data


def load_yaml(text: str, where: str | Path) -> Any:
    """The YAML value of `text` (from `where`), within the bounds above; a yaml.YAMLError (a
    syntax error) is the caller's to word."""
    try:
        data = yaml.load(text, Loader=_BoundedLoader)  # noqa: S506 (a SafeLoader)
    except _Refused as e:
        line = f":{e.mark.line + 1}" if e.mark is not None else ""
        raise UserError(f"{where}{line}: {e.reason}: refused") from None
    except RecursionError:  # a backstop: _BoundedLoader stops at MAX_DEPTH first
        raise UserError(f"{where}: nested deeper than {MAX_DEPTH} levels: refused") from None
    check_values(data, where, MAX_VALUES, aliases=True)
    return data


def check_values(data: Any, where: str | Path, limit: int | None = None,
                 aliases: bool = False) -> None:
    """Refuse (naming `where` and the key) a value nested deeper than MAX_DEPTH (a recursive
    YAML alias is infinitely deep), more than `limit` values counting each alias's value again,
    or a value of no JSON type (YAML's dates, sets, bytes). `aliases`: the data is YAML's (the
    messages say how aliases count). Iterative: no recursion to overflow; it stops at the first
    fault, so a shared value is never walked more than `limit` times."""
    stack: list[tuple[Any, int, str]] = [(data, 0, "")]
    count = 0
    while stack:
        value, depth, key = stack.pop()
        count += 1
        if limit is not None and count > limit:
            expanded = " once its YAML aliases (*name) are expanded (an alias bomb?)" * aliases
            raise UserError(f"{where}: more than {limit:,} values{expanded}: refused")
        if isinstance(value, (dict, list)):
            if depth >= MAX_DEPTH:
                recursive = " (a recursive YAML alias?)" * aliases
                raise UserError(f"{where}: {_named(key)}: nested deeper than {MAX_DEPTH} "
                                f"levels{recursive}: refused")
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for k, v in items:
                if not isinstance(k, _SCALARS):
                    raise UserError(f"{where}: {_named(key)}: a key of type "
                                    f"{type(k).__name__} ({k!r:.40}): write it as text")
                stack.append((v, depth + 1, f"{key}.{k}" if key else str(k)))
        elif not isinstance(value, _SCALARS):
            raise UserError(f"{where}: {_named(key)}: a {type(value).__name__} "
                            f"({value!r:.40}) is not a setting; quote it to give it as text")


class _Refused(Exception):
    def __init__(self, reason: str, mark: Any) -> None:
        super().__init__(reason)
        self.reason, self.mark = reason, mark


class _BoundedLoader(yaml.SafeLoader):
    """yaml.SafeLoader (plain data only) that counts the aliases and the nesting as it composes
    the document, before any value is constructed."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._aliases = self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                raise _Refused(f"more than {MAX_ALIASES} YAML aliases (*name); a config may "
                               f"reuse an anchored value at most {MAX_ALIASES} times",
                               self.peek_event().start_mark)
        if self._depth > MAX_DEPTH:  # (a scalar at MAX_DEPTH is inside MAX_DEPTH levels)
            raise _Refused(f"nested deeper than {MAX_DEPTH} levels", self.peek_event().start_mark)
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _named(key: str) -> str:
    """A dotted key for a message ("train.max_steps"); a deep one by its first levels."""
    parts = key.split(".")
    if not key:
        return "the top level"
    return key if len(parts) <= 6 else ".".join(parts[:4]) + "..."


def _size(n: int) -> str:
    return f"{n / 2**20:g} MiB" if n >= 2**20 else f"{n:,} bytes"


__all__ = ["MAX_ALIASES", "MAX_DEPTH", "MAX_FILE_BYTES", "MAX_VALUES", "check_values",
           "load_json", "load_yaml", "read_text"]
