"""A table3 start that fails before any row has finished leaves nothing that blocks the corrected
command (issue 37): a row's bad setting is refused before anything is written, and a folder where
nothing was done (its plan, rows stopped before their first checkpoint, no result) is started
afresh by the corrected command; --resume with other settings says so. A folder with a finished
row, or a row's checkpoint, is still refused: nothing is lost."""

import json
import subprocess
import sys

import pytest

from aiayn.cli import main
from aiayn.data.dates_numbers import dates_numbers
from aiayn.data.parallel import write_corpus_dir
from aiayn.errors import UserError
from aiayn.folder.checkpoint import STARTED_MARKER, TRAIN_STATE_FILE
from aiayn.folder.format import folder_contents
from aiayn.table3 import runs
from aiayn.table3.plan import PLAN_FILE, Plan, check_plan, nothing_done
from tests.table3.test_results import result_record


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    folder = tmp_path_factory.mktemp("corpus")
    write_corpus_dir(dates_numbers(n_train=40, n_valid=4, n_test=4), folder)
    return str(folder)


def table3(capsys, out, corpus, *args) -> tuple[int, str]:
    """`aiayn table3` in this process: (exit code, stderr)."""
    capsys.readouterr()
    code = main(["table3", "--out", str(out), "--corpus", corpus, "--updates", "2", "--jobs", "1",
                 *map(str, args)])
    return code, capsys.readouterr().err


def rows_train_and_score(monkeypatch, fail: str | None = None):
    """run_row replaced: each row's run folder is started (as training starts it), then the row
    fails with `fail`, or finishes with a result record as _score_row writes it."""

    def run_row(row, seed, plan, out, resume, say):
        folder = out / "rows" / row.name / f"seed{seed}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / STARTED_MARKER).touch()
        (folder / "tokenizer.json").write_text("{}")
        if fail:
            raise UserError(fail)
        record = result_record(row.name, seed)
        (out / "results").mkdir(exist_ok=True)
        (out / "results" / f"{row.name}-seed{seed}.json").write_text(json.dumps(record))
        return record

    monkeypatch.setattr(runs, "run_row", run_row)


def test_a_rows_bad_setting_is_refused_before_anything_is_written(tmp_path, corpus, capsys,
                                                                  monkeypatch):
    out = tmp_path / "t3"
    code, err = table3(capsys, out, corpus, "--rows", "A-h16", "model.d_model=136")
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert "row A-h16: " in err and "d_model=136: must be divisible by n_heads=16" in err
    assert not out.exists() or not folder_contents(out)
    rows_train_and_score(monkeypatch)  # the corrected command runs (its rows faked)
    code, err = table3(capsys, out, corpus, "--rows", "A-h16", "model.d_model=128")
    assert code == 0, err
    assert json.loads((out / PLAN_FILE).read_text())["overrides"] == ["model.d_model=128"]
    assert (out / "table3.md").is_file()


def test_a_start_that_failed_in_its_first_row_is_started_afresh_by_the_corrected_command(
        tmp_path, corpus, capsys, monkeypatch):
    out = tmp_path / "t3"
    rows_train_and_score(monkeypatch, fail="the first row failed")
    code, err = table3(capsys, out, corpus, "--rows", "base", "train.warmup_steps=7")
    assert code == 2 and "the first row failed" in err
    assert (out / PLAN_FILE).is_file() and nothing_done(out)  # the plan and a started row
    code, err = table3(capsys, out, corpus, "--rows", "base", "train.warmup_steps=8", "--resume")
    assert code == 2 and err.count("\n") == 1
    assert "differs from the table" in err and "leave out --resume to start it afresh" in err
    rows_train_and_score(monkeypatch)
    code, err = table3(capsys, out, corpus, "--rows", "base", "train.warmup_steps=8")
    assert code == 0, err
    assert json.loads((out / PLAN_FILE).read_text())["overrides"] == ["train.warmup_steps=8"]
    assert [r["row"] for r in runs.read_results(out)] == ["base"]


@pytest.mark.parametrize("left", ["result", "checkpoint", "other file"])
def test_a_folder_where_something_was_done_is_still_refused(tmp_path, corpus, left):
    out = tmp_path / "t3"
    out.mkdir()
    plan = Plan(corpus=corpus, groups="base", updates=2)
    (out / PLAN_FILE).write_text(json.dumps(check_plan(out, plan, resume=False)))
    run = out / "rows" / "base" / "seed0"
    run.mkdir(parents=True)
    (run / STARTED_MARKER).touch()
    assert nothing_done(out)
    if left == "result":
        (out / "results").mkdir()
        (out / "results" / "base-seed0.json").write_text(json.dumps(result_record()))
    elif left == "checkpoint":
        (run / TRAIN_STATE_FILE).write_bytes(b"state")
    else:
        (out / "notes.txt").write_text("mine")
    assert not nothing_done(out)
    with pytest.raises(UserError, match="already holds files; pass --resume"):
        check_plan(out, Plan(corpus=corpus, groups="base", updates=3), resume=False)
    with pytest.raises(UserError, match="updates=3 differs from the table") as e:
        check_plan(out, Plan(corpus=corpus, groups="base", updates=3), resume=True)
    assert "afresh" not in str(e.value)


@pytest.mark.slow  # end-to-end: a real training run
def test_the_corrected_command_trains_after_a_refused_start(tmp_path, corpus):
    def aiayn(*args):
        return subprocess.run([sys.executable, "-m", "aiayn", "table3", "--out", str(out),
                               "--corpus", corpus, "--rows", "A-h16", "--updates", "2",
                               "--dev-pairs", "3", "--jobs", "1", *args],
                              capture_output=True, text=True)

    out = tmp_path / "t3"
    bad = aiayn("model.d_model=136")
    assert bad.returncode == 2 and "row A-h16" in bad.stderr and "Traceback" not in bad.stderr
    done = aiayn("model.d_model=128")
    assert done.returncode == 0, done.stderr
    assert [r["row"] for r in runs.read_results(out)] == ["A-h16"]
