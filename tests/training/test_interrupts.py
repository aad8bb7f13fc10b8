"""Interrupting a training command: Ctrl-C while it starts is a clean exit; SIGKILL at random
points, then --resume, ends with the weights of an uninterrupted run."""

import json
import time

import pytest

from aiayn.cli import main
from tests.builders import write_config

pytestmark = pytest.mark.slow  # end-to-end: real processes of the CLI

@pytest.mark.parametrize("delay", [0.3, 1.0, 2.5])
def test_ctrl_c_while_starting_is_a_clean_exit(tmp_path, delay):
    """(Before ~0.1 s the interpreter itself is still starting, which aiayn cannot reach.)"""
    import signal
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-m", "aiayn", "train", "demo", "train.max_steps=3",
                             "--out", str(tmp_path / "m")], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert b"Traceback" not in err, err.decode()
    assert proc.returncode in (0, 130, -signal.SIGINT), (proc.returncode, err.decode())



def test_sigkill_sweep_then_resume_equals_an_uninterrupted_run(tmp_path):
    """SIGKILL at random points (seeded), then what a user would do next (--resume when there is
    a train state, a fresh start otherwise), until the run ends: the weights equal those of an
    uninterrupted run, bit for bit, and no temporary file is left behind."""
    import random
    import signal
    import subprocess
    import sys

    from safetensors.torch import load_file

    config = write_config(tmp_path, max_steps=40, save_every=3, log_every=1)
    assert main(["train", str(config), "--out", str(tmp_path / "ref")]) == 0
    out = tmp_path / "killed"
    rng = random.Random(0)

    def command():
        resume = ["--resume"] if (out / "train_state.pt").exists() else []
        return [sys.executable, "-m", "aiayn", "train", str(config), "--out", str(out), *resume]

    def last_step() -> int:  # the latest training step the run has logged (log_every=1)
        try:
            rows = (out / "metrics.jsonl").read_text().splitlines()
        except FileNotFoundError:
            return 0
        return max([json.loads(r)["step"] for r in rows if r.endswith("}")] or [0])

    kills = 0
    for _ in range(4):
        # a kill point by progress, not by the clock (a fast machine runs all 40 steps in ~1 s):
        # a few steps past where the run starts, plus up to 30 ms more
        target = last_step() + rng.randint(1, 10)
        proc = subprocess.Popen(command(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        while proc.poll() is None and last_step() < target:
            time.sleep(0.002)
        time.sleep(rng.uniform(0.0, 0.03))
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            kills += 1
        proc.communicate(timeout=120)
    finish = subprocess.run(command(), capture_output=True, timeout=300)
    assert finish.returncode == 0, finish.stderr.decode()
    assert kills >= 3  # the sweep did interrupt the run (the 4th round may reach step 40)
    assert not [p for p in out.rglob("*") if p.name.endswith(".tmp")]
    want, got = load_file(tmp_path / "ref" / "model.safetensors"), load_file(out / "model.safetensors")
    assert want.keys() == got.keys()
    assert all((want[k] == got[k]).all() for k in want)

