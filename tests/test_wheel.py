"""The package as users install it: a wheel built from the checkout, installed into a fresh
virtual environment outside the checkout, trains the built-in `demo` config by name."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_wheel_installs_and_trains_a_built_in_config_by_name(tmp_path):
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(wheels), str(ROOT)], check=True, cwd=tmp_path)
    wheel = next(wheels.glob("aiayn-*.whl"))
    venv = tmp_path / "venv"
    # The venv sees this machine's packages (torch, ...) but gets aiayn only from the wheel.
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                    str(wheel)], check=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    run = tmp_path / "elsewhere"
    run.mkdir()
    where = subprocess.run([str(python), "-c", "import aiayn; print(aiayn.__file__)"], cwd=run,
                           env=env, capture_output=True, text=True, check=True).stdout
    assert str(venv) in where and str(ROOT) not in where
    listed = subprocess.run([str(venv / "bin" / "aiayn"), "configs"], cwd=run, env=env,
                            capture_output=True, text=True, check=True).stdout
    assert "demo" in listed and "lm-char" in listed
    done = subprocess.run([str(venv / "bin" / "aiayn"), "train", "demo", "train.max_steps=5",
                           "train.progress=false", "train.tensorboard=false",
                           "data.valid_pairs=10", "--out", "m"],
                          cwd=run, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "trained 5 steps" in done.stdout
    assert (run / "m" / "model.safetensors").is_file()
