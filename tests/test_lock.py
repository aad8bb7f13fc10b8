"""One writer per model folder (aiayn.folder.lock): a second writer is refused in one line naming the
first, touching nothing; the lock goes with its process, however it ends; commands that write a
fresh folder redo one they left unfinished. The slow tests start real `aiayn` processes against
one folder (two trains, train + resume, train + average, export + export, SIGKILL then a new
writer) and check the refusals, the exit codes, and that what was written is one run's."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import aiayn
from aiayn.data.fingerprint import content_of
from aiayn.errors import UserError
from aiayn.folder.format import INCOMPLETE_MARKER, new_folder, require_new_folder
from aiayn.folder.lock import LOCK_FILE, FolderBusy, holder, is_locked, writer_lock
from aiayn.tasks import seq2seq
from tests.builders import write_config

HOLD = textwrap.dedent("""
    import sys, time
    from aiayn.folder.lock import writer_lock
    with writer_lock(sys.argv[1]):
        print("locked", flush=True)
        time.sleep(120)
""")


def hold(folder):
    """Another process holding `folder`'s writer lock (until killed)."""
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(folder)], stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout.readline().strip() == "locked"
    return proc


def wait_for(condition, proc=None, seconds=120):
    end = time.monotonic() + seconds
    while not condition():
        assert proc is None or proc.poll() is None, proc.communicate()
        assert time.monotonic() < end, "timed out"
        time.sleep(0.05)


def test_a_second_writer_is_refused_naming_the_holder_and_touching_nothing(tmp_path):
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "notes.txt").write_text("keep")
    proc = hold(folder)
    try:
        assert is_locked(folder)
        assert holder(folder) == f"pid {proc.pid} (-c {folder})"  # python -c's argv
        before = sorted(p.name for p in folder.iterdir())
        with pytest.raises(FolderBusy, match=rf"^{folder} is being written by pid {proc.pid} "
                                             r"\(.*\); wait for it or choose another --out$"):
            with writer_lock(folder):
                pass
        assert sorted(p.name for p in folder.iterdir()) == before
        with pytest.raises(FolderBusy, match=f"pid {proc.pid}"):
            require_new_folder(folder)
    finally:
        proc.kill()
        proc.wait()
    # SIGKILL left its lock file; the operating system released the lock itself.
    assert (folder / LOCK_FILE).is_file() and not is_locked(folder)
    with writer_lock(folder):
        assert is_locked(folder)
    assert sorted(p.name for p in folder.iterdir()) == ["notes.txt"]


def test_the_lock_is_reentrant_and_a_folder_it_made_for_nothing_is_removed(tmp_path):
    folder = tmp_path / "a" / "m"
    with writer_lock(folder):
        with writer_lock(folder):  # the demo holds it around the training it starts
            pass
        assert (folder / LOCK_FILE).is_file()  # still held by the outer one
    assert not (tmp_path / "a" / "m").exists()
    with writer_lock(folder):
        (folder / "weights").write_text("x")
    assert [p.name for p in folder.iterdir()] == ["weights"]


def test_new_folder_redoes_an_unfinished_write_and_refuses_a_finished_one(tmp_path):
    out = tmp_path / "out"
    with pytest.raises(RuntimeError), new_folder(out):
        (out / "config.json").write_text("{}")
        raise RuntimeError("killed half-way")
    assert sorted(p.name for p in out.iterdir()) == sorted(["config.json", INCOMPLETE_MARKER])
    require_new_folder(out)  # unfinished: may be written again
    with new_folder(out):
        assert sorted(p.name for p in out.iterdir()) == sorted([INCOMPLETE_MARKER, LOCK_FILE])
        (out / "model.safetensors").write_text("x")
    assert [p.name for p in out.iterdir()] == ["model.safetensors"]
    with pytest.raises(UserError, match="already exists and is not empty"):
        require_new_folder(out)
    # a folder holding only the temporary file of a killed atomic write is unfinished too
    tmp_only = tmp_path / "tmp-only"
    tmp_only.mkdir()
    (tmp_only / ".model.safetensors.abc123.tmp").write_text("")
    with new_folder(tmp_only):
        (tmp_only / "config.json").write_text("{}")
    assert [p.name for p in tmp_only.iterdir()] == ["config.json"]


def test_a_body_that_fails_before_writing_leaves_the_folder_as_it_was(tmp_path):
    with pytest.raises(UserError), new_folder(tmp_path / "new"):
        raise UserError("bad input")
    assert not (tmp_path / "new").exists()
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError), new_folder(tmp_path / "empty"):
        raise UserError("bad input")
    assert list((tmp_path / "empty").iterdir()) == []


# -- real processes --------------------------------------------------------------------------

def aiayn_cli(*args):
    return [sys.executable, "-m", "aiayn", *map(str, args)]


def run(*args):
    """`aiayn ARGS...` to its end: (exit code, stdout, stderr)."""
    done = subprocess.run(aiayn_cli(*args), capture_output=True, text=True, timeout=300)
    return done.returncode, done.stdout, done.stderr


def start_training(config, *extra):
    """An `aiayn train` that runs until stopped, once it holds the lock and has checkpointed."""
    proc = subprocess.Popen(aiayn_cli("train", config, "train.max_steps=1000000",
                                      "train.save_every=5", *extra),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out = config.parent / "model"
    wait_for(lambda: holder(out) is not None and (out / "train_state.pt").is_file(), proc)
    return proc, out


def refused(args, folder, pid):
    code, _, err = run(*args)
    assert code == 2, (code, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert f"{folder} is being written by pid {pid} (aiayn train " in lines[0], lines[0]
    return lines[0]


def stop(proc):
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, (proc.returncode, err)
    return out


def assert_one_run(folder, config):
    """The folder's config, weights and tokenizer are one run's: the experiment recorded is the
    config's, it loads and translates, and the metrics log counts up without a second run's
    lines interleaved."""
    meta = json.loads((folder / "config.json").read_text())
    want = seq2seq.experiment(str(config)).to_dict()
    assert {k: v for k, v in meta["experiment"].items() if k not in ("train", "data_content")} \
        == {k: v for k, v in want.items() if k not in ("out", "train")}
    assert meta["experiment"]["data_content"] == \
        content_of({k: v for k, v in want.items() if k != "out"})  # the data it read
    assert aiayn.load(folder).translate(["1 2 3"], beam=1)
    steps = [json.loads(line)["step"] for line in (folder / "metrics.jsonl").read_text().splitlines()
             if '"loss"' in line]
    assert steps == sorted(steps) and len(steps) == len(set(steps))
    assert not (folder / LOCK_FILE).exists()


@pytest.mark.slow
def test_two_trains_and_a_resume_against_one_folder(tmp_path):
    config = write_config(tmp_path, log_every=1)
    proc, out = start_training(config)
    try:
        before = sorted(p.name for p in out.iterdir())
        refused(["train", config], out, proc.pid)  # the same run twice
        refused(["train", config, "--resume"], out, proc.pid)  # --resume while it trains
        # a changed shape with --resume: refused by the lock, before its own checks clean up
        refused(["train", config, "--resume", "model.d_model=32"], out, proc.pid)
        refused(["average", "--model", out, "--last", "1", "--out", out], out, proc.pid)
        assert proc.poll() is None  # the live run goes on
        assert set(before) <= {p.name for p in out.iterdir()} | {".aiayn-lock"}
    finally:
        stop(proc)
    assert_one_run(out, config)
    # the run is over: --resume is its one writer now, and continues it
    code, _, err = run("train", config, "--resume", "train.max_steps=30")
    assert code == 0, err
    assert_one_run(out, config)


@pytest.mark.slow
def test_sigkill_of_the_holder_then_a_new_writer(tmp_path):
    config = write_config(tmp_path)
    proc, out = start_training(config)
    proc.kill()
    proc.wait()
    assert (out / LOCK_FILE).is_file() and not is_locked(out)  # the OS released it
    code, _, err = run("train", config, "--resume", "train.max_steps=25")
    assert code == 0, err
    assert_one_run(out, config)


@pytest.mark.slow
def test_export_and_average_have_one_writer_and_redo_an_interrupted_write(tmp_path):
    config = write_config(tmp_path, max_steps=10, save_every=5)
    assert run("train", config)[0] == 0
    model, target = tmp_path / "model", tmp_path / "hf"
    proc = hold(target)  # another export into the same folder, mid-way
    try:
        code, _, err = run("export", "hf", "--model", model, "--out", target)
        assert code == 2 and f"being written by pid {proc.pid}" in err
        assert err.count("\n") == 1 and "Traceback" not in err
    finally:
        proc.kill()
        proc.wait()
    # what an export killed half-way leaves: its marker, a file, a temporary file
    (target / INCOMPLETE_MARKER).touch()
    (target / "config.json").write_text("{")
    (target / ".model.safetensors.x1y2.tmp").write_text("")
    for args in (["export", "hf", "--model", model, "--out", target],
                 ["average", "--model", model, "--last", "2", "--out", tmp_path / "avg"]):
        code, _, err = run(*args)
        assert code == 0, err
    names = {p.name for p in target.iterdir()}
    assert "model.safetensors" in names and not names & {INCOMPLETE_MARKER, LOCK_FILE}
    assert not [n for n in names if n.endswith(".tmp")]
    json.loads((target / "config.json").read_text())
    assert aiayn.load(tmp_path / "avg").translate(["4 5"], beam=1) is not None
    code, _, err = run("export", "hf", "--model", model, "--out", target)
    assert code == 2 and "already exists and is not empty" in err


def test_the_lock_file_is_not_content_for_a_new_run(tmp_path):
    """A folder whose last writer was killed holds a lock file nobody holds: a new run may go in."""
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / LOCK_FILE).write_text(f"{os.getpid() + 10**6} aiayn train x\n")
    from aiayn.folder.checkpoint import check_out_folder

    check_out_folder(folder, resume=False)


@pytest.mark.parametrize("planted", ["link", "fifo", "folder"])
def test_a_planted_lock_file_is_refused_and_nothing_is_written_through_it(tmp_path, planted):
    """A model folder received from someone else may hold a link named .aiayn-lock to a file of
    the user's, or a FIFO: taking the lock truncated the link's target, and a FIFO hung. Now the
    lock opens no link and no special file; it names the path in one line and leaves it alone."""
    folder, victim = tmp_path / "model", tmp_path / "thesis.txt"
    folder.mkdir()
    victim.write_text("years of work\n")
    lock = folder / LOCK_FILE
    {"link": lambda: lock.symlink_to(victim), "fifo": lambda: os.mkfifo(lock),
     "folder": lambda: lock.mkdir()}[planted]()
    with pytest.raises(UserError, match=f"{LOCK_FILE}.*(symbolic link|not a regular file)"):
        with writer_lock(folder):
            pass
    assert victim.read_text() == "years of work\n"
    assert os.path.lexists(lock) and holder(folder) is None
    if planted != "link":
        with pytest.raises(UserError, match="not a regular file"):
            is_locked(folder)
    else:
        with pytest.raises(UserError, match="symbolic link"):
            is_locked(folder)
    assert victim.read_text() == "years of work\n"
