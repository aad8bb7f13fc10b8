"""The benchmark scripts stay runnable: each one loads (its imports resolve, including those
between benchmarks) and parses `--help`. They are not run here: they take minutes to hours."""

import runpy
import sys
from pathlib import Path

import pytest

FOLDER = Path(__file__).resolve().parents[1] / "benchmarks"
BENCHMARKS = sorted(FOLDER.glob("*.py"))


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


def test_vs_fairseq_reports_per_seed_differences_with_their_standard_error(monkeypatch):
    """--updates tables end with aiayn minus fairseq per seed, their mean and standard error."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    module = runpy.run_path(str(FOLDER / "vs_fairseq.py"), run_name="under_test")

    def scores(bleu, chrf, nll):
        return {"bleu": bleu, "chrf": chrf, "ref_nll": nll, "hyp_words": 5.0}

    results = {0: {"aiayn": {400: scores(11.0, 23.0, 52.0)}, "fairseq": {400: scores(12.0, 22.0, 54.0)}},
               1: {"aiayn": {400: scores(13.0, 24.0, 51.0)}, "fairseq": {400: scores(10.0, 21.0, 54.0)}}}
    text = module["updates_table"](results)
    # BLEU -1 and +3: mean +1, standard deviation 2.83, standard error 2.00; chrF +1 and +3:
    # mean +2, standard error 1.00; NLL -2 and -3: mean -2.5, standard error 0.50
    assert "| 400 | -1.00, +3.00: +1.00 (2.00) | +1.00, +3.00: +2.00 (1.00) | " \
           "-2.00, -3.00: -2.50 (0.50) |" in text
    assert "| 400 | **mean** | 12.0 / 23.5 | 11.0 / 21.5 |" in text
    one = module["updates_table"]({0: results[0]})  # one seed: no spread to report
    assert "standard error" not in one
