"""The seq2seq task's old name keeps working: `task: translation` in a config, a model folder
whose config.json records the task as "translation" (loaded, resumed), and the module
aiayn.tasks.translation (an alias of aiayn.tasks.seq2seq and aiayn.tasks.seq2seq_loss)."""

import json

import pytest
import yaml

import aiayn
from aiayn.config.experiment import config_task, load_experiment
from aiayn.errors import UserError
from aiayn.folder.families import TASK_ALIASES, task_family
from aiayn.folder.files import CONFIG_FILE
from aiayn.tasks import TASKS, seq2seq
from tests.builders import run, write_config


def test_the_old_module_path_re_exports_the_task():
    from aiayn.tasks import seq2seq_loss, translation

    for name in seq2seq.__all__:
        assert getattr(translation, name) is getattr(seq2seq, name), name
    assert translation.translation_loss is seq2seq_loss.seq2seq_loss is translation.seq2seq_loss
    assert set(seq2seq.__all__) < set(translation.__all__)


def test_a_config_naming_the_old_task_loads_as_seq2seq(tmp_path, capsys):
    config = write_config(tmp_path)
    raw = yaml.safe_load(config.read_text(encoding="utf-8"))
    old = tmp_path / "old.yaml"
    old.write_text(yaml.safe_dump({**raw, "task": "translation"}), encoding="utf-8")
    assert TASK_ALIASES == {"translation": "seq2seq"} and "translation" not in TASKS
    assert task_family("translation") is task_family("seq2seq")
    assert config_task(old) == "seq2seq" == config_task(config, ["task=translation"])
    for task in ("seq2seq", "translation"):  # as a file's task: and as the loader's task=
        exp = load_experiment(old, task=task)
        assert exp.task is task_family("seq2seq") and exp.to_dict()["task"] == "seq2seq"
        assert exp.to_dict() == load_experiment(config, task="seq2seq").to_dict()
    with pytest.raises(UserError, match=r"old.yaml: task='translation': this is not a "
                                        r"language_model config"):
        load_experiment(old, task="language_model")
    assert run(capsys, "configs", "--keys", "data", "--task", "translation") == \
        run(capsys, "configs", "--keys", "data", "--task", "seq2seq")


def test_a_folder_recording_the_old_task_loads_and_resumes(tmp_path):
    """A folder written when the task was named "translation" (its config.json's "task" and its
    experiment record's): aiayn.load gives the same Translator, and `--resume` continues it."""
    config = write_config(tmp_path, max_steps=2, save_every=2)
    exp = seq2seq.experiment(config)
    folder = seq2seq.train(exp, say=lambda m: None).folder
    meta = json.loads((folder / CONFIG_FILE).read_text(encoding="utf-8"))
    assert meta["task"] == "seq2seq" and meta["experiment"]["task"] == "seq2seq"
    sources = ["3 1 4", "2 7"]
    before = aiayn.load(folder).translate(sources, beam=2)
    meta["task"] = meta["experiment"]["task"] = "translation"  # as the folder was written then
    (folder / CONFIG_FILE).write_text(json.dumps(meta), encoding="utf-8")
    assert aiayn.load(folder).translate(sources, beam=2) == before
    longer = seq2seq.experiment(config, ["train.max_steps=4"])
    assert seq2seq.train(longer, resume=True, say=lambda m: None).step == 4
    wider = seq2seq.experiment(config, ["train.max_steps=6", "model.d_ff=48"])
    with pytest.raises(UserError, match=r"model.d_ff=48 differs"):  # the record still guards
        seq2seq.train(wider, resume=True, say=lambda m: None)
