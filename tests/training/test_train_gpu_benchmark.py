"""benchmarks/train_gpu.py runs end to end in its CPU smoke mode: the real `aiayn train` path,
the bare loop and nn.Transformer, each with its tokens/s, MFU and first-update time, and with
--profile the profiler's tables of each."""

import runpy
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "train_gpu.py"


@pytest.mark.slow
def test_the_gpu_benchmarks_smoke_mode_runs_every_system_on_the_cpu(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sys, "path", list(sys.path))  # the script prepends its folder
    module = runpy.run_path(str(SCRIPT), run_name="benchmark_under_test")
    rows = module["main"](["--device", "cpu", "--quick", "--json", str(tmp_path / "rows.json"),
                           "--profile", str(tmp_path / "profile.txt")])
    assert [r["system"] for r in rows] == ["aiayn train", "bare loop", "nn.Transformer"]
    for r in rows:
        assert r["tokens_per_s"] > 0 and 0 < r["mfu"] and r["first_update_s"] > 0
        assert r["memory_gib"] is None  # a GPU's figure only
    assert rows[0]["params"] == rows[1]["params"]  # the same model size as the real path's
    out = capsys.readouterr().out
    assert "| aiayn train |" in out and "aiayn train / bare loop:" in out
    assert (tmp_path / "rows.json").is_file()
    profile = (tmp_path / "profile.txt").read_text()
    heads = [line for line in profile.splitlines() if line.startswith("== ")]
    assert [h.split(":")[0] for h in heads] == ["== aiayn train", "== bare loop", "== nn.Transformer"]
    assert all("5 updates" in h and "top-level operators per update" in h for h in heads)
    assert profile.count("aten::mm") >= 3  # each system's table lists its matrix products
