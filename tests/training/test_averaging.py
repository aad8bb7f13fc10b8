"""The weights' running average kept during training (training/averaging.py, §6.1)."""

import pytest
import torch
from safetensors.torch import load_file

from aiayn.folder.checkpoint import load_train_state
from aiayn.training.averaging import WeightAverage, gamma_for, width_of
from aiayn.training.trainer import Trainer
from tests.training.test_trainer import copy_stream, loss_fn, quiet, random_sequences, tiny_model


def test_width_gives_the_published_exponents():
    # Karras et al. (2024), §3.1: sigma_rel 0.05 and 0.10 are gamma 16.97 and 6.94.
    assert gamma_for(0.05) == pytest.approx(16.97, abs=0.01)
    assert gamma_for(0.10) == pytest.approx(6.94, abs=0.01)
    for width in (0.01, 0.05, 0.2, 0.28):
        assert width_of(gamma_for(width)) == pytest.approx(width, rel=1e-9)
    with pytest.raises(ValueError):
        gamma_for(0.3)


def test_update_is_the_power_weighted_sum_of_every_step():
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    avg = WeightAverage(model, 0.1)
    history = []
    for step in range(1, 21):
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn_like(p))
        history.append([p.detach().clone().double() for p in model.parameters()])
        avg.update(step)
    T, g = len(history), avg.gamma
    w = [(t / T) ** (g + 1) - ((t - 1) / T) ** (g + 1) for t in range(1, T + 1)]
    assert sum(w) == pytest.approx(1.0)
    for i, a in enumerate(avg.averaged().parameters()):
        expected = sum(wt * h[i] for wt, h in zip(w, history, strict=True))
        torch.testing.assert_close(a.double(), expected, rtol=1e-5, atol=1e-6)
    # The model being trained keeps its own weights until copy_to_model.
    assert torch.equal(next(model.parameters()).double(), history[-1][0])
    avg.copy_to_model()
    assert torch.equal(next(model.parameters()), next(avg.averaged().parameters()))


def _train(folder, width, steps, resume=False, save_every=0, evaluate=None):
    # device cpu: bit-for-bit comparisons, also on a machine with a GPU
    cfg = quiet(max_steps=steps, deterministic=True, average_width=width, save_every=save_every,
                keep_last_n=1000, eval_every=4 if evaluate else 0, device="cpu")
    model = tiny_model(dropout=0.1)
    trainer = Trainer(model, cfg, copy_stream(random_sequences(50, seed=3), 8), loss_fn, folder,
                      family="transformer", evaluate=evaluate)
    return trainer, trainer.fit(resume=resume)


def test_folder_holds_the_average_and_training_is_unchanged(tmp_path):
    """Run A saves every update's own weights (averaging off); run B, the same run averaged,
    must train the same weights and hold their power-weighted average."""
    _train(tmp_path / "raw", 0, 12, save_every=1)
    steps = [load_file(str(tmp_path / f"raw/checkpoints/step_{t:08d}.safetensors"))
             for t in range(1, 13)]
    trainer, _ = _train(tmp_path / "avg", 0.1, 12)
    state = load_train_state(tmp_path / "avg")
    for name, weights in state["raw_weights"].items():  # training did not change
        if name in steps[-1]:
            assert torch.equal(weights, steps[-1][name]), name
    g = gamma_for(0.1)
    w = [(t / 12) ** (g + 1) - ((t - 1) / 12) ** (g + 1) for t in range(1, 13)]
    saved = load_file(str(tmp_path / "avg/model.safetensors"))
    assert saved.keys() == steps[-1].keys()
    for name, tensor in saved.items():
        expected = sum(wt * s[name].double() for wt, s in zip(w, steps, strict=True))
        torch.testing.assert_close(tensor.double(), expected, rtol=1e-5, atol=1e-6)
        assert not torch.equal(tensor, steps[-1][name]) or name.endswith("pe")
    # The model left in memory is the one in the folder.
    for name, tensor in trainer.model.state_dict().items():
        if name in saved:
            assert torch.equal(tensor, saved[name]), name


def test_validation_scores_the_averaged_weights(tmp_path):
    seen = {}

    def evaluate(model):
        seen[len(seen)] = {k: v.clone() for k, v in model.state_dict().items()}
        return {}

    trainer, _ = _train(tmp_path / "avg", 0.1, 8, save_every=4, evaluate=evaluate)
    at_4 = load_file(str(tmp_path / "avg/checkpoints/step_00000004.safetensors"))
    for name, tensor in at_4.items():
        assert torch.equal(seen[0][name], tensor), name


def test_resume_continues_the_average_exactly(tmp_path):
    _train(tmp_path / "full", 0.05, 10)
    _train(tmp_path / "split", 0.05, 6)
    _train(tmp_path / "split", 0.05, 10, resume=True)
    a = load_file(str(tmp_path / "full/model.safetensors"))
    b = load_file(str(tmp_path / "split/model.safetensors"))
    for name in a:
        assert torch.equal(a[name], b[name]), name
    ra = load_train_state(tmp_path / "full")["raw_weights"]
    rb = load_train_state(tmp_path / "split")["raw_weights"]
    for name in ra:
        assert torch.equal(ra[name], rb[name]), name


def test_a_run_saved_without_averaging_resumes_with_it(tmp_path):
    """Its own weights go on as if never averaged; the average starts from the saved weights."""
    _train(tmp_path / "plain", 0, 8)
    _train(tmp_path / "run", 0, 5)
    _, result = _train(tmp_path / "run", 0.05, 8, resume=True)
    assert result.step == 8
    raw = load_train_state(tmp_path / "run")["raw_weights"]
    plain = load_file(str(tmp_path / "plain/model.safetensors"))
    for name, tensor in plain.items():
        assert torch.equal(raw[name], tensor), name
    assert any(not torch.equal(t, plain[n])
               for n, t in load_file(str(tmp_path / "run/model.safetensors")).items())


def test_averaging_checkpoints_of_different_shapes_names_the_first_tensor_that_differs(
        tmp_path, capsys):
    """A folder whose run was restarted with another d_ff holds checkpoints of two shapes:
    `aiayn average` refuses them in one line (the tensor, both steps, both shapes), exit 2,
    and writes nothing."""
    from aiayn.cli import main
    from aiayn.config import TransformerConfig
    from aiayn.folder.format import checkpoint_path
    from aiayn.folder.weights import save_model, save_weights
    from aiayn.models import Transformer

    folder = tmp_path / "run"
    for step, d_ff in ((1, 32), (2, 48)):
        model = Transformer(TransformerConfig(vocab_size=20, d_model=16, n_heads=2, d_ff=d_ff,
                                              n_layers=1, max_len=16))
        save_model(folder, "transformer", model)
        save_weights(model, checkpoint_path(folder, step))
    assert main(["average", "--model", str(folder), "--last", "2", "--out",
                 str(tmp_path / "avg")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert "decoder.layers.0.ffn.w1.bias is (32,) in step 1 but (48,) in step 2" in err, err
    assert str(folder / "checkpoints") in err
    assert not (tmp_path / "avg").exists()
