"""Table 3's walk made short (issue 39, item 3): the processes joined once per table, the rows'
device read without building an experiment, the time estimate from one parameter count per
model shape, and each row scored on the model and the dev pairs its training left in memory,
with the scores a reload of its folder gives."""

import pytest

from aiayn import sizes
from aiayn.data.dates_numbers import dates_numbers
from aiayn.data.parallel import write_corpus_dir
from aiayn.table3 import plan as plan_module
from aiayn.table3 import rows as rows_module
from aiayn.table3 import runs
from aiayn.table3.rows import ROWS, SCALES, count_parameters, model_config, select_rows, settings
from aiayn.table3.runs import Plan, dev_pairs, evaluate_run, row_experiment, run_table


def counted(monkeypatch, owner, name):
    """Patch owner.name with a wrapper that counts its calls; the list of calls' arguments."""
    calls = []
    original = getattr(owner, name)

    def wrapper(*args, **kwargs):
        calls.append(args)
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, wrapper)
    return calls


@pytest.mark.parametrize("overrides", [[], ["train.device=cpu"], ["train.threads=2"]])
@pytest.mark.parametrize("scale", ["cpu", "base"])
def test_the_rows_device_is_read_from_the_config_without_building_an_experiment(
        monkeypatch, tmp_path, scale, overrides):
    plan = Plan(scale=scale, corpus=str(tmp_path), overrides=overrides)
    built = row_experiment(ROWS["base"], 0, plan, tmp_path).train.device
    from aiayn.config import experiment

    def refuse(*_, **__):
        raise AssertionError("an experiment was built to read train.device")

    monkeypatch.setattr(experiment, "experiment_from_dict", refuse)
    assert plan_module.row_device(plan) == built
    assert runs.auto_jobs(plan) >= 1


def test_a_parameter_count_is_the_meta_count_and_made_once_per_model_shape(monkeypatch):
    rows_module._count_shape.cache_clear()
    builds = counted(monkeypatch, sizes, "_count")
    plan = Plan(updates=600)
    table = select_rows("base,A,B,C,D,E,big")
    weights = {row.name: runs._weight(row, plan) for row in table}
    vocab = SCALES["cpu"].vocab_size
    shapes = {tuple(settings(row, "cpu")[k] for k in rows_module.SHAPE) for row in table}
    # three meta builds per count (sizes._counts: one layer, then two per stack); the D rows
    # and every row's comparison with base share one count
    assert len(builds) == 3 * len(shapes) < 3 * 2 * len(table)
    assert weights["D-drop0.2"] == weights["base"]
    rows_module._count_shape.cache_clear()  # each count, made afresh, is the meta count
    for scale in SCALES:
        for row in reversed(table):  # a key missing a column would hand base's count on
            s = settings(row, scale)
            assert count_parameters(s, vocab, 256) == \
                sizes.count_parameters(model_config(s, vocab, 256)), (scale, row.name)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    folder = tmp_path_factory.mktemp("corpus")
    write_corpus_dir(dates_numbers(n_train=120, n_valid=4, n_test=2), folder)
    return str(folder)


def test_a_table_joins_once_reads_the_corpus_once_per_row_and_scores_in_memory(
        corpus, tmp_path, monkeypatch):
    from aiayn.tasks import seq2seq, translator
    from aiayn.training import distributed

    setups = counted(monkeypatch, distributed, "setup")
    loads = counted(monkeypatch, seq2seq, "load_pairs")
    reloads = counted(monkeypatch, translator.Translator, "load")
    plan = Plan(corpus=corpus, groups="C-N2,E-learned", updates=1, dev_pairs=3,
                overrides=["train.log_every=1", "data.valid_pairs=2", "model.max_len=64"])
    out = tmp_path / "t3"
    run_table(plan, out, say=lambda m: None, jobs=1)
    assert len(setups) == 1  # once per table, not again per row (start_run gets its world)
    assert len(loads) == 1 + 2  # the plan's fingerprint, then each row's training
    assert reloads == []  # scored on the model training left in memory
    # the scores a reload of the row's folder gives, on the dev pairs read afresh
    for record in runs.read_results(out):
        exp = row_experiment(ROWS[record["row"]], 0, plan, out / record["folder"])
        again = evaluate_run(out / record["folder"], dev_pairs(exp, plan.dev_pairs), "cpu")
        assert {k: record[k] for k in again} == again, record["row"]
