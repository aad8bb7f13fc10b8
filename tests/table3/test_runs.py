"""`aiayn table3` end to end on a tiny budget: every row trained and scored, the table and the
figure written, a cut row resumed where it stopped, tables run apart merged into one."""

import json
import os
import subprocess
import sys

import pytest

from aiayn.data.dates_numbers import dates_numbers
from aiayn.data.parallel import write_corpus_dir
from aiayn.errors import UserError
from aiayn.table3.merge import merge_tables
from aiayn.table3.rows import ROWS, select_rows
from aiayn.table3.runs import Plan, default_updates, read_results, row_experiment, run_table


def test_each_row_is_the_scales_recipe_with_the_rows_model_seed_and_budget(tmp_path):
    plan = Plan(corpus=str(tmp_path), overrides=["train.eval_every=7"])
    exp = row_experiment(ROWS["B-dk16"], 3, plan, tmp_path / "run")
    assert exp.source.endswith("table3-cpu.yaml") or "table3-cpu" in exp.source
    m = exp.model_config(vocab_size=100)
    assert (m.n_layers, m.d_model, m.d_ff, m.n_heads, m.d_k, m.d_v) == (3, 128, 512, 8, 4, 16)
    assert exp.train.seed == 3 and exp.train.max_steps == default_updates("cpu") == 600
    assert exp.train.average_width == 0 and exp.train.eval_every == 7
    assert exp.data.corpus_dir == str(tmp_path) and exp.data.vocab_size == 37_000 // 4
    assert row_experiment(ROWS["D-ls0.2"], 0, plan, tmp_path).train.label_smoothing == 0.2
    timed = Plan(minutes_per_row=2.0)
    assert row_experiment(ROWS["base"], 0, timed, tmp_path).train.max_minutes == 2.0
    assert row_experiment(ROWS["big"], 0, timed, tmp_path).train.max_minutes == 6.0  # 300K / 100K
    assert row_experiment(ROWS["big"], 0, Plan(updates=10), tmp_path).train.max_steps == 30
    assert default_updates("base") == 100_000
    paper = Plan(scale="base", corpus=str(tmp_path))
    exp = row_experiment(ROWS["C-d1024"], 0, paper, tmp_path)  # the paper's sizes and recipe
    m = exp.model_config(vocab_size=37_000)
    assert (m.n_layers, m.d_model, m.d_ff, m.n_heads, m.d_k, m.d_v) == (6, 1024, 2048, 8, 128, 128)
    assert (exp.train.max_steps, exp.train.warmup_steps, exp.train.accum_steps) == (100_000, 4000, 4)
    assert exp.data.vocab_size == 37_000 and exp.train.average_width == 0


@pytest.mark.parametrize("kw, message", [
    ({"updates": 5, "minutes_per_row": 1.0}, "not both"), ({"scale": "tiny"}, "--scale 'tiny'"),
    ({"seeds": 0}, "--seeds 0"), ({"seeds": 10**9}, "must be 1 .. 100"), ({"updates": 0}, "--updates 0"),
    ({"minutes_per_row": -1.0}, "must be positive")])
def test_a_plan_refuses_bad_settings(kw, message):
    with pytest.raises(UserError, match=message):
        Plan(**kw)


@pytest.mark.parametrize("args, message", [
    (["--corpus", "nope"], "neither a built-in corpus"),
    (["--rows", "Q"], "unknown row or group 'Q'"),
    (["--merge", "a", "--rows", "A"], "--merge takes only the folders and --out (not --rows)"),
    (["--merge", "nowhere"], "no table3-plan.json"),
    (["--updates", "3", "--minutes-per-row", "2"], "not allowed with argument"),
    (["--jobs", "0"], "must be a positive integer"),
    (["train.threads"], "expected KEY=VALUE")])
def test_the_command_refuses_bad_input_in_one_line(tmp_path, capsys, args, message):
    from aiayn.cli import main

    out = tmp_path / "t3"
    try:
        code = main(["table3", "--out", str(out), *args])
    except SystemExit as e:  # argparse's own refusals
        code = e.code
    assert code == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1, err
    assert not out.exists()  # nothing written


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    folder = tmp_path_factory.mktemp("corpus")
    write_corpus_dir(dates_numbers(n_train=300, n_valid=6, n_test=6), folder)
    return str(folder)


def _plan(corpus, groups=None, updates=2, **kw):
    return Plan(corpus=corpus, groups=groups, updates=updates, dev_pairs=4,
                overrides=["train.log_every=1", "data.valid_pairs=2"], **kw)


@pytest.mark.slow  # end-to-end: real training runs
def test_every_row_is_trained_scored_tabled_and_drawn(corpus, tmp_path):
    out = tmp_path / "t3"
    lines = []
    table = run_table(_plan(corpus), out, say=lines.append, jobs=2)
    default = [r.name for r in select_rows(None)]
    assert [r["row"] for r in table["rows"]] == default == [n for n in ROWS if n != "big"]
    for r in read_results(out):
        assert r["dev_pairs"] == 4 and r["steps"] == 2 and r["ppl"] > 1 and 0 <= r["bleu"] <= 100
        assert (out / r["folder"] / "model.safetensors").is_file()
        config = json.loads((out / r["folder"] / "config.json").read_text())
        assert config["model"]["d_model"] == r["settings"]["d_model"]
        assert config["experiment"]["train"]["average_width"] == 0  # Table 3: no averaging
    md = (out / "table3.md").read_text()
    assert all(f"| {name} |" in md for name in default)
    assert (out / "table3.png").stat().st_size > 10_000
    assert json.loads((out / "table3.json").read_text())["summary"] == table["summary"]
    done = [line for line in lines if "] " in line and "left" in line]
    assert len(done) == len(default)  # a progress line per row, with the time left
    # a second command on the same folder is refused without --resume; with it, nothing to do
    with pytest.raises(UserError, match="--resume"):
        run_table(_plan(corpus), out)
    again = []
    run_table(_plan(corpus), out, resume=True, say=again.append)
    assert not any("left" in line for line in again)
    with pytest.raises(UserError, match="updates=3 differs"):
        run_table(_plan(corpus, updates=3), out, resume=True)


@pytest.mark.slow  # end-to-end: real training runs
def test_a_cut_row_resumes_where_it_stopped_and_tables_run_apart_merge(corpus, tmp_path):
    out = tmp_path / "t3"
    run_table(_plan(corpus, "E-learned", updates=4), out, say=lambda m: None)
    # base cut at update 2 of 4: the same run, trained as far as a cut one got
    from aiayn.tasks.seq2seq import train
    folder = out / "rows" / "base" / "seed0"
    train(row_experiment(ROWS["base"], 0, _plan(corpus, updates=2), folder), say=lambda m: None)
    first = (folder / "metrics.jsonl").read_text().splitlines()[0]
    lines = []
    table = run_table(_plan(corpus, "base,E", updates=4), out, resume=True, say=lines.append)
    assert any("1 row run(s) already done" in line for line in lines)
    assert [r["row"] for r in table["rows"]] == ["base", "E-learned"]
    base = next(r for r in read_results(out) if r["row"] == "base")
    assert base["steps"] == 4
    metrics = (folder / "metrics.jsonl").read_text().splitlines()
    assert metrics[0] == first  # continued (a new run would have rewritten update 1's line)
    assert [json.loads(m)["step"] for m in metrics if "loss" in json.loads(m)] == [1, 2, 3, 4]
    assert "delta_bleu" in table["rows"][1]

    other = tmp_path / "t3-c"
    run_table(_plan(corpus, "C-N2", updates=4), other, say=lambda m: None)
    merged = merge_tables([out, other], tmp_path / "merged", say=lambda m: None)
    assert [r["row"] for r in merged["rows"]] == ["base", "C-N2", "E-learned"]
    assert "delta_bleu" in merged["rows"][1]  # C-N2's change, read from the other folder's base
    assert (tmp_path / "merged" / "table3.png").is_file()
    with pytest.raises(UserError, match="seed 0 is in both"):
        merge_tables([out, tmp_path / "merged"], tmp_path / "merged2")
    apart = tmp_path / "t3-other-budget"
    run_table(_plan(corpus, "C-N4", updates=2), apart, say=lambda m: None)
    with pytest.raises(UserError, match="updates"):
        merge_tables([out, apart], tmp_path / "merged3")


@pytest.mark.slow  # end-to-end: real training runs
def test_the_command_writes_the_table_and_refuses_to_overwrite_it(corpus, tmp_path):
    def aiayn(*args):
        return subprocess.run([sys.executable, "-m", "aiayn", "table3", *args],
                              capture_output=True, text=True)

    out = tmp_path / "t3"
    done = aiayn("--out", str(out), "--corpus", corpus, "--rows", "base,B-dk16", "--updates", "2",
                 "--dev-pairs", "3")
    assert done.returncode == 0, done.stderr
    assert "B-dk16 seed 0: dev BLEU" in done.stdout and "Spearman" in done.stdout
    assert (out / "table3.md").is_file() and (out / "table3.png").is_file()
    bad = aiayn("--out", str(out), "--corpus", corpus)
    assert bad.returncode == 2 and "already holds files; pass --resume" in bad.stderr
    assert "Traceback" not in bad.stderr and len(bad.stderr.strip().splitlines()) == 1


@pytest.mark.slow  # end-to-end: torchrun, real training runs
def test_under_torchrun_every_row_trains_on_all_processes_and_rank_0_alone_keeps_the_table(
        corpus, tmp_path):
    out = tmp_path / "t3"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           "-m", "aiayn", "table3", "--out", str(out), "--corpus", corpus, "--rows", "base,A-h1",
           "--updates", "2", "--dev-pairs", "3", "train.log_every=1", "train.precision=fp32"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    table = json.loads((out / "table3.json").read_text())
    assert [r["row"] for r in table["rows"]] == ["base", "A-h1"]
    assert len(list((out / "results").glob("*.json"))) == 2
    # rank 0 alone prints: one progress line per row, one summary
    assert done.stdout.count("base seed 0: dev BLEU") == 1
    assert done.stdout.count("A-h1 seed 0: dev BLEU") == 1 and done.stdout.count("table3: wrote") == 1
    for r in read_results(out):  # each row trained data-parallel: 2 updates, one metrics line each
        metrics = [json.loads(line) for line in
                   (out / r["folder"] / "metrics.jsonl").read_text().splitlines()]
        assert [m["step"] for m in metrics if "loss" in m] == [1, 2]
    bad = subprocess.run([*cmd[:-4], "--jobs", "2"], capture_output=True, text=True, env=env,
                         timeout=600)
    assert bad.returncode != 0 and "under torchrun every row trains on all 2 processes" in bad.stderr
    merge = subprocess.run([*cmd[:8], "--merge", str(out), "--out", str(tmp_path / "m")],
                           capture_output=True, text=True, env=env, timeout=600)
    assert merge.returncode != 0 and "--merge trains nothing" in merge.stderr
    assert not (tmp_path / "m").exists()


@pytest.mark.parametrize("text", ["{not json", "[1, 2]"])
def test_a_damaged_plan_file_is_refused_in_one_line_naming_it(tmp_path, text):
    out = tmp_path / "t3"
    out.mkdir()
    (out / "table3-plan.json").write_text(text)
    with pytest.raises(UserError, match=r"table3-plan\.json: (invalid JSON|not a table3 plan)"):
        run_table(Plan(corpus=str(tmp_path)), out, resume=True)
    with pytest.raises(UserError, match=r"table3-plan\.json: (invalid JSON|not a table3 plan)"):
        merge_tables([out], tmp_path / "merged")


def test_a_table_folder_has_one_writer(tmp_path):
    """Another process writing the folder (a table being run, a merge into it) holds its writer
    lock: a second command is refused in one line naming it, before anything is written."""
    import time

    from aiayn.folder.lock import LOCK_FILE

    out = tmp_path / "t3"
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time\n"
                               "from aiayn.folder.lock import writer_lock\n"
                               "with writer_lock(sys.argv[1]):\n    time.sleep(60)", str(out)])
    try:
        for _ in range(200):
            if (out / LOCK_FILE).is_file() and (out / LOCK_FILE).read_text():
                break
            time.sleep(0.1)
        with pytest.raises(UserError, match=f"is being written by pid {holder.pid}"):
            run_table(Plan(corpus=str(tmp_path)), out, resume=True)
        with pytest.raises(UserError, match="is being written"):
            merge_tables([tmp_path], out)
        assert not (out / "table3-plan.json").exists()
    finally:
        holder.kill()
        holder.wait()


def test_a_progress_line_is_one_write_so_the_rows_processes_do_not_run_lines_together(monkeypatch):
    from aiayn.cli.common import say
    from aiayn.table3.runs import _say_line

    class Stdout:  # records each write call, as the shared file sees them
        def __init__(self):
            self.writes = []

        def write(self, text):
            self.writes.append(text)

        def flush(self):
            pass

    for speak in (say, _say_line):
        out = Stdout()
        monkeypatch.setattr(sys, "stdout", out)
        speak("table3: C-N4 seed 0: 600 updates")
        monkeypatch.undo()
        assert out.writes == ["table3: C-N4 seed 0: 600 updates\n"]


def test_tables_of_other_data_under_one_corpus_path_neither_merge_nor_resume(tmp_path):
    """The plan names the corpus by its pairs' SHA-256 too: two tables trained on a folder of the
    same path but other pairs (another machine, a rewritten folder) are refused by --merge and
    by --resume, naming corpus_content; the same pairs under another path are the same data."""
    from aiayn.table3.plan import PLAN_FILE, check_plan
    from tests.table3.test_results import result_record

    corpus = tmp_path / "corpus"
    write_corpus_dir(dates_numbers(n_train=40, n_valid=4, n_test=4), corpus)
    first, second = tmp_path / "t1", tmp_path / "t2"
    first.mkdir()
    (first / PLAN_FILE).write_text(json.dumps(check_plan(first, _plan(str(corpus)), False)))
    write_corpus_dir(dates_numbers(n_train=40, n_valid=4, n_test=4, seed=1), corpus, force=True)
    with pytest.raises(UserError, match="corpus_content=.* differs from the table"):
        check_plan(first, _plan(str(corpus)), resume=True)
    second.mkdir()
    (second / PLAN_FILE).write_text(json.dumps(check_plan(second, _plan(str(corpus)), False)))
    for folder, row in ((first, "base"), (second, "C-N2")):
        (folder / "results").mkdir()
        (folder / "results" / f"{row}-seed0.json").write_text(json.dumps(result_record(row)))
    with pytest.raises(UserError, match="--merge: .*t2 has corpus_content=.*rows of one table"):
        merge_tables([first, second], tmp_path / "merged")
    assert not (tmp_path / "merged" / PLAN_FILE).exists()
    moved = tmp_path / "moved"
    corpus.rename(moved)  # the same pairs elsewhere: the same content
    assert check_plan(second, _plan(str(moved)), resume=True)["corpus_content"] == \
        json.loads((second / PLAN_FILE).read_text())["corpus_content"]
