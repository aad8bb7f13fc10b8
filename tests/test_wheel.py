"""The package as users install it: a wheel built from the checkout, installed into a fresh
virtual environment outside the checkout, trains the built-in `demo` config by name."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def installed_package_dirs() -> list[str]:
    """The site-packages folders the running interpreter imports from: the system Python's, or
    those of the virtualenv the tests run in (and its base's, when it was made with
    --system-site-packages)."""
    return [p for p in sys.path if Path(p).name in ("site-packages", "dist-packages")
            and Path(p).is_dir()]


def make_venv_seeing_installed_packages(venv: Path) -> Path:
    """A fresh venv that imports the running interpreter's installed packages (torch, ...) but
    gets aiayn only from what is installed into it; returns its python.

    Not `venv --system-site-packages`: made from inside a virtualenv, that sees the *base*
    interpreter's packages, not the virtualenv's (no torch there). The folders go into a .pth
    file as plain paths, so their own .pth files (an editable install of aiayn) are not run."""
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    (Path(site) / "outer-packages.pth").write_text("\n".join(installed_package_dirs()) + "\n")
    return python


def tracked_copy(dest: Path) -> Path:
    """The checkout's tracked files (and untracked, not ignored ones) copied to `dest`: the wheel
    is built from what the repository holds, not from a build/ folder an earlier build left
    (setuptools adds to build/lib and never removes a module deleted since)."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=ROOT, capture_output=True, check=True).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    return dest


@pytest.mark.slow
def test_wheel_installs_and_trains_a_built_in_config_by_name(tmp_path):
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(wheels), str(tracked_copy(tmp_path / "checkout"))],
                   check=True, cwd=tmp_path)
    wheel = next(wheels.glob("aiayn-*.whl"))
    venv = tmp_path / "venv"
    python = make_venv_seeing_installed_packages(venv)
    # --force-reinstall: the outer site-packages this venv sees hold this checkout's editable
    # aiayn of the same version, which pip could take as "already satisfied"
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                    "--force-reinstall", str(wheel)], check=True)
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
