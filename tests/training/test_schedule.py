"""The nanoGPT-level recipe knobs: a floor for the cosine, a time budget that stretches it,
which parameters decay, sampling defaults; Translator.save; the NLL in the curves figure."""


import pytest

from aiayn import Transformer, preset
from aiayn.config import TrainConfig
from aiayn.errors import ConfigError
from aiayn.training.schedule import learning_rate, make_optimizer


def cosine(**kw):
    return TrainConfig(**{"lr_schedule": "cosine", "lr": 1e-3, "warmup_steps": 10,
                          "max_steps": 110, **kw})


def test_cosine_decays_from_the_peak_to_min_lr():
    cfg = cosine(min_lr=1e-4)
    assert learning_rate(10, cfg, 64) == pytest.approx(1e-3)
    assert learning_rate(60, cfg, 64) == pytest.approx((1e-3 + 1e-4) / 2)
    assert learning_rate(110, cfg, 64) == pytest.approx(1e-4)
    assert learning_rate(500, cfg, 64) == pytest.approx(1e-4)
    assert learning_rate(110, cosine(), 64) == pytest.approx(0.0, abs=1e-12)


def test_a_time_budget_stretches_the_cosine_to_end_at_min_lr():
    cfg = cosine(min_lr=1e-4, max_steps=1_000_000, max_minutes=2.0)
    assert learning_rate(20, cfg, 64, elapsed=60.0) == pytest.approx((1e-3 + 1e-4) / 2, rel=1e-3)
    assert learning_rate(20, cfg, 64, elapsed=120.0) == pytest.approx(1e-4)
    # without the clock (or without a budget) the steps decide
    assert learning_rate(20, cfg, 64) == pytest.approx(1e-3, rel=1e-3)
    assert learning_rate(60, cosine(), 64, elapsed=1e9) == \
        pytest.approx(learning_rate(60, cosine(), 64))


@pytest.mark.parametrize("kw, message", [
    (dict(lr_schedule="noam", min_lr=1e-5), "min_lr=1e-05: is the floor of the cosine schedule"),
    (dict(min_lr=-1.0), "min_lr=-1.0: must be non-negative"),
    (dict(min_lr=1e-2), "min_lr=0.01: must not exceed the peak lr"),
])
def test_bad_min_lr_is_refused_naming_it(kw, message):
    with pytest.raises(ConfigError, match=message):
        cosine(**kw) if kw.get("lr_schedule") != "noam" else TrainConfig(**kw)


def test_weight_decay_reaches_the_embeddings_only_when_asked():
    model = Transformer(preset("tiny"))
    embedding = model.src_embed.tokens.weight

    def decayed(**kw):
        groups = make_optimizer(model, TrainConfig(weight_decay=0.1, **kw)).param_groups
        return [p for g in groups if g["weight_decay"] > 0 for p in g["params"]]

    assert not any(p is embedding for p in decayed())
    with_embeddings = decayed(decay_embeddings=True)
    assert any(p is embedding for p in with_embeddings)
    assert all(p.dim() >= 2 for p in with_embeddings)  # never biases or LayerNorm gains










def test_the_optimizer_is_fused_for_a_gpu_and_the_default_kernel_on_the_cpu():
    model = Transformer(preset("tiny"))
    for kw in ({}, {"weight_decay": 0.1}):
        assert make_optimizer(model, TrainConfig(**kw), "cuda").defaults["fused"] is True
        assert not make_optimizer(model, TrainConfig(**kw), "cpu").defaults.get("fused")
