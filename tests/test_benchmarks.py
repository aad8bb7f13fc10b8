"""The benchmark scripts stay runnable: each one loads (its imports resolve, including those
between benchmarks) and parses `--help`. They are not run here: they take minutes to hours."""

import runpy
import sys
from pathlib import Path

import pytest

BENCHMARKS = sorted((Path(__file__).resolve().parents[1] / "benchmarks").glob("*.py"))


def test_the_benchmarks_are_found():
    assert {p.name for p in BENCHMARKS} >= {"vs_fairseq.py", "decode_vs_fairseq.py"}


@pytest.mark.parametrize("path", BENCHMARKS, ids=lambda p: p.name)
def test_benchmark_loads_and_prints_its_help(path, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", [str(path), "--help"])
    monkeypatch.setattr(sys, "path", list(sys.path))  # the scripts prepend their folder
    module = runpy.run_path(str(path), run_name="benchmark_under_test")
    with pytest.raises(SystemExit) as stop:
        module["main"]()
    assert stop.value.code == 0
    assert "usage:" in capsys.readouterr().out
