"""benchmarks/small_data.py's smoke mode end to end (slow tier): the aiayn systems train on a
tiny gettext cut, are scored on its test split, and the rerun skips the finished runs."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "small_data.py"


@pytest.fixture(scope="module")
def small_data():
    spec = importlib.util.spec_from_file_location("small_data", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_ablations_run_only_the_knobs_where_auto_differs_from_gettext_small(small_data, tmp_path):
    from aiayn.data.parallel import write_corpus_dir
    from aiayn.training.auto_recipe import Budget, facts_of, plan

    words = "the a file is not found open close read write new old".split()
    pairs = [(" ".join(words[(i + j) % len(words)] for j in range(5)),
              " ".join(words[(i * 7 + j) % len(words)] for j in range(6))) for i in range(6000)]
    write_corpus_dir({"train": pairs, "valid": pairs[:10], "test": pairs[:10]}, tmp_path / "c")
    args = SimpleNamespace(minutes=60.0, threads=2, knobs=None)
    knobs = small_data.swaps_to_run(tmp_path / "c", args)
    recipe = plan(facts_of(pairs), Budget(60.0, "cpu", 2))
    assert recipe.data["vocab_size"] != 8000 and "vocab" in knobs  # 2k-ish BPE at 6k pairs
    assert recipe.train["max_tokens"] != 4000 and "batch" in knobs
    assert "dropout" in knobs  # many passes: more than gettext-small's 0.1
    assert set(knobs) <= set(small_data.SWAPS)
    for knob in set(small_data.SWAPS) - set(knobs):  # skipped = auto chose that value already
        assert small_data.SWAPS[knob][1](recipe)
    args.knobs = ["dropout", "shape"]  # --knobs: only those asked for, still only where auto differs
    assert small_data.swaps_to_run(tmp_path / "c", args) == [
        k for k in knobs if k in ("dropout", "shape")]
    # another value of a knob: run when named, unless it is auto's own choice
    other = next(k for k, (_, same) in small_data.VARIANTS.items() if not same(recipe))
    args.knobs = list(small_data.VARIANTS)
    assert other in small_data.swaps_to_run(tmp_path / "c", args)
    assert not set(small_data.swaps_to_run(tmp_path / "c", args)) & set(small_data.SWAPS)


def test_the_ablation_table_gives_each_knob_its_change_in_dev_bleu(small_data):
    results = [{"lang": "de", "size": 5000, "system": "auto", "seed": s, "dev_bleu": b}
               for s, b in ((0, 20.0), (1, 22.0))]
    results += [{"lang": "de", "size": 5000, "system": "auto-swap-vocab", "seed": 0,
                 "dev_bleu": 17.5}, {"lang": "de", "size": 5000, "system": "fairseq-iwslt",
                                     "seed": 0, "dev_bleu": 5.0}]
    table = small_data.ablation_table(results).removesuffix(small_data.NOT_RUN)
    row = table.splitlines()[-1]
    assert row.startswith("| en-de 5,000 | 21.0 (20.0, 22.0) | -3.5 |")
    assert row.count("·") == len(small_data.SWAPS) - 1
    # a variant (another value of a knob) gets a column of its own only once it has run
    assert "dropout 0.2" not in small_data.ablation_table(results)
    results.append({"lang": "de", "size": 5000, "system": "auto-swap-dropout-0.2", "seed": 0,
                    "dev_bleu": 23.0})
    table = small_data.ablation_table(results).removesuffix(small_data.NOT_RUN).splitlines()
    assert table[0].endswith("| dropout 0.2 |") and table[-1].endswith("| +2.0 |")


def test_a_second_domain_gets_rows_of_its_own(small_data):
    results = [{"lang": "de", "size": 5000, "system": "auto", "seed": 0, "bleu": 30.0,
                "chrf": 50.0, "settings": "s"},
               {"lang": "de", "size": 5000, "system": "auto", "seed": 0, "bleu": 20.0,
                "chrf": 40.0, "settings": "s", "domain": "debian"}]
    rows = small_data.table(results).splitlines()[2:]
    assert rows == ["| en-de 5,000 | auto | 30.0 (30.0) | 50.0 | s |",
                    "| en-de 5,000 (debian) | auto | 20.0 (20.0) | 40.0 | s |"]


def test_the_mixed_corpus_holds_no_held_out_source_of_either_domain(small_data):
    gettext = {"train": [("Open", "Öffnen"), ("Save", "Speichern"), ("Quit", "Beenden")],
               "valid": [("Close", "Schließen"), ("Help", "Hilfe")],
               "test": [("Print", "Drucken")]}
    debian = {"train": [("A tool.", "Ein Werkzeug."), ("Print", "Drucke"), ("Help", "Hilfe")],
              "valid": [("Fast.", "Schnell.")],
              "test": [("Small.", "Klein."), ("Save", "Sichern")]}
    splits, parts = small_data.mixed_splits(gettext, debian)
    # "Save" is a Debian test source, "Print" a gettext test source, "Help" a gettext dev one
    assert splits["train"] == [("Open", "Öffnen"), ("Quit", "Beenden"), ("A tool.", "Ein Werkzeug.")]
    assert splits["valid"] == [("Close", "Schließen"), ("Fast.", "Schnell."), ("Help", "Hilfe")]
    assert splits["test"] == [("Print", "Drucken"), ("Small.", "Klein."), ("Save", "Sichern")]
    assert parts == [["gettext", 1], ["debian-descriptions", 2]]
    # a short test (--quick) takes half of it from each domain
    splits, parts = small_data.mixed_splits(gettext, debian, test_lines=2)
    assert splits["test"] == [("Print", "Drucken"), ("Small.", "Klein.")]
    assert parts == [["gettext", 1], ["debian-descriptions", 1]]


def test_each_domain_of_a_mixed_test_split_is_scored_alone(small_data):
    refs = ["das ist ein Haus", "ein kleines Haus hier", "es ist gut so", "alles ist gut hier"]
    hyps = ["das ist ein Haus", "ein kleines Haus hier", "nichts", "nichts"]
    scores = small_data.by_part(hyps, refs, [["gettext", 2], ["debian-descriptions", 2]])
    assert scores["gettext"][0] == 100.0 and scores["debian-descriptions"][0] == 0.0
    with pytest.raises(AssertionError):  # parts that do not cover the split are an error
        small_data.by_part(hyps, refs, [["gettext", 2]])
    results = [{"lang": "de", "size": 80000, "system": "auto", "seed": s, "bleu": b,
                "chrf": 50.0, "settings": "s", "domain": "both",
                "test_by_domain": {"gettext": [b + 10, 60.0], "debian-descriptions": [b - 10, 40.0]}}
               for s, b in ((0, 30.0), (1, 32.0))]
    assert small_data.table(results).splitlines()[2] == (
        "| en-de 80,000 (both) | auto | 31.0 (30.0, 32.0) | 50.0 | gettext: 41.0 / 60.0, "
        "debian-descriptions: 21.0 / 40.0 | s |")


def test_the_averages_table_puts_each_run_beside_its_last_checkpoints_averaged(small_data):
    results = [{"lang": "de", "size": 5000, "system": "auto", "seed": 0, "dev_bleu": 20.0,
                "dev_chrf": 40.0, "dev_last2": [21.04, 41.0]},
               {"lang": "de", "size": 5000, "system": "gettext-small", "seed": 0,
                "dev_bleu": 18.0, "dev_chrf": 38.0},  # none averaged: no row
               {"lang": "de", "size": 5000, "system": "auto", "seed": 1, "dev_bleu": 19.0,
                "dev_chrf": 39.0, "dev_last5": [19.5, 39.25]}]
    rows = small_data.averages_table(results, [2, 5]).splitlines()
    assert rows[0].endswith("| last 2 checkpoints averaged | last 5 checkpoints averaged |")
    assert rows[2:] == ["| en-de 5,000 | auto | 0 | 20.0 / 40.0 | 21.0 / 41.0 | · |",
                        "| en-de 5,000 | auto | 1 | 19.0 / 39.0 | · | 19.5 / 39.2 |"]


@pytest.mark.slow
def test_small_data_quick_runs_the_aiayn_systems_and_resumes(small_data, tmp_path):
    cmd = [sys.executable, str(SCRIPT), "--quick", "--work", str(tmp_path)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "aiayn systems only (fairseq-iwslt is not run)" in done.stdout
    for system in ("auto", "gettext-small", "paper-base"):
        assert f"| en-de 1,200 | {system} |" in done.stdout
        result = json.loads((tmp_path / "results" / f"de-1200-{system}-s0-1min.json").read_text())
        assert {"bleu", "chrf", "dev_bleu", "dev_chrf"} <= set(result)  # test and dev scored
        # the model by its budget too: a shorter look never deletes a longer run's model (auto:
        # one model, or an ensemble in one folder where its probe saw 100 passes in the minute)
        model = tmp_path / "models" / f"de-1200-{system}-s0-1min"
        assert (model / "config.json").is_file() or \
            (system == "auto" and (model / "ensemble.json").is_file())
        if system == "auto":  # its settings line says whether it chose joins of two pairs
            import yaml

            first = model / (small_data._members(model) or [""])[0]
            concat = yaml.safe_load((first / "auto.yaml").read_text())["data"].get("concat")
            assert ("joins" in result["settings"]) == bool(concat), result["settings"]
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and "$ " not in again.stdout  # nothing trained again
    # --average-last on the finished runs: averaged and scored on the dev split, not trained
    auto = tmp_path / "results" / "de-1200-auto-s0-1min.json"
    folder = tmp_path / "models" / "de-1200-auto-s0-1min"
    saved = min(len(list((folder / member / "checkpoints").iterdir()))
                for member in small_data._members(folder) or [""])
    assert saved >= 2  # auto saves every 1/10 of its expected updates
    averaged = subprocess.run([*cmd, "--average-last", "2", str(saved + 1)], capture_output=True,
                              text=True, timeout=600)
    assert averaged.returncode == 0, averaged.stderr[-3000:]
    assert " train " not in averaged.stdout and "aiayn average" in averaged.stdout
    bleu, chrf = json.loads(auto.read_text())["dev_last2"]
    assert 0 <= bleu <= 100 and 0 < chrf <= 100
    assert f"dev_last{saved + 1}" not in json.loads(auto.read_text())  # too few: left out
    row = next(line for line in averaged.stdout.splitlines()
               if line.startswith("| en-de 1,200 | auto | 0 |"))
    assert row.endswith(f"| {bleu:.1f} / {chrf:.1f} | · |")
    assert not list((tmp_path / "models").glob("*-last*"))  # the averaged copies are removed


def test_auto_results_of_an_older_rule_are_set_aside_and_the_others_kept(small_data, tmp_path):
    import json

    results = tmp_path / "results"
    results.mkdir()
    files = {}
    for name, rule in (("auto-old", None), ("auto-new", small_data.RULE), ("gettext-small", None)):
        files[name] = results / f"de-5000-{name}-s0-60min.json"
        files[name].write_text(json.dumps({"bleu": 1.0, **({"rule": rule} if rule else {})}))
        small_data.supersede(files[name], name)
    assert not files["auto-old"].exists()  # rule 1 (no "rule" key): moved, to run again
    moved = results / "superseded" / "de-5000-auto-old-s0-60min-rule1.json"
    assert json.loads(moved.read_text()) == {"bleu": 1.0}
    assert files["auto-new"].exists() and files["gettext-small"].exists()


def test_a_model_folder_says_how_many_updates_it_made_and_auto_planned(small_data, tmp_path):
    import json

    (tmp_path / "metrics.jsonl").write_text(
        '{"step": 50, "loss": 3.0}\n{"step": 100, "valid_bleu": 2.0}\n{"step": 100}\n')
    (tmp_path / "config.json").write_text(json.dumps({"auto": {"planned_updates": 90}}))
    assert small_data.made_and_planned(tmp_path) == {"updates": 100, "planned_updates": 90}
    assert small_data.made_and_planned(tmp_path / "none") == {}
    # an ensemble's folder: its models' counts summed
    for member, (made, planned) in {"member-1": (100, 90), "member-2": (80, 90)}.items():
        (tmp_path / "e" / member).mkdir(parents=True)
        (tmp_path / "e" / member / "metrics.jsonl").write_text(f'{{"step": {made}}}\n')
        (tmp_path / "e" / member / "config.json").write_text(
            json.dumps({"auto": {"planned_updates": planned}}))
    (tmp_path / "e" / "ensemble.json").write_text('{"members": ["member-1", "member-2"]}')
    assert small_data.made_and_planned(tmp_path / "e") == {"updates": 180, "planned_updates": 180}


def test_a_fairseq_run_says_how_many_updates_it_made_from_its_training_log(small_data, tmp_path):
    out = tmp_path / "de-5000-fairseq-iwslt-s0-60min"
    out.mkdir()
    (out / "checkpoint_last.pt").write_bytes(b"")
    log = tmp_path / f"{out.name}.log"
    log.write_text(  # fairseq 0.12's --log-format json lines: per interval, then the epoch's
        '2026-11-29 20:26:09 | INFO | train_inner | {"epoch": 14, "num_updates": "400", '
        '"lr": "5e-05"}\n2026-11-29 20:27:06 | INFO | train | {"epoch": 14, '
        '"train_num_updates": "406", "train_wall": "3605"}\n'
        "2026-11-29 20:27:06 | INFO | fairseq_cli.train | done training in 3603.6 seconds\n")
    assert small_data.made_and_planned(out) == {"updates": 406}
    log.write_text("2026-11-29 19:27:01 | INFO | fairseq_cli.train | started\n")
    assert small_data.made_and_planned(out) == {}
