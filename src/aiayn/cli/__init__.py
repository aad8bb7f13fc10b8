"""The `aiayn` command line: a thin layer over typed functions.

Each command family lives in its own module under aiayn.cli with a `register(subparsers)` function
that adds its sub-commands; a sub-command sets `func(args) -> int | None` via set_defaults.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys

from aiayn.devices import launched  # the environment alone: no torch import
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
    "aiayn.cli.table3",  # table3 (the paper's Table 3, trained and scored)
    "aiayn.cli.configs",  # configs (the built-in configs by name)
]


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors (`aiayn translate: error: argument --beam: ...`), exit 2."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message}{_did_you_mean(self, message)} "
                     f"(see {self.prog} --help)\n")


def _option_strings(parser: argparse.ArgumentParser) -> set[str]:
    """The options (--beam, ...) of `parser` and of all its subcommands."""
    found = set()
    for action in parser._actions:
        found.update(o for o in action.option_strings if o.startswith("--"))
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found |= _option_strings(sub)
    return found


def _did_you_mean(parser: argparse.ArgumentParser, message: str) -> str:
    """' (did you mean 'train'?)' after argparse's "invalid choice: 'trian' (choose from ...)"."""
    import re

    from aiayn.config import did_you_mean

    m = re.search(r"unrecognized arguments: (-\S+)", message)
    if m:  # an option of some command (the root parser reports them all)
        return did_you_mean(m.group(1).split("=")[0], sorted(_option_strings(parser)))
    m = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)$", message)
    if not m:
        return ""
    choices = re.findall(r"'([^']*)'", m.group(2))
    aliases = {"config": "configs", "predict": "translate"}  # names users reach for
    if m.group(1) in aliases and aliases[m.group(1)] in choices:
        return f" (did you mean {aliases[m.group(1)]!r}?)"
    return did_you_mean(m.group(1), choices)


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


_SIGINT_SEEN = []  # set by _note_sigint: Ctrl-C arrived while this process ran


_DEFERRING = []  # non-empty while torch or numpy imports: Ctrl-C is noted, raised when it is done


def _note_sigint(signum, frame):
    """Python's own SIGINT behaviour (raise KeyboardInterrupt), remembering that it came; while
    torch imports, only remembered (raised once the import is whole)."""
    _SIGINT_SEEN.append(signum)
    if not _DEFERRING:
        raise KeyboardInterrupt


class _WholeImports:
    """A finder on sys.meta_path while main() runs: the first import of torch or numpy (whoever
    makes it: a command's module, a lazy import deep in a command) runs with Ctrl-C held until
    that module is whole. A KeyboardInterrupt inside a C extension's initialisation leaves
    half-made modules that the next import trips over (AttributeError, RecursionError, "cannot
    load module more than once", even an abort), never a clean exit. --help and argument errors
    stay torch-free (every command's work imports torch, so nothing else is saved)."""

    NAMES = ("torch", "numpy")

    def find_spec(self, name, path=None, target=None):
        if name not in self.NAMES:
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = find(name, path, target) if finder is not self and find else None
            if spec is not None:
                break
        else:
            return None
        run = spec.loader.exec_module  # this module's own loader instance: patched alone

        def exec_held(module):
            _DEFERRING.append(name)
            try:
                run(module)
            finally:
                _DEFERRING.pop()
            if _SIGINT_SEEN and not _DEFERRING:  # the module is whole: now stop (exit 130)
                raise KeyboardInterrupt

        spec.loader.exec_module = exec_held
        return spec


def main(argv: list[str] | None = None) -> int:
    noted = signal.getsignal(signal.SIGINT) is signal.default_int_handler
    hook = _WholeImports() if noted and "torch" not in sys.modules else None
    if noted:
        signal.signal(signal.SIGINT, _note_sigint)
    if hook is not None:
        sys.meta_path.insert(0, hook)
    try:
        return _main(argv)
    except KeyboardInterrupt:  # Ctrl-C while starting (imports, argument parsing)
        print("aiayn: interrupted", file=sys.stderr)
        return 130
    except ImportError as e:
        # Ctrl-C inside a C extension's import surfaces as an ImportError; a library that
        # guards an optional import (torch with numpy) may swallow that one, and the next
        # import of the half-initialised module fails ("cannot load module more than once")
        if _SIGINT_SEEN or isinstance(e.__cause__ or e.__context__, KeyboardInterrupt):
            print("aiayn: interrupted", file=sys.stderr)
            return 130
        raise
    finally:  # an in-process caller (tests, a notebook) gets Python's handler back
        if hook is not None and hook in sys.meta_path:
            sys.meta_path.remove(hook)
        if noted and signal.getsignal(signal.SIGINT) is _note_sigint:
            signal.signal(signal.SIGINT, signal.default_int_handler)


def _main(argv: list[str] | None) -> int:
    from aiayn.cli.checks import check_arguments

    argv = sys.argv[1:] if argv is None else argv
    try:
        check_arguments(argv)
    except UserError as e:
        print(f"aiayn: error: {e}", file=sys.stderr)
        return 2
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    command = getattr(args, "command_parser", None)  # a `... train` command (training_command)
    if command is not None and {"-h", "--help"} & set(args.overrides):
        command.print_help()  # `aiayn train CONFIG --help`: argparse's REMAINDER took the flag
        return 0  # as an override
    if launched() and not getattr(args, "distributed", False):
        # every process would do the whole job and print it again: refuse, once
        if os.environ.get("RANK", "0") == "0":
            print("aiayn: error: torchrun runs the training commands (train, lm train, "
                  "classify train, vit train, table3); run this one as a single process",
                  file=sys.stderr)
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
    finally:
        # under torchrun: leave the process group here, while every object of the command is
        # gone and the interpreter is whole, rather than in an atexit handler. Only a module
        # that finished importing can hold a group (Ctrl-C may have cut torch's import short)
        distributed = sys.modules.get("aiayn.training.distributed")
        if getattr(args, "distributed", False) and distributed is not None:
            distributed.finish()


def run() -> None:
    """The `aiayn` command (console script and `python -m aiayn`): main(), then exit with its code.

    A process that torchrun started ends with os._exit once the command has left the process
    group (main's `finally`) and flushed its output: normal interpreter shutdown runs static
    destructors while gloo's and the TCP store's threads may still be alive, a known source of
    a SIGSEGV after the work is done (seen once in CI: a finished 2-process run exited -11).
    Every file of the command is written and closed before main returns (atomic checkpoints,
    metrics and TensorBoard writers closed by the trainer)."""
    code = main()
    if launched():
        for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
            try:
                stream.flush()
            except (OSError, ValueError, AttributeError):  # closed, or a broken pipe
                pass
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":
    run()
