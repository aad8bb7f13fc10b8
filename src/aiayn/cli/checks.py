"""Checks of a command line before any work, each refusing in one line (a UserError) what would
fail late or silently: every argument decodes as UTF-8, an output file can be written and loses
no input, options that have no effect with the chosen engine, and which flags were named
(Given, given_flags) so that a flag with a default can still be refused where it does nothing."""

from __future__ import annotations

import argparse

from aiayn.errors import UserError


class Given(argparse.Action):
    """Store the value and note that the flag was given (given_flags), so that a flag with a
    default can still be refused where it has no effect."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, values)
        namespace._given = {*getattr(namespace, "_given", ()), self.dest}


def given_flags(args: argparse.Namespace) -> set[str]:
    """The dests of the Given flags the command line named."""
    return set(getattr(args, "_given", ()))


def check_arguments(argv: list[str]) -> None:
    """Every argument decodes as UTF-8: Python hands an undecodable byte over as a lone
    surrogate (surrogateescape), which fails later, deep in a tokenizer, as a traceback."""
    for i, arg in enumerate(argv, 1):
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError as e:
            char = arg[e.start]
            byte = f"byte 0x{ord(char) - 0xDC00:02x}" if 0xDC80 <= ord(char) <= 0xDCFF \
                else f"character U+{ord(char):04X}"
            shown = arg.encode("utf-8", "replace").decode()
            raise UserError(f"argument {i} ({shown[:40]!r}): invalid UTF-8 ({byte})") from None


def writable_file(option: str, path: str, inputs: dict[str, str | None] | None = None) -> None:
    """Check, before any work, that `path` can be written (its folder exists and is writable),
    so that an unwritable output does not surface only after minutes of decoding; and that
    writing it loses nothing: it is none of the command's `inputs` ({option: path}, spelled
    any way, a link to one included) and no file inside a model folder."""
    import os
    from pathlib import Path

    from aiayn.folder.files import model_folder_around

    target = Path(path)
    folder = target.parent
    if target.is_dir():
        raise UserError(f"{option} {path}: is a directory")
    if not folder.is_dir():
        raise UserError(f"{option} {path}: folder {folder} does not exist")
    for name, given in (inputs or {}).items():
        if given is not None and _same_file(path, given):
            raise UserError(f"{option} {path}: is {name} {given}, an input of this command; "
                            "write the output elsewhere")
    model = model_folder_around(path)
    if model is not None:
        raise UserError(f"{option} {path}: is inside the model folder {model}; write the output "
                        "elsewhere")
    if not os.access(folder, os.W_OK | os.X_OK) or (target.exists() and not os.access(target, os.W_OK)):
        raise UserError(f"{option} {path}: not writable")


def _same_file(a: str, b: str) -> bool:
    """Whether two paths name one file: the same real path, or the same inode (a hard link)."""
    import os

    try:
        return os.path.realpath(a) == os.path.realpath(b) or os.path.samefile(a, b)
    except OSError:
        return False


def check_engine_options(args: argparse.Namespace) -> None:
    """Options that have no effect with the chosen --engine are refused, not ignored."""
    if args.engine == "ctranslate2":
        if args.precision != "fp32":
            raise UserError(f"--precision {args.precision} is for --engine torch; with --engine "
                            "ctranslate2 use --ct2-compute-type (e.g. bfloat16, int8)")
        if args.ct2_compute_type is None:
            args.ct2_compute_type = "default"
    elif args.ct2_compute_type is not None:
        raise UserError(f"--ct2-compute-type {args.ct2_compute_type} sets CTranslate2's compute "
                        "type: add --engine ctranslate2 (or use --precision with torch)")


__all__ = ["Given", "check_arguments", "check_engine_options", "given_flags", "writable_file"]
