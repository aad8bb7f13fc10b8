"""A damaged result file (results/ROW-seedK.json: a value of the wrong type, a missing key, a list
instead of an object, nesting too deep) is refused when read, in one line naming the file and the
key and telling the user to delete it to run that row again: by --resume, by --merge and by
read_results, never a traceback from building the table (issue 37)."""

import json

import pytest

from aiayn.cli import main
from aiayn.data.dates_numbers import dates_numbers
from aiayn.data.parallel import write_corpus_dir
from aiayn.errors import UserError
from aiayn.table3.plan import PLAN_FILE, Plan, check_plan
from aiayn.table3.rows import ROWS, settings
from aiayn.table3.runs import read_results


def result_record(row: str = "base", seed: int = 0, **changes) -> dict:
    """A result record as runs._score_row writes it (with base's settings)."""
    return {"row": row, "seed": seed, "settings": settings(ROWS["base"], "cpu", 2), "bleu": 1.5,
            "chrf": 10.0, "ppl": 50.0, "nll": 3.9, "bleu_signature": "nrefs:1", "dev_pairs": 3,
            "params": 1_000_000, "params_paper_size": 63_000_000, "steps": 2,
            "train_seconds": 1.0, "eval_seconds": 1.0, "seconds": 2.0, "device": "cpu",
            "folder": f"rows/{row}/seed{seed}", **changes}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    folder = tmp_path_factory.mktemp("corpus")
    write_corpus_dir(dates_numbers(n_train=40, n_valid=4, n_test=4), folder)
    return str(folder)


def table_folder(tmp_path, corpus, record_text: str):
    """A table folder with its plan and one result file holding `record_text`."""
    out = tmp_path / "t3"
    out.mkdir()
    plan = Plan(corpus=corpus, groups="base", updates=2)
    (out / PLAN_FILE).write_text(json.dumps(check_plan(out, plan, resume=False)))
    (out / "results").mkdir()
    (out / "results" / "base-seed0.json").write_text(record_text)
    return out, plan


DAMAGED = [
    (json.dumps(result_record(bleu="x")), r"bleu=\"x\" must be a finite number"),
    (json.dumps(result_record(bleu=float("nan"))), "bleu=NaN must be a finite number"),
    (json.dumps({k: v for k, v in result_record().items() if k != "ppl"}), "no 'ppl'"),
    (json.dumps(result_record(seed="0")), r"seed=\"0\" must be a whole number"),
    (json.dumps(result_record(seed=-1)), "seed=-1 must be a whole number >= 0"),
    (json.dumps(result_record(row="Z-nope")), r"row=\"Z-nope\" must be a row of Table 3"),
    (json.dumps(result_record(settings={"N": 3})), "settings=.* must be an object with the columns"),
    (json.dumps(result_record(steps=None)), "steps=null must be a finite number"),
    (json.dumps(result_record(folder=7)), "folder=7 must be a path"),
    (json.dumps(result_record(dev_pairs="3")), "dev_pairs=\"3\" must be a whole number"),
    (json.dumps([result_record()]), "not a table3 result \\(a JSON object\\)"),
    ("[" * 100_000 + "]" * 100_000, "nested deeper than 100 levels"),
    ("{not json", "unreadable result"),
]


IDS = ["bleu-text", "bleu-nan", "no-ppl", "seed-text", "seed-negative", "unknown-row",
       "settings-short", "steps-null", "folder-number", "dev-pairs-text", "a-list", "deep",
       "not-json"]


@pytest.mark.parametrize("text, message", DAMAGED, ids=IDS)
def test_a_damaged_result_is_refused_naming_the_file_and_the_key(tmp_path, corpus, text, message):
    out, _ = table_folder(tmp_path, corpus, text)
    with pytest.raises(UserError, match=message) as e:
        read_results(out)
    assert str(e.value).startswith(str(out / "results" / "base-seed0.json"))
    assert str(e.value).endswith("; delete the file to run that row again (aiayn table3 --resume)")


def one_line_refusal(capsys, *argv) -> str:
    capsys.readouterr()
    code = main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("text, message", [DAMAGED[0], DAMAGED[2], DAMAGED[10]],
                         ids=[IDS[0], IDS[2], IDS[10]])
def test_resume_and_merge_refuse_a_damaged_result_in_one_line(tmp_path, corpus, capsys, text,
                                                              message):
    out, plan = table_folder(tmp_path, corpus, text)
    err = one_line_refusal(capsys, "table3", "--out", out, "--corpus", corpus, "--rows", "base",
                           "--updates", "2", "--jobs", "1", "--resume")
    assert "base-seed0.json" in err and "delete the file" in err
    assert not (out / "rows").exists()  # refused before any row was trained
    merged = tmp_path / "merged"
    err = one_line_refusal(capsys, "table3", "--merge", out, "--out", merged)
    assert "base-seed0.json" in err and "delete the file" in err
    assert not (merged / PLAN_FILE).exists()


def test_a_sound_result_is_read_as_written(tmp_path, corpus):
    record = result_record(params_paper_size=None)  # optional, may be null
    out, _ = table_folder(tmp_path, corpus, json.dumps(record))
    assert read_results(out) == [record]
