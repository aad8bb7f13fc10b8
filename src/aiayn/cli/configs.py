"""`aiayn configs`: the built-in configs, usable by name from anywhere (`aiayn train demo`), and
every settable key.

    aiayn configs                          name, command and description of each built-in config
    aiayn configs NAME                     print one (a starting point for a config of your own)
    aiayn configs --keys [SECTION]         every key of model / data / train: type, default, meaning
                     [--task TASK]         (the task's own model and data keys; default translation)

A built-in config is the one place its settings are written. Some are also a task's recipe (lm,
classify, vit-digits): what the task's train command runs without a config, and the train
settings every config of the task is layered over; `--keys` shows them as the train defaults.
The meaning of each key is the help its field is declared with (aiayn.config and each task's data
config: `field(default=..., metadata={"help": ...})`).
"""

from __future__ import annotations

import argparse
import dataclasses

from aiayn.errors import UserError
from aiayn.tasks import TASKS


def register(sub) -> None:
    p = sub.add_parser("configs", help="list the built-in configs and the keys they can set",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("name", nargs="?", help="print this built-in config")
    p.add_argument("--keys", nargs="?", const="all", choices=("all", "model", "data", "train"),
                   help="list the keys of a section (default: all sections)")
    p.add_argument("--task", choices=(*TASKS, "translation"), default="seq2seq",
                   help="whose model and data keys (default seq2seq; translation: its old name)")
    p.set_defaults(func=_configs)


def _configs(args: argparse.Namespace) -> int:
    from aiayn.config.experiment import builtin_configs, describe_config
    from aiayn.folder.families import task_family

    if args.keys:
        return _keys(args.task, args.keys)
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
        command = task_family(task).command
        rows.append((name, f"{command} {name}", description))
    width = [max(len(r[i]) for r in rows) for i in range(2)]
    for name, command, description in rows:
        print(f"{name:{width[0]}}  {command:{width[1]}}  {description}")
    return 0


def field_docs(cls: type) -> list[tuple[str, str, str, str]]:
    """(name, type, default, meaning) of every field of a typed config; the meaning is the help
    the field is declared with (`field(default=..., metadata={"help": ...})`)."""
    rows = []
    for f in dataclasses.fields(cls):
        kind = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        rows.append((f.name, kind, repr(default), f.metadata.get("help", "")))
    return rows


def _keys(task_name: str, section: str) -> int:
    from aiayn.config.experiment import recipe_train
    from aiayn.config.train import TrainConfig
    from aiayn.folder.families import task_family

    task = task_family(task_name)
    sections = {"model": task.config, "data": task.data_config, "train": TrainConfig}
    defaults = recipe_train(task)  # what the task's recipe sets, shown as the train defaults
    recipe = f", defaults from the {task.recipe} recipe" if task.recipe else ""
    for name, cls in sections.items():
        if section not in ("all", name):
            continue
        print(f"{name}: ({cls.__name__}{recipe if name == 'train' else ''})")
        for key, kind, default, meaning in field_docs(cls):
            if name == "train" and key in defaults:
                default = repr(defaults[key])
            if name == "model" and key in task.set_by_data:
                meaning = task.set_by_data[key]
            print(f"  {name}.{key}  ({kind}, default {default})  {meaning}".rstrip())
    return 0
