"""The trainer's own cost per update, counted in operators (issue 38): from the start of one update
to the start of the next (the update, the boundary mark for resume, the window of sums, the
running average, the stop checks), `Trainer.fit` dispatches the operators of a bare loop's step
over the same model, batches, loss and optimizer, and a handful more. On a GPU each operator is
a kernel launch and a host-bound update pays for every one; a count does not depend on how busy
the machine is, where a timed test would (benchmarks/train_overhead.py times the same two
loops)."""

from collections import Counter

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from aiayn.training.schedule import learning_rate, make_optimizer, set_lr
from aiayn.training.trainer import Trainer
from tests.training.test_trainer import copy_stream, loss_fn, quiet, random_sequences, tiny_model

COUNTED = 4  # the update counted: 0-based, after the first updates' set-up


class Operators(TorchDispatchMode):
    """Counts the ATen operators dispatched on this thread while active (the Prefetcher's thread,
    which builds batches on the host, has its own mode stack and is not counted)."""

    def __init__(self):
        super().__init__()
        self.count = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.count[str(func.overloadpacket)] += 1
        return func(*args, **(kwargs or {}))


def _trainer_cycle(tmp_path, **settings) -> Counter:
    """The operators from the start of update COUNTED + 1 to the start of the next."""
    cfg = quiet(max_steps=COUNTED + 3, log_every=COUNTED + 3, **settings)
    trainer = Trainer(tiny_model(dropout=0.1), cfg, copy_stream(random_sequences(40, 3), 8),
                      loss_fn, tmp_path, family="transformer")
    update, mode = trainer._update, Operators()

    def counted():
        if trainer.step == COUNTED:
            mode.__enter__()
        elif trainer.step == COUNTED + 1:
            mode.__exit__(None, None, None)
        return update()

    trainer._update = counted
    trainer.fit()
    return mode.count


def _bare_step(accum_steps: int) -> Counter:
    """The same step written by hand: zero_grad, forward + loss and backward per batch, the
    gradients divided by the update's target tokens (counted on the host), lr, Adam."""
    cfg = quiet(max_steps=COUNTED + 3)
    model, stream = tiny_model(dropout=0.1), copy_stream(random_sequences(40, 3), 8)
    optimizer = make_optimizer(model, cfg, "cpu")
    model.train()
    for step in range(COUNTED + 1):
        batches = [next(stream) for _ in range(accum_steps)]
        mode = Operators()
        with mode:
            optimizer.zero_grad(set_to_none=True)
            for batch in batches:
                loss, _, _ = loss_fn(model, batch)
                loss.backward()
            torch._foreach_div_([p.grad for p in model.parameters()],
                                float(sum(b.tgt_count for b in batches)))
            set_lr(optimizer, learning_rate(step + 1, cfg, 32))
            optimizer.step()
    return mode.count


# The trainer's own operators: the sums' window (a detach and an add per sum), the running
# average (one foreach lerp), the RNG state kept for resume; with clip_norm, the norm's too.
@pytest.mark.parametrize("settings, extra", [({}, 12), ({"average_width": 0}, 12),
                                             ({"accum_steps": 2, "clip_norm": 1.0}, 30)])
def test_an_update_costs_a_bare_steps_operators_and_a_handful_more(tmp_path, settings, extra):
    trainer = _trainer_cycle(tmp_path, **settings)
    bare = _bare_step(settings.get("accum_steps", 1))
    assert sum(bare.values()) > 500  # the premise: the step's own work is counted
    added = sum(trainer.values()) - sum(bare.values())
    more = {k: trainer[k] - bare[k] for k in trainer if trainer[k] > bare[k]}
    assert 0 <= added <= extra, more


def test_the_count_sees_a_loop_over_the_parameters(tmp_path, monkeypatch):
    """The bound can fail: a trainer that divided each gradient in its own call (85 of them
    here, as a bare loop might) is far over it."""
    def per_parameter(grads, n):
        for g in grads:
            g.div_(n)

    monkeypatch.setattr(torch, "_foreach_div_", per_parameter)  # the trainer's call
    counted = _trainer_cycle(tmp_path)
    monkeypatch.undo()
    assert sum(counted.values()) - sum(_bare_step(1).values()) > 12
