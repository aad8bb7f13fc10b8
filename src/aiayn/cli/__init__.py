"""The `aiayn` command line: a thin layer over typed functions.

Each command family lives in its own module under aiayn.cli with a `register(subparsers)` function
that adds its sub-commands; a sub-command sets `func(args) -> int | None` via set_defaults.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from aiayn.errors import UserError, describe_os_error

# Modules that register sub-commands, in the order they appear in `aiayn --help`.
COMMAND_MODULES = [
    "aiayn.cli.demo",  # demo
    "aiayn.cli.translation",  # train, translate, eval, average
    "aiayn.cli.data",  # data (built-in corpora to files)
    "aiayn.cli.lm",  # lm train, generate
    "aiayn.cli.encoder",  # classify, embed
    "aiayn.cli.convert",  # import, export
    "aiayn.cli.vit",  # vit train / eval
    "aiayn.cli.viz",  # viz attention / positions / masks / curves
    "aiayn.cli.serve",  # serve
    "aiayn.cli.configs",  # configs (the built-in configs by name)
]


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors (`aiayn translate: error: argument --beam: ...`), exit 2."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="aiayn", description="The Transformer of 'Attention Is All You Need': train, translate, "
        "generate, evaluate and look inside.")
    from aiayn import __version__
    parser.add_argument("--version", action="version", version=f"aiayn {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(argv)
    except KeyboardInterrupt:  # Ctrl-C while starting (imports, argument parsing)
        print("aiayn: interrupted", file=sys.stderr)
        return 130
    except ImportError as e:  # Ctrl-C inside a C extension's import surfaces as an ImportError
        if isinstance(e.__cause__ or e.__context__, KeyboardInterrupt):
            print("aiayn: interrupted", file=sys.stderr)
            return 130
        raise


def _main(argv: list[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except UserError as e:
        print(f"aiayn: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("aiayn: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `aiayn translate ... | head`
        return 0
    except Exception as e:  # a full disk, a read-only filesystem, a path that cannot be
        reason = describe_os_error(e)  # written: one line; anything else keeps its traceback
        if reason is None:
            raise
        print(f"aiayn: error: {reason}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
