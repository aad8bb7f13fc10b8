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


def test_data_debian_descriptions_names_the_files_it_was_made_from(tmp_path, capsys):
    from tests.data.test_debian_descriptions import ENGLISH, GERMAN

    i18n = tmp_path / "i18n"
    i18n.mkdir()
    (i18n / "Translation-en").write_text(ENGLISH, encoding="utf-8")
    (i18n / "Translation-de").write_text(GERMAN, encoding="utf-8")
    rc = main(["data", "debian-descriptions", "--lang", "de", "--i18n-dir", str(i18n),
               "--out", str(tmp_path / "dd")])
    assert rc == 0
    assert len(capsys.readouterr().out.strip().splitlines()) == 3
    stats = json.loads((tmp_path / "dd" / "stats.json").read_text(encoding="utf-8"))
    assert stats["corpus"] == "debian-descriptions" and stats["tgt_lang"] == "de"
    assert sum(s["pairs"] for s in stats["splits"].values()) == 9
    files = stats["params"]["files"]  # which of the mirror's versions: by sha256
    assert sorted(files) == ["Translation-de", "Translation-en"]
    assert all(len(digest) == 64 for digest in files.values())


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


def test_data_refuses_to_replace_a_corpus_unless_forced(tmp_path, capsys):
    """`data --out` over an existing corpus was silently replaced: now it is refused in one line,
    touching nothing, and --force replaces it."""
    out = tmp_path / "dn"
    args = ["data", "dates-numbers", "--out", str(out), "--n-valid", "5", "--seed", "1"]
    assert main([*args, "--n-train", "50", "--n-test", "5"]) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert main([*args, "--n-train", "20", "--n-test", "0", "--seed", "2"]) == 2
    err = capsys.readouterr().err
    assert "holds a corpus already" in err and "--force" in err and len(err.splitlines()) == 1
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert main([*args, "--n-train", "20", "--n-test", "0", "--force"]) == 0
    assert len((out / "train.src").read_text(encoding="utf-8").splitlines()) == 20
    assert (out / "test.src").read_text() == "" and (out / "valid.src").exists()
    assert json.loads((out / "stats.json").read_text())["splits"]["test"]["pairs"] == 0


def test_data_writes_no_model_folder_and_no_empty_training_split(tmp_path, capsys):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    (model / "model.safetensors").write_bytes(b"weights")
    assert main(["data", "dates-numbers", "--out", str(model), "--n-train", "5"]) == 2
    assert "is a model folder" in capsys.readouterr().err
    assert sorted(p.name for p in model.iterdir()) == ["config.json", "model.safetensors"]
    with pytest.raises(SystemExit) as e:  # argparse: exit 2, one line
        main(["data", "dates-numbers", "--out", str(tmp_path / "x"), "--n-train", "0"])
    assert e.value.code == 2 and "--n-train" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()
