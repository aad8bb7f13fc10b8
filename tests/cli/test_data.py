"""`aiayn data ...`: files, stats and summaries; errors as one line on stderr."""

import json
import subprocess
import sys

import pytest

from aiayn.cli import main
from tests.data.test_corpora import write_mo


def test_data_dates_numbers(tmp_path, capsys):
    out = tmp_path / "dn"
    rc = main(["data", "dates-numbers", "--out", str(out), "--n-train", "200", "--n-valid", "20",
               "--n-test", "30", "--seed", "1"])
    assert rc == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert [line.split(":")[0] for line in lines] == ["train", "valid", "test"]
    assert lines[0].startswith("train: 200 pairs")
    for split, n in (("train", 200), ("valid", 20), ("test", 30)):
        src = (out / f"{split}.src").read_text(encoding="utf-8").splitlines()
        tgt = (out / f"{split}.tgt").read_text(encoding="utf-8").splitlines()
        assert len(src) == len(tgt) == n
    stats = json.loads((out / "stats.json").read_text(encoding="utf-8"))
    assert stats["corpus"] == "dates-numbers" and stats["src_lang"] == "en"
    assert stats["splits"]["test"]["pairs"] == 30 and stats["params"]["seed"] == 1


def test_data_gettext(tmp_path, capsys):
    locale = tmp_path / "locale"
    write_mo(locale / "de" / "LC_MESSAGES" / "app.mo",
             {f"Message number {i}": f"Nachricht Nummer {i}" for i in range(50)})
    rc = main(["data", "gettext", "--lang", "de", "--locale-dir", str(locale),
               "--out", str(tmp_path / "gt")])
    assert rc == 0
    assert len(capsys.readouterr().out.strip().splitlines()) == 3
    stats = json.loads((tmp_path / "gt" / "stats.json").read_text(encoding="utf-8"))
    assert sum(s["pairs"] for s in stats["splits"].values()) == 50
    assert stats["tgt_lang"] == "de"


def test_data_error_is_one_line(tmp_path, capsys):
    rc = main(["data", "gettext", "--lang", "xx", "--locale-dir", str(tmp_path),
               "--out", str(tmp_path / "o")])
    assert rc == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(tmp_path / "xx") in err


@pytest.mark.slow
def test_data_error_in_a_subprocess(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "aiayn", "data", "gettext", "--lang", "xx",
         "--locale-dir", str(tmp_path), "--out", str(tmp_path / "o")],
        capture_output=True, text=True)
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert proc.stderr.startswith("aiayn: error:") and "LC_MESSAGES" in proc.stderr


def test_data_stdlib_docstrings(tmp_path, capsys):
    from tests.data.test_stdlib_docstrings import _fake_stdlib

    _fake_stdlib(tmp_path / "lib")
    rc = main(["data", "stdlib-docstrings", "--stdlib-dir", str(tmp_path / "lib"),
               "--out", str(tmp_path / "sd")])
    assert rc == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert [line.split(":")[0] for line in lines] == ["train", "valid", "test"]
    assert "body words" in lines[0] and "summary words" in lines[0]
    stats = json.loads((tmp_path / "sd" / "stats.json").read_text(encoding="utf-8"))
    assert stats["corpus"] == "stdlib-docstrings" and stats["params"]["python"]
    summaries = (tmp_path / "sd" / "train.tgt").read_text(encoding="utf-8").splitlines()
    assert len(summaries) == stats["splits"]["train"]["pairs"] > 0
