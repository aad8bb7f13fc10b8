"""`aiayn configs`: the built-in configs, usable by name from anywhere (`aiayn train demo`).

    aiayn configs                 name, task, command and description of each
    aiayn configs NAME            print one (a starting point for a config of your own)
"""

from __future__ import annotations

import argparse

from aiayn.errors import UserError


def register(sub) -> None:
    p = sub.add_parser("configs", help="list the built-in configs (or print one)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("name", nargs="?", help="print this config")
    p.set_defaults(func=_configs)


def _configs(args: argparse.Namespace) -> int:
    import importlib

    from aiayn.training.experiment import builtin_configs, describe_config

    configs = builtin_configs()
    if args.name:
        if args.name not in configs:
            raise UserError(f"{args.name}: not a built-in config (choose one of "
                            f"{', '.join(configs)})")
        print(configs[args.name].read_text(encoding="utf-8"), end="")
        return 0
    rows = []
    for name, path in configs.items():
        task, description = describe_config(path)
        command = importlib.import_module(f"aiayn.tasks.{task}").TASK.command
        rows.append((name, f"{command} {name}", description))
    width = [max(len(r[i]) for r in rows) for i in range(2)]
    for name, command, description in rows:
        print(f"{name:{width[0]}}  {command:{width[1]}}  {description}")
    return 0
