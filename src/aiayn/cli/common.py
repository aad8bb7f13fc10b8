"""Pieces every command module of the CLI uses: flag types, devices and precision, stdin, the
training commands and their reports. The checks of a command line are aiayn.cli.checks's."""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
from collections.abc import Callable
from typing import Any

from aiayn.config import did_you_mean
from aiayn.errors import UserError


def _int_at_least(text: str, least: int, what: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < least:
        raise argparse.ArgumentTypeError(f"{value}: must be a {what} integer")
    return value


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1 (`--beam 0` is refused with the flag's name)."""
    return _int_at_least(text, 1, "positive")


# Threads or processes beyond this many per CPU thread of the machine only wait for a core (and
# `--threads 100000000` crashed the process): the bound of --threads, --workers, serve --threads.
THREADS_PER_CPU = 4


def thread_count(text: str) -> int:
    """argparse type: a number of threads or processes, 1 .. THREADS_PER_CPU per CPU thread."""
    value = _int_at_least(text, 1, "positive")
    most = THREADS_PER_CPU * (os.cpu_count() or 1)
    if value > most:
        raise argparse.ArgumentTypeError(f"{value}: at most {most} ({THREADS_PER_CPU} per CPU "
                                         "thread of this machine; more only wait for a core)")
    return value


def thread_count_or_auto(text: str) -> int | str:
    """argparse type: "auto" or a thread_count (`--workers auto`)."""
    if text == "auto":
        return text
    try:
        int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is neither an integer nor 'auto'") from None
    return thread_count(text)


def beam_size(text: str) -> int:
    """argparse type: a beam size, 1 .. MAX_BEAM (aiayn.generation.config)."""
    from aiayn.generation.config import MAX_BEAM

    value = _int_at_least(text, 1, "positive")
    if value > MAX_BEAM:
        raise argparse.ArgumentTypeError(f"{value}: at most {MAX_BEAM} (every beam is a row of "
                                         "the batch; §6.1 uses 4)")
    return value


def seed(text: str) -> int:
    """argparse type: a seed torch.Generator.manual_seed takes (-2**63 .. 2**64 - 1)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if not -2**63 <= value < 2**64:
        raise argparse.ArgumentTypeError(f"{value}: a seed must be in -2**63 .. 2**64 - 1")
    return value


def non_negative_int(text: str) -> int:
    """argparse type: an integer >= 0 (0 usually means "off")."""
    return _int_at_least(text, 0, "non-negative")


def finite_float(text: str) -> float:
    """argparse type: a finite number (`--alpha nan` is refused with the flag's name)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text}: must be a finite number")
    return value


def device_options(p: argparse.ArgumentParser, precision: bool = True,
                   weights: bool = False) -> None:
    """--device (and --precision) of a command that runs a model. weights: the command decodes
    with a reduced-precision copy of the model (aiayn.nn.precision) for bf16 and int8, instead
    of autocasting (see precision_context); it then offers int8 too."""
    p.add_argument("--device", type=device, default="auto",
                   help="auto (CUDA when present, else MPS, else CPU; default), cpu, cuda, "
                        "cuda:N, mps")
    if precision and weights:
        p.add_argument("--precision", default="fp32",
                       choices=("fp32", "bf16", "int8", "fp16", "auto"),
                       help="bf16: the weights in bf16; int8: the Linear layers in int8 (CPU); "
                            "fp16: autocast; auto: bf16 where the hardware computes it, as "
                            "train.precision; default fp32")
        p.set_defaults(precision_weights=True)
    elif precision:
        p.add_argument("--precision", default="fp32", choices=("fp32", "bf16", "fp16", "auto"),
                       help="autocast the model to bf16 / fp16 (auto: bf16 where the hardware "
                            "computes it, as train.precision); default fp32")


def precision_context(args: argparse.Namespace):
    """The autocast context of --precision on --device (a no-op for fp32, and for bf16 / int8
    in a command that converts the weights instead: device_options(weights=True))."""
    import contextlib

    import torch

    from aiayn.devices import resolve_precision

    name = getattr(args, "precision", "fp32")
    chosen, _ = resolve_precision(name, args.device)
    if getattr(args, "precision_weights", False) and chosen in ("bf16", "int8"):
        return contextlib.nullcontext()
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(chosen)
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(torch.device(args.device).type, dtype=dtype)


def stated_precision(args: argparse.Namespace) -> str:
    """The precision --precision resolves to on --device (args.precision_run, for --json),
    stated on stderr when it is not the plain fp32 asked for: auto's choice, or bf16 emulated
    on a CPU without bf16 instructions."""
    from aiayn.devices import resolve_precision

    chosen, why = resolve_precision(args.precision, str(args.device))
    args.precision_run = chosen
    if "emulated" in why:
        warn(f"precision {chosen} ({why})")
    elif why != "set":
        print(f"aiayn: precision {chosen} ({why})", file=sys.stderr)
    return chosen


def runs_model(func: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """A command function that runs a model: the whole command under its --precision."""
    import functools

    @functools.wraps(func)
    def wrapper(args: argparse.Namespace) -> int:
        with precision_context(args):
            return func(args)

    return wrapper


def device(text: str) -> str:
    """argparse type: a device this machine has (`--device cuda` on a CPU machine is refused)."""
    from aiayn.devices import resolve_device
    from aiayn.errors import ConfigError

    try:
        return resolve_device(text)
    except ConfigError as e:
        raise argparse.ArgumentTypeError(str(e).removeprefix(f"device={text!r}: ")) from None


def read_stdin_text(what: str = "") -> str:
    """Standard input as text (UTF-8, a BOM allowed); invalid UTF-8 is one line naming the line
    and the byte. On a terminal, a hint says what is awaited (`what`) and how to end it."""
    if sys.stdin.isatty():
        print(f"reading from the terminal{what}; end with Ctrl-D (or pass them as arguments)",
              file=sys.stderr)
    data = sys.stdin.buffer.read()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise UserError(f"<stdin>:{line}: invalid UTF-8 (byte 0x{data[e.start]:02x})") from None


def read_stdin_lines() -> list[str]:
    """The lines of standard input (UTF-8, a BOM and CRLF endings allowed)."""
    lines = read_stdin_text(", one per line").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def warn(message: str) -> None:
    print(f"aiayn: warning: {message}", file=sys.stderr, flush=True)


def say(message: str) -> None:
    """One line on stdout, written in one call: with PYTHONUNBUFFERED, print() writes the text and
    its newline apart, and lines of processes sharing the stdout (aiayn table3 --jobs) ran together."""
    sys.stdout.write(message + "\n")
    sys.stdout.flush()


Options = Callable[[argparse.ArgumentParser], None]
_OVERRIDE = re.compile(r"^(task|out|model|data|train)(\.\w+)?=")
# task name -> the parser of the `... train` command of that task (its own flags, e.g. --text),
# filled as the commands register: `aiayn train CONFIG` runs a config of such a task through it.
TRAIN_COMMANDS: dict[str, argparse.ArgumentParser] = {}


def _run_options(p: argparse.ArgumentParser, options: Options | None) -> None:
    p.add_argument("--out", help="model folder to write (default: the config's out)")
    p.add_argument("--resume", action="store_true", help="continue the run saved in the folder")
    if options is not None:
        options(p)


def command_group(sub: Any, name: str, dest: str, metavar: str = "COMMAND",
                  **parser_args: Any) -> Any:
    """The sub-commands of `aiayn NAME` (add_parser's `parser_args`: help, description, ...);
    `aiayn NAME` alone prints NAME's help and exits with status 2."""
    parser = sub.add_parser(name, **parser_args)
    parser.set_defaults(func=lambda args: (parser.print_help(), 2)[1])
    return parser.add_subparsers(dest=dest, metavar=metavar)


def model_command(cmds: Any, name: str, help_text: str,
                  precision: bool = True) -> argparse.ArgumentParser:
    """A command that runs a model folder: --model DIR and device_options."""
    p = cmds.add_parser(name, help=help_text)
    p.add_argument("--model", required=True, metavar="DIR")
    device_options(p, precision=precision)
    return p


def training_command(p: argparse.ArgumentParser, func: Callable[[argparse.Namespace], int],
                     options: Options | None = None, task: str | None = None) -> None:
    """`CONFIG [KEY=VALUE ...] [--out DIR] [--resume] [task options]` of every `... train`
    command, run by `func` (data-parallel under torchrun). CONFIG is a file, a built-in config
    name (`aiayn configs`) or a model preset name; `options(parser)` adds the task's own flags
    (e.g. --text); `task` names the task whose command this is, for `aiayn train` (see
    train_as)."""
    p.add_argument("config", nargs="?", metavar="CONFIG",
                   help="config file, built-in config name (see `aiayn configs`) or preset name")
    # REMAINDER: options may follow the overrides (`train CONFIG key=value --resume`).
    p.add_argument("overrides", nargs=argparse.REMAINDER, metavar="KEY=VALUE",
                   help="dotted overrides, e.g. train.max_steps=100")
    _run_options(p, options)
    # source: the config as read by config_task_of, read once (config_of)
    p.set_defaults(run_options=options, func=func, distributed=True,  # torchrun: data-parallel
                   source=None, command_parser=p)
    if task is not None:
        TRAIN_COMMANDS[task] = p


def config_task_of(args: argparse.Namespace) -> str:
    """The task `aiayn train CONFIG [KEY=VALUE ...]` trains: the one the config names (its
    `task:`, or a task= override); seq2seq for a config that names none. CONFIG is read
    here, once: what was read is kept in args.source for the task's loader (config_of)."""
    from aiayn.config.experiment import config_task, read_source
    from aiayn.folder.families import task_family

    items = [args.config or "", *args.overrides]
    if args.config is not None and "=" not in args.config:
        args.source = read_source(args.config, task_family("seq2seq"))
    return config_task(args.source, [i for i in items if i.startswith("task=")])


def config_of(args: argparse.Namespace) -> Any:
    """The config a `... train` command loads: CONFIG as config_task_of read it (not read
    again), else CONFIG as given."""
    return args.source if args.source is not None else args.config


def train_as(task: str, args: argparse.Namespace) -> int:
    """`aiayn train CONFIG ...` for a config of `task` (not translation): the `... train` command
    of that task runs it, with its own flags at their defaults. Those flags are that command's
    alone: given to `aiayn train`, they are refused with the command to use."""
    from aiayn.folder.families import task_family

    family = task_family(task)
    command = TRAIN_COMMANDS[task]
    common = argparse.ArgumentParser(add_help=False)
    _run_options(common, None)
    shared = {o for a in common._actions for o in a.option_strings}
    own = {o for a in command._actions for o in a.option_strings} - shared - {"-h", "--help"}
    for item in [args.config or "", *args.overrides]:
        flag = item.split("=")[0]
        if flag in own:
            raise UserError(f"{flag} is an option of `{family.command}`: {args.config} is a {task} "
                            f"config; run `{family.command} {args.config} ... {flag} ...`")
    run = command.parse_args([])  # the command's function and its flags' defaults
    for key in ("config", "source", "overrides", "out", "resume"):
        setattr(run, key, getattr(args, key))
    return run.func(run)


def split_overrides(args: argparse.Namespace) -> list[str]:
    """The KEY=VALUE overrides of a `... train` command; options written among them are parsed
    into `args` with the command's own definitions."""
    items = list(args.overrides)
    if args.config is not None and "=" in args.config:  # no CONFIG: the first item is an override
        items, args.config = [args.config, *items], None
    # KEY=VALUE items first, so that `--text a.txt train.max_steps=9` keeps the override.
    overrides = [i for i in items if _OVERRIDE.match(i)]
    extra = argparse.ArgumentParser(prog="aiayn train", add_help=False)
    _run_options(extra, args.run_options)
    found, rest = extra.parse_known_args([i for i in items if not _OVERRIDE.match(i)])
    for key, value in vars(found).items():
        if value != extra.get_default(key):  # given among the overrides
            setattr(args, key, value)
    options = [o for a in extra._actions for o in a.option_strings]
    for item in rest:
        if item.startswith("-") or "=" not in item:
            hint = did_you_mean(item.split("=")[0], options) if item.startswith("-") else ""
            raise UserError(f"{item!r}: expected KEY=VALUE (e.g. train.max_steps=100) or an option "
                            f"of this command{hint} (see --help)")
    return overrides + rest


def report_training(result, details: str = "") -> int:
    """The last line of every training command (steps, time, why it stopped, then `details`,
    e.g. the validation scores); the exit code: 130 (Ctrl-C) or 143 (SIGTERM) when interrupted
    (saved, resumable)."""
    out = result.folder
    if result.interrupted:
        how = "stopped by SIGTERM" if result.stopped_by == "sigterm" else "interrupted"
        print(f"aiayn: {how} at step {result.step}; saved to {out} "
              f"(continue with --resume)", file=sys.stderr)
        return result.exit_code
    print(f"trained {result.step} steps in {result.seconds:.0f} s (stopped by "
          f"{result.stopped_by}){details}; model saved in {out}")
    return 0


def report_validated(result) -> int:
    """report_training with the run's last validation scores (valid_*) as its details."""
    scores = {k: v for k, v in result.metrics.items() if k.startswith("valid_")}
    return report_training(result, "".join(f", {k} {v:.4g}" for k, v in scores.items()))


def percent(name: str, value: float | None) -> str:
    return "" if value is None else f", {name} {100 * value:.2f}%"
