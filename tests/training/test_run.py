"""One start of a run for every task (training/run.py): every task's train() refuses a folder the
same way, records the same form of experiment and resumes only with it (records written before
included), seeds before its model is built, and makes its folder only for the first file."""

import importlib
import json
import random

import numpy as np
import pytest
import torch

from aiayn.data.fingerprint import content_of
from aiayn.errors import UserError
from aiayn.folder.checkpoint import STARTED_MARKER, TRAIN_STATE_FILE
from aiayn.folder.files import CONFIG_FILE
from aiayn.folder.lock import LOCK_FILE
from aiayn.tasks import TASKS
from aiayn.training.run import Run, TrainResult, start_run
from tests.builders import digit_pairs, write_pairs

QUIET = {"max_steps": 2, "eval_every": 0, "save_every": 0, "log_every": 1, "tensorboard": False,
         "progress": False, "threads": 1, "precision": "fp32"}
FOX = "the quick brown fox jumps over the lazy dog\n"


def tiny(task, tmp, **train):
    """(module, experiment, task-specific keywords of its train()) of a run of a few seconds."""
    module = importlib.import_module(f"aiayn.tasks.{task}")
    model, data, extra = {"preset": "tiny", "d_model": 16, "d_ff": 32}, {}, {}
    if task == "seq2seq":
        write_pairs(digit_pairs(60, 1), tmp / "train.src", tmp / "train.tgt")
        data = {"train_src": str(tmp / "train.src"), "train_tgt": str(tmp / "train.tgt"),
                "vocab_size": 120, "valid_pairs": 4}
    elif task == "language_model":
        (tmp / "fox.txt").write_text(FOX * 20, encoding="utf-8")
        data, extra = {"tokenizer": "char", "vocab_size": 64, "block_len": 16}, \
            {"texts": [str(tmp / "fox.txt")]}
    elif task == "text_classification":
        rows = [(f"{w} sky", "blue") if i % 2 else (f"{w} ruby", "red")
                for i, w in enumerate(FOX.split() * 6)]
        (tmp / "ex.tsv").write_text("".join(f"{t}\t{y}\n" for t, y in rows), encoding="utf-8")
        model = {"preset": "tiny", "d_model": 16, "d_ff": 32}
        data = {"train": str(tmp / "ex.tsv"), "valid": str(tmp / "ex.tsv"), "vocab_size": 200}
    raw = {"model": model, "data": data, "train": {**QUIET, **train}}
    return module, module.experiment(raw, out=str(tmp / "m")), extra


@pytest.mark.parametrize("task", TASKS)
def test_every_task_refuses_a_folder_that_holds_something_the_same_way(task, tmp_path):
    module, exp, extra = tiny(task, tmp_path)
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "notes.txt").write_text("keep")
    with pytest.raises(UserError, match=r"m: already exists and is not empty; continue it with "
                                        r"--resume or choose another out folder"):
        module.train(exp, say=lambda s: None, **extra)
    with pytest.raises(UserError, match="config.json: not found"):
        module.train(exp, resume=True, say=lambda s: None, **extra)
    assert [p.name for p in (tmp_path / "m").iterdir()] == ["notes.txt"]


@pytest.mark.slow
@pytest.mark.parametrize("task", TASKS)
def test_every_task_records_the_experiment_as_loaded_and_resumes_only_with_it(task, tmp_path):
    module, exp, extra = tiny(task, tmp_path)
    result = module.train(exp, say=lambda s: None, **extra)
    assert isinstance(result, TrainResult) and result.folder == tmp_path / "m"
    assert result.step == 2 and result.stopped_by == "max_steps"
    meta = json.loads((tmp_path / "m" / CONFIG_FILE).read_text())
    record = {k: v for k, v in exp.to_dict().items() if k != "out"}
    if task == "language_model":
        record.update(texts=extra["texts"], valid_texts=[])
    record["data_content"] = content_of(record)  # the files read, by size and SHA-256
    assert meta["experiment"] == json.loads(json.dumps(record))
    assert all(len(v) for v in record["data_content"].values())
    assert meta["experiment"]["task"] == task
    module, longer, _ = tiny(task, tmp_path, max_steps=3)  # train.* may change
    assert module.train(longer, resume=True, say=lambda s: None, **extra).step == 3
    wider = module.experiment({**exp.to_dict(), "model": {**exp.model, "d_ff": 48}})
    with pytest.raises(UserError, match=r"--resume: model.d_ff=48 differs from the run in .*\(32\)"):
        module.train(wider, resume=True, say=lambda s: None, **extra)


def test_start_run_seeds_and_makes_the_folder_only_for_the_first_file(tmp_path):
    _, exp, _ = tiny("image_classification", tmp_path, seed=7)
    with start_run(exp, say=lambda s: None) as run:
        drawn = (torch.rand(3), random.random(), np.random.rand())
        torch.manual_seed(7), random.seed(7), np.random.seed(7)
        assert torch.equal(drawn[0], torch.rand(3))
        assert drawn[1:] == (random.random(), np.random.rand())
        assert isinstance(run, Run) and run.folder == tmp_path / "m"
        # until its first file the folder holds the writer lock alone
        assert [p.name for p in run.folder.iterdir()] == [LOCK_FILE]
        assert run.record == {**{k: v for k, v in exp.to_dict().items() if k != "out"},
                              "data_content": {}}  # a built-in corpus: no files to identify
        assert run.begin_folder() and (run.folder / STARTED_MARKER).is_file()
        assert not run.stage(run.folder / "pretrain", resume=True).begin_folder()
        assert not (run.folder / "pretrain").exists()
    assert sorted(p.name for p in run.folder.iterdir()) == [STARTED_MARKER]  # the lock is gone
    with start_run(exp, out=tmp_path / "other", say=lambda s: None) as run:
        pass
    assert not run.folder.exists()  # a run that ended before its first file leaves nothing


def _folder(path, model, record):
    """A folder as a run writes it, enough for a resume to be checked: config.json, train state."""
    path.mkdir(parents=True)
    meta = {"family": "x", "model": model, "experiment": record}
    (path / CONFIG_FILE).write_text(json.dumps(meta), encoding="utf-8")
    (path / TRAIN_STATE_FILE).write_bytes(b"")


def test_records_written_before_every_task_shared_one_form_still_resume(tmp_path):
    """Language models and ViTs recorded the model config as resolved (sizes from the data) and
    no task; translation and the classifier the model section as written, also without task."""
    module, lm, extra = tiny("language_model", tmp_path)
    resolved = lm.model_config(vocab_size=32, pad_id=0).to_dict()
    old = {"model": resolved, "data": lm.data.to_dict(), "texts": extra["texts"],
           "valid_texts": ["other.txt"]}
    _folder(tmp_path / "m", resolved, old)
    inputs, free = {"texts": extra["texts"], "valid_texts": []}, ("valid_texts",)
    start_run(lm, True, inputs=inputs, may_change=free)
    wider = module.experiment({**lm.to_dict(), "model": {**lm.model, "d_ff": 48}})
    with pytest.raises(UserError, match=r"model.d_ff=48 differs .*\(32\)"):
        start_run(wider, True, inputs=inputs, may_change=free)
    with pytest.raises(UserError, match="the texts settings differ"):
        start_run(lm, True, inputs={"texts": [], "valid_texts": []}, may_change=free)
    (tmp_path / "t").mkdir()
    _, tr, _ = tiny("seq2seq", tmp_path / "t")
    old = {"model": tr.model, "train": {},
           "data": {k: v for k, v in tr.data.to_dict().items() if k != "source_eos"}}
    _folder(tmp_path / "t" / "m", {"d_model": 16}, old)
    start_run(tr, True, added={"data.source_eos": False})


def test_the_classifier_resumes_its_pretraining_stage_when_fine_tuning_has_not_begun(tmp_path):
    _, exp, _ = tiny("text_classification", tmp_path)
    record = {k: v for k, v in exp.to_dict().items() if k != "out"}
    _folder(tmp_path / "m" / "pretrain", {"d_model": 16}, record)
    run = start_run(exp, True, stage="pretrain")
    assert run.resume and run.folder == tmp_path / "m"
    _, other, _ = tiny("text_classification", tmp_path, seed=1)
    other.data.vocab_size = 300
    with pytest.raises(UserError, match=r"data.vocab_size=300 differs from the run in .*pretrain"):
        start_run(other, True, stage="pretrain")
