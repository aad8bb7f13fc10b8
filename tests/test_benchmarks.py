"""The benchmark scripts stay runnable: each one loads (its imports resolve, including those
between benchmarks) and parses `--help`. They are not run here (they take minutes to hours),
except vs_ctranslate2.py on a tiny model (slow tier)."""

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


@pytest.mark.slow
def test_vs_ctranslate2_runs_every_system_asked_for_on_a_tiny_model(tmp_path):
    """The CTranslate2 comparison end to end on a tiny trained model: every system it is asked
    for decodes the sentences (greedy, batch 64 and 1), timed and scored, and the table has
    their rows."""
    import json
    import subprocess

    from aiayn.cli import main
    from tests.builders import write_config

    assert main(["train", str(write_config(tmp_path, max_steps=30)), "--out",
                 str(tmp_path / "m")]) == 0
    systems = ["aiayn fp32", "aiayn --engine ctranslate2 fp32 ct2-search", "ctranslate2 fp32 2x1"]
    done = subprocess.run(
        [sys.executable, str(FOLDER / "vs_ctranslate2.py"), "--model", str(tmp_path / "m"),
         "--src", str(tmp_path / "valid.src"), "--ref", str(tmp_path / "valid.tgt"),
         "--sentences", "8", "--latency-sentences", "2", "--repeats", "1", "--searches", "greedy",
         "--json", str(tmp_path / "rows.json"), "--systems", *systems],
        capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    rows = json.loads((tmp_path / "rows.json").read_text())
    assert sorted((r["system"], r["batch"]) for r in rows) == sorted(
        (s, b) for s in systems for b in (64, 1))
    assert all(r["median_s"] > 0 and 0 <= r["bleu"] <= 100 and r["sentences"] == (8 if r["batch"] == 64 else 2)
               for r in rows)
    assert "| greedy | 64 | ctranslate2 fp32 2x1 |" in done.stdout


def test_collate_speed_times_both_ways_on_the_same_batches(monkeypatch, capsys):
    monkeypatch.setattr(sys, "path", list(sys.path))
    module = runpy.run_path(str(FOLDER / "collate_speed.py"), run_name="benchmark_under_test")
    out = module["main"](["--rounds", "2", "--pairs", "400", "--batches", "2", "--sizes", "300"])
    assert set(out) == {300} and len(out[300]["ratios"]) == 2
    assert all(v > 0 for v in out[300]["list"] + out[300]["packed"])
    assert "list / packed" in capsys.readouterr().out
