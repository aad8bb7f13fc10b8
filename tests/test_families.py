"""The family table (aiayn.folder.families): one row per kind of model folder and the task that trains
it, read by folder loading, `aiayn.load`, the experiment loader and the command line."""

import importlib

import pytest

from aiayn.config import Config
from aiayn.config.experiment import builtin_configs
from aiayn.errors import UserError
from aiayn.folder.families import FAMILIES, task_family
from aiayn.tasks import TASKS


def test_the_command_line_names_the_tasks_of_the_table():
    """aiayn.tasks.TASKS (torch-free, for the CLI's choices) lists the table's tasks in order."""
    assert TASKS == tuple(f.task for f in FAMILIES.values())
    assert len({f.task for f in FAMILIES.values()}) == len(FAMILIES)


@pytest.mark.parametrize("family", FAMILIES.values(), ids=lambda f: f.name)
def test_each_row_names_what_its_task_module_holds(family):
    module = importlib.import_module(f"aiayn.tasks.{family.task}")
    assert module.TASK == family.task and module.FAMILY == family.name
    assert issubclass(family.data_config, Config) and hasattr(getattr(module, family.object), "load")
    assert family.recipe is None or family.recipe in builtin_configs()
    assert family.default_preset is None or family.default_preset in family.config.PRESETS
    assert set(family.set_by_data) <= set(family.config.field_names())
    assert task_family(family.task) is family


def test_an_unknown_task_is_one_line_with_a_suggestion():
    with pytest.raises(UserError, match=r"task='language_modle': unknown task \(did you mean "
                                        r"'language_model'\?\); choose one of seq2seq, "):
        task_family("language_modle")
