"""`aiayn configs`: the built-in configs by name, and every key of every typed config."""

import dataclasses

import pytest

from aiayn.cli import main
from aiayn.config import TrainConfig
from aiayn.config.experiment import recipe_train
from aiayn.folder.families import task_family
from aiayn.tasks import TASKS


def test_lists_the_built_in_configs_with_their_commands(capsys):
    assert main(["configs"]) == 0
    out = capsys.readouterr().out
    assert "aiayn train demo" in out and "aiayn lm train lm-char" in out
    assert "aiayn vit train vit-digits" in out and "aiayn classify train bert-gettext-origin" in out
    assert main(["configs", "demo"]) == 0 and "task: seq2seq" in capsys.readouterr().out


@pytest.mark.parametrize("task", TASKS)
def test_keys_lists_every_field_of_every_typed_config(task, capsys):
    spec = task_family(task)
    assert main(["configs", "--keys", "--task", task]) == 0
    out = capsys.readouterr().out
    for section, cls in (("model", spec.config), ("data", spec.data_config),
                         ("train", TrainConfig)):
        for f in dataclasses.fields(cls):
            assert f"  {section}.{f.name}  (" in out, f"{section}.{f.name}"
    # and says what each one means
    bare = [ln for ln in out.splitlines() if ln.startswith("  ") and not
            ln.split(")  ", 1)[1:]]
    assert not bare, bare
    # the train settings of the task's recipe are the defaults shown
    assert recipe_train(spec) or spec.recipe is None
    for key, value in recipe_train(spec).items():
        line = next(ln for ln in out.splitlines() if ln.startswith(f"  train.{key}  ("))
        assert f"default {value!r})" in line


def test_every_train_key_says_what_it_means(capsys):
    assert main(["configs", "--keys", "train"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("  train.")]
    assert len(lines) == len(dataclasses.fields(TrainConfig))
    bare = [ln for ln in lines if not ln.split(")  ", 1)[1:] or not ln.split(")  ", 1)[1].strip()]
    assert not bare, bare


@pytest.mark.parametrize("argv, hint", [
    (["trian"], "(did you mean 'train'?)"),
    (["config", "keys"], "(did you mean 'configs'?)"),
    (["lm", "trian"], "(did you mean 'train'?)"),
    (["viz", "atention"], "(did you mean 'attention'?)"),
    (["translate", "--model", "m", "--beem", "3"], "(did you mean '--beam'?)"),
    (["lm", "train", "tiny", "--txt", "a.txt"], "(did you mean '--text'?)"),
    (["train", "demo", "train.max_stesp=3"], "(did you mean 'max_steps'?)"),
])
def test_a_mistyped_command_option_or_key_gets_a_suggestion(argv, hint, capsys):
    with pytest.raises(SystemExit) as e:  # argparse's own errors exit
        code = main(argv)
        raise SystemExit(code)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert hint in err and err.count("\n") == 1, err


def test_lists_the_summarization_config(capsys):
    assert main(["configs"]) == 0
    line = next(row for row in capsys.readouterr().out.splitlines()
                if row.startswith("summarize-small "))
    assert "aiayn train summarize-small" in line and "Summarization" in line
    assert main(["configs", "summarize-small"]) == 0
    assert "corpus: stdlib-docstrings" in capsys.readouterr().out
