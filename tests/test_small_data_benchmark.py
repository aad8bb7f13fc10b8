"""benchmarks/small_data.py's smoke mode end to end (slow tier): the aiayn systems train on a
tiny gettext cut, are scored on its test split, and the rerun skips the finished runs."""

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "small_data.py"


@pytest.mark.slow
def test_small_data_quick_runs_the_aiayn_systems_and_resumes(tmp_path):
    cmd = [sys.executable, str(SCRIPT), "--quick", "--work", str(tmp_path)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "aiayn systems only (fairseq-iwslt is not run)" in done.stdout
    for system in ("auto", "gettext-small", "paper-base"):
        assert f"| en-de 1,200 | {system} |" in done.stdout
        assert (tmp_path / "results" / f"de-1200-{system}-s0-0.2min.json").is_file()
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and "$ " not in again.stdout  # nothing trained again
