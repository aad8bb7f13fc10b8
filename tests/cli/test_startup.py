"""The command line answers at once: building the parser and printing any command's help loads
neither torch nor matplotlib (each costs seconds on 2 cores); heavy imports happen in the command
that uses them."""

import subprocess
import sys

HEAVY = ("torch", "matplotlib", "numpy", "transformers", "sacrebleu", "tokenizers")

PROBE = """
import contextlib, io, sys
from aiayn.cli import build_parser, main
parser = build_parser()
commands = [[]] + [[name] for name in parser._subparsers._group_actions[0].choices]
for argv in commands:
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            main([*argv, "--help"])
        except SystemExit as e:
            assert e.code == 0, (argv, e.code)
print(len(commands), sorted(m for m in {HEAVY} if m in sys.modules))
"""


def test_the_parser_and_every_help_load_no_torch_or_matplotlib():
    # a fresh interpreter: this one has imported torch already
    out = subprocess.run([sys.executable, "-c", PROBE.replace("{HEAVY}", repr(HEAVY))],
                         capture_output=True, text=True, check=True).stdout.split(maxsplit=1)
    assert int(out[0]) > 15, out  # the root and every command
    assert out[1].strip() == "[]", f"imported to print help: {out[1]}"


HELP_AFTER_CONFIG = """
import contextlib, io, sys
from aiayn.cli import main
for command, argv in (("train", ["train", "auto", "--help"]),
                      ("train", ["train", "demo", "train.max_steps=3", "-h"]),
                      ("lm train", ["lm", "train", "lm-char", "--help"]),
                      ("vit train", ["vit", "train", "vit-digits", "-h"])):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(argv)
    assert code == 0, (argv, code)
    assert out.getvalue().startswith(f"usage: aiayn {command} ["), (argv, out.getvalue())
    assert "--out" in out.getvalue(), argv
print(sorted(m for m in {HEAVY} if m in sys.modules))
"""


def test_help_after_a_config_or_overrides_prints_the_commands_help():
    # `aiayn train auto --help`: argparse hands everything after CONFIG to the overrides
    out = subprocess.run([sys.executable, "-c", HELP_AFTER_CONFIG.replace("{HEAVY}", repr(HEAVY))],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", f"imported to print help: {out.stdout}"
