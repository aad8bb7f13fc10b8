"""When a run stops early: train.stop_when held at train.stop_patience evaluations in a row
(the rule alone, then a tiny run that stops at the step the scripted scores say, and resumes)."""

import json

import pytest

from aiayn.config import TrainConfig
from aiayn.errors import ConfigError
from aiayn.folder.checkpoint import load_train_state
from aiayn.training.progress import StopRule
from aiayn.training.trainer import Trainer
from tests.training.test_trainer import copy_stream, loss_fn, quiet, random_sequences, tiny_model


def test_the_rule_counts_evaluations_in_a_row_and_a_miss_resets_it():
    rule = StopRule("valid_exact_match>=100", 2)
    assert (rule.metric, rule.op, rule.target) == ("valid_exact_match", ">=", 100.0)
    met = [rule.update({"valid_exact_match": v, "valid_bleu": 1.0}) for v in (90, 100, 99.5, 100)]
    assert met == [False, False, False, False] and rule.streak == 1
    assert rule.update({"valid_exact_match": 100.0}) and rule.streak == 2
    assert rule.why() == "valid_exact_match 100 >= 100 at 2 evaluations in a row (train.stop_when)"
    low = StopRule("valid_loss <= 0.5", 1)  # a floor works the same way
    assert not low.update({"valid_loss": 0.6}) and low.update({"valid_loss": 0.5})
    with pytest.raises(KeyError):
        rule.update({"valid_loss": 1.0})


@pytest.mark.parametrize("when", ["valid_exact_match>100", "exact", ">=100", "valid_bleu>=high"])
def test_a_condition_that_does_not_parse_is_refused_when_the_config_is_made(when):
    with pytest.raises(ConfigError, match=r"stop_when=.*METRIC>=VALUE"):
        TrainConfig(stop_when=when)
    with pytest.raises(ConfigError, match="stop_patience=0"):
        TrainConfig(stop_patience=0)
    assert TrainConfig().stop_when is None  # off by default


def scripted(scores):
    """An evaluation that reports the next of `scores` (then the last one again)."""
    calls = []

    def evaluate(model):
        calls.append(1)
        return {"valid_exact_match": scores[min(len(calls), len(scores)) - 1], "valid_loss": 1.0}

    return evaluate


def run(folder, max_steps, scores, resume=False, **cfg):
    cfg = quiet(max_steps=max_steps, eval_every=2, save_every=4,
                **{"stop_when": "valid_exact_match>=100", **cfg})
    trainer = Trainer(tiny_model(), cfg, copy_stream(random_sequences(40, seed=5), 8), loss_fn,
                      folder, family="transformer", evaluate=scripted(scores))
    return trainer.fit(resume=resume)


def test_a_run_stops_at_the_second_saturated_evaluation_in_a_row(tmp_path, capsys):
    # evaluations at steps 2, 4, 6, 8, 10: 100 at 4 is followed by a miss; 100 at 8 and 10
    result = run(tmp_path / "m", 50, [50, 100, 90, 100, 100, 100])
    assert result.stopped_by == "saturated" and result.step == 10 and not result.interrupted
    assert result.why.startswith("valid_exact_match 100 >= 100 at 2 evaluations in a row")
    assert result.folder == tmp_path / "m" and result.metrics["valid_exact_match"] == 100
    assert "stopped at step 10: valid_exact_match 100 >= 100 at 2" in capsys.readouterr().err
    state = load_train_state(tmp_path / "m")
    assert state["step"] == 10
    assert state["stop_streak"] == {"when": "valid_exact_match>=100", "streak": 2}
    rows = [json.loads(line) for line in (tmp_path / "m/metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if "valid_exact_match" in r] == [2, 4, 6, 8, 10]


def test_a_resumed_run_goes_on_counting(tmp_path):
    """Stopped by its budget after one saturated evaluation, the run resumes with that one
    counted: the first evaluation after the resume is the second in a row."""
    first = run(tmp_path / "m", 6, [50, 90, 100])
    assert first.stopped_by == "max_steps" and load_train_state(tmp_path / "m")["stop_streak"][
        "streak"] == 1
    resumed = run(tmp_path / "m", 50, [100], resume=True)
    assert resumed.stopped_by == "saturated" and resumed.step == 8
    changed = run(tmp_path / "m", 50, [100], resume=True, stop_patience=3)
    assert changed.step == 10  # the count (2 so far) goes on under the same condition
    restart = run(tmp_path / "m", 50, [100], resume=True, stop_when="valid_exact_match>=99")
    assert restart.step == 14  # another condition counts from 0: evaluations at 12 and 14


def test_without_the_rule_or_its_metric_the_run_goes_to_its_budget(tmp_path, capsys):
    assert run(tmp_path / "off", 6, [100], stop_when=None).stopped_by == "max_steps"
    result = run(tmp_path / "typo", 6, [100], stop_when="valid_exact>=100")
    assert result.stopped_by == "max_steps" and result.step == 6
    err = capsys.readouterr().err
    assert err.count("warning: train.stop_when='valid_exact>=100': the evaluation reports no "
                     "'valid_exact' (it reports valid_exact_match, valid_loss)") == 1
