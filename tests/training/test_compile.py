"""train.compile, train.pad_to_multiple and train.cuda_graphs (issue 38): the stacked layers
compiled one region each, for training only; bounded batch shapes; the refusals. The CUDA graphs
themselves run in tests/test_cuda.py (on a GPU)."""

import json

import pytest
import torch

from aiayn import Transformer, preset
from aiayn.config import TrainConfig, lm_preset
from aiayn.errors import ConfigError, UserError
from aiayn.models.decoder_lm import DecoderLM
from aiayn.tasks.seq2seq_loss import seq2seq_loss
from aiayn.training import compiled
from aiayn.training.trainer import Trainer
from tests.training.test_trainer import copy_stream, quiet, random_sequences, tiny_model


@pytest.mark.parametrize("value", [0, -8, "eight", 2.5, True])
def test_pad_to_multiple_takes_a_positive_integer_or_auto(value):
    with pytest.raises(ConfigError, match="pad_to_multiple"):
        TrainConfig(pad_to_multiple=value)


def test_the_regions_are_every_stacked_layer_in_order():
    model = Transformer(preset("tiny", vocab_size=30, n_layers=2))
    layers = compiled.layer_stacks(model)
    assert layers == [*model.encoder.layers, *model.decoder.layers] and len(layers) == 4
    lm = DecoderLM(lm_preset("tiny", vocab_size=30, n_layers=3))
    assert len(compiled.layer_stacks(lm)) == 3


def test_compiled_layers_run_in_training_alone_and_undo_restores_them(monkeypatch):
    """Training forwards (train mode, gradients on) take the compiled layers; evaluation (eval
    mode or no_grad) and, after undo, everything take the class's own forward."""
    calls = []

    def fake_compile(fn, dynamic, mode):  # records each call instead of compiling
        assert dynamic is True and mode is None

        def run(*args, **kwargs):
            calls.append(fn.__self__)
            return fn(*args, **kwargs)
        return run

    monkeypatch.setattr(compiled.torch, "compile", fake_compile)
    torch.manual_seed(0)
    model = Transformer(preset("tiny", vocab_size=30, n_layers=2, dropout=0.0))
    src, tgt = torch.randint(3, 30, (2, 5)), torch.randint(3, 30, (2, 4))
    before = model(src, tgt)
    undo = compiled.compile_layers(model)
    model.train()
    torch.testing.assert_close(model(src, tgt), before)
    assert calls == compiled.layer_stacks(model)  # each layer once, through its region
    calls.clear()
    with torch.no_grad():
        model(src, tgt)
    model.eval()
    model(src, tgt)
    assert calls == []
    undo()
    model.train()
    model(src, tgt)
    assert calls == []
    assert not any("forward" in vars(layer) for layer in compiled.layer_stacks(model))


def test_a_model_without_a_layer_stack_is_one_region(monkeypatch):
    compiled_fns = []
    monkeypatch.setattr(compiled.torch, "compile",
                        lambda fn, dynamic, mode: compiled_fns.append(fn) or fn)
    model = torch.nn.Linear(3, 2)
    undo = compiled.compile_layers(model)
    assert len(compiled_fns) == 1 and compiled_fns[0].__self__ is model
    undo()
    assert "forward" not in vars(model)


@pytest.mark.parametrize("graphs, device, multiple", [
    (False, "cpu", 1), (True, "cpu", 1), (False, "cuda", 1), (True, "cuda", 8)])
def test_auto_pads_only_cuda_graphs(graphs, device, multiple):
    """Unpadded batches are the least work (the loss projects the non-pad rows alone), and the
    compiled layers take any shape; CUDA graphs record one graph per shape."""
    cfg = dict(compile=True, cuda_graphs=graphs)
    assert TrainConfig(**cfg).length_multiple(device) == multiple
    assert TrainConfig(**cfg, pad_to_multiple=16).length_multiple(device) == 16
    assert TrainConfig(compile=True).length_multiple(device) == 1


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


def test_a_fit_that_fails_after_compiling_puts_everything_back(tmp_path, monkeypatch):
    """A failure between compiling the layers and the first update (here: the batch thread will
    not start) leaves no layer compiled and the process's threads and determinism as they were."""
    from aiayn.training import trainer as trainer_module
    monkeypatch.setattr(compiled.torch, "compile", lambda fn, dynamic, mode: fn)

    def refuse(*args, **kwargs):
        raise OSError("no thread")

    monkeypatch.setattr(trainer_module, "Prefetcher", refuse)
    threads = torch.get_num_threads()
    trainer = Trainer(tiny_model(), quiet(max_steps=2, compile=True, threads=threads + 1,
                                          deterministic=True),
                      copy_stream(random_sequences(16, 3), 8), seq2seq_loss(0.1), tmp_path,
                      family="transformer")
    with pytest.raises(OSError, match="no thread"):
        trainer.fit()
    assert not any("forward" in vars(layer) for layer in compiled.layer_stacks(trainer.model))
    assert torch.get_num_threads() == threads and not torch.are_deterministic_algorithms_enabled()


def _losses(folder):
    return [row["loss"] for row in map(json.loads, (folder / "metrics.jsonl").read_text()
                                       .splitlines()) if "loss" in row]


@pytest.mark.slow  # compiling a tiny model's layers on the CPU
def test_a_compiled_update_trains_as_the_eager_one(tmp_path):
    """train.compile: the layers compiled, on batches of varying shapes (dynamic), give the
    eager run's losses; the log states how long the first update took; the model the run hands
    back runs its eager layers."""
    said, losses = [], {}
    for compile_ in (False, True):
        out = tmp_path / str(compile_)
        cfg = quiet(max_steps=5, log_every=1, compile=compile_)
        trainer = Trainer(tiny_model(), cfg, copy_stream(random_sequences(40, 3), 8),
                          seq2seq_loss(0.1), out, family="transformer")
        trainer._say = said.append
        assert trainer.fit().step == 5
        losses[compile_] = _losses(out)
    assert not any("forward" in vars(layer) for layer in compiled.layer_stacks(trainer.model))
    assert len(losses[True]) == 5
    assert losses[True][0] == pytest.approx(losses[False][0], rel=1e-5)  # the same weights
    assert losses[True] == pytest.approx(losses[False], rel=1e-4)  # then 4 Adam steps
    assert any(line.startswith("compiled: the first update took ") for line in said)
