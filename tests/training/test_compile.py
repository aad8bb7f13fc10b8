"""train.compile, train.pad_to_multiple and train.cuda_graphs (issue 38): bounded batch shapes,
the model and the loss compiled as one function, and the refusals. The CUDA graphs themselves run
in tests/test_cuda.py (on a GPU)."""

import json

import pytest

from aiayn.config import TrainConfig
from aiayn.errors import ConfigError, UserError
from aiayn.tasks.seq2seq_loss import seq2seq_loss
from aiayn.training.trainer import Trainer
from tests.training.test_trainer import copy_stream, quiet, random_sequences, tiny_model


@pytest.mark.parametrize("value", [0, -8, "eight", 2.5, True])
def test_pad_to_multiple_takes_a_positive_integer_or_auto(value):
    with pytest.raises(ConfigError, match="pad_to_multiple"):
        TrainConfig(pad_to_multiple=value)


@pytest.mark.parametrize("compile_, device, multiple", [
    (False, "cpu", 1), (True, "cpu", 1), (False, "cuda", 1), (True, "cuda", 8)])
def test_auto_pads_only_a_compiled_update_on_a_gpu(compile_, device, multiple):
    """A CPU trains fastest on unpadded batches (the loss projects the non-pad rows alone)."""
    assert TrainConfig(compile=compile_).length_multiple(device) == multiple
    assert TrainConfig(compile=compile_, pad_to_multiple=16).length_multiple(device) == 16


def test_cuda_graphs_need_compile():
    with pytest.raises(ConfigError, match="cuda_graphs.*train.compile=true"):
        TrainConfig(cuda_graphs=True)


def test_cuda_graphs_are_refused_on_the_cpu(tmp_path):
    with pytest.raises(UserError, match=r"cuda_graphs=true: CUDA graphs need a CUDA device; "
                                        r"this run trains on cpu") as e:
        Trainer(tiny_model(), quiet(max_steps=2, compile=True, cuda_graphs=True, device="cpu"),
                copy_stream(random_sequences(16, 3), 8), seq2seq_loss(0.1), tmp_path,
                family="transformer")
    assert "\n" not in str(e.value)


def test_the_trainer_pads_the_batches_it_takes(tmp_path):
    """With pad_to_multiple the update sees padded batches (a bounded set of shapes), and the
    loss is normalised by the same host count."""
    taken = []

    def watching(model, batch):
        taken.append((batch.src.shape[1], batch.tgt_out.shape[1], batch.tgt_index))
        return seq2seq_loss(0.1)(model, batch)

    result = Trainer(tiny_model(), quiet(max_steps=4, log_every=2, pad_to_multiple=8),
                     copy_stream(random_sequences(32, 3), 8), watching, tmp_path,
                     family="transformer").fit()
    assert result.step == 4 and result.metrics["loss"] > 0
    assert taken and all(s % 8 == t % 8 == 0 and index is None for s, t, index in taken)


def _losses(folder):
    return [row["loss"] for row in map(json.loads, (folder / "metrics.jsonl").read_text()
                                       .splitlines()) if "loss" in row]


@pytest.mark.slow  # compiling a tiny model's update on the CPU: 2 min (7 on 2 loaded cores)
def test_a_compiled_update_trains_as_the_eager_one(tmp_path):
    """train.compile: the model and the loss compiled together, on batches of varying shapes
    (dynamic), give the eager run's losses; the log states how long the first update took."""
    said, losses = [], {}
    for compiled in (False, True):
        out = tmp_path / str(compiled)
        cfg = quiet(max_steps=5, log_every=1, compile=compiled)
        trainer = Trainer(tiny_model(), cfg, copy_stream(random_sequences(40, 3), 8),
                          seq2seq_loss(0.1), out, family="transformer")
        trainer._say = said.append
        assert trainer.fit().step == 5
        losses[compiled] = _losses(out)
    assert len(losses[True]) == 5
    assert losses[True][0] == pytest.approx(losses[False][0], rel=1e-5)  # the same weights
    assert losses[True] == pytest.approx(losses[False], rel=1e-4)  # then 4 Adam steps
    assert any(line.startswith("compiled: the first update took ") for line in said)
