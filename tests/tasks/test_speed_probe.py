"""SpeedProbe (tasks/speed_probe.py): `aiayn train auto`'s updates/s, measured with a few real
updates of the model, loss, optimizer and precision the run will use."""

import math

import torch

from aiayn.config.train import TrainConfig
from aiayn.tasks.speed_probe import SpeedProbe
from aiayn.training.auto_recipe import update_flops


def test_the_probe_measures_each_shape_once_and_leaves_the_threads_as_they_were():
    before = torch.get_num_threads()
    probe = SpeedProbe((6.0, 6.5), TrainConfig(threads=1, precision="fp32"), pairs=300)
    small = probe("xs", 1000, 1500)
    assert math.isfinite(small) and small > 0 and torch.get_num_threads() == before
    spent = probe.seconds
    assert probe("xs", 1000, 1500) == small and probe.seconds == spent  # measured once
    assert spent > 0


def test_a_model_with_many_times_the_flops_measures_slower():
    """m (256 wide, d_ff 1024, 3+3 layers) does over 5x the work of xs (128 wide, d_ff 512, 2+2)
    an update: whatever the machine's load, its rate cannot come out higher."""
    probe = SpeedProbe((6.0, 6.5), TrainConfig(threads=1, precision="fp32"), pairs=300)
    assert update_flops("m", 1000, 1500) > 5 * update_flops("xs", 1000, 1500)
    assert probe("m", 1000, 1500) < probe("xs", 1000, 1500)
    assert len(probe.measured) == 2


def test_each_shape_is_timed_over_whole_epochs_of_its_batches_after_one_untimed():
    """A CPU builds kernels the first time it sees a batch's shape; a real run pays that once.
    The probe runs an epoch of its batches untimed, then times whole epochs (each shape as often)
    for MIN_SECONDS or more. Rule 2 timed three updates after one: mostly first shapes."""
    from aiayn.tasks import speed_probe

    probe = SpeedProbe((6.0, 6.5), TrainConfig(threads=1, precision="fp32"))
    rate = probe("xs", 1000, 1500)
    timed, epoch = probe.timed[("xs", 1000, 1500)]
    assert epoch >= 5  # 1,000 pairs of ~13 pieces a side, 1,500 tokens a batch: ~17 batches
    assert timed >= epoch and timed % epoch == 0
    # the timed epochs took MIN_SECONDS or more, the untimed one came before them
    assert timed / (rate / speed_probe.TRAINER_SHARE) >= speed_probe.MIN_SECONDS * 0.99
    assert probe.seconds > timed / (rate / speed_probe.TRAINER_SHARE)


def _windows(rates):
    """window() for steady_rate: each call times 10 updates at the next of `rates`."""
    it = iter(rates)
    calls = []

    def window():
        calls.append(1)
        return 10, 10 / next(it)
    return window, calls


def test_on_a_quiet_machine_two_windows_that_agree_are_enough():
    from aiayn.tasks.speed_probe import steady_rate

    window, calls = _windows([1.00, 1.05, 99.0])
    rate, timed = steady_rate(window)
    assert len(calls) == 2 and timed == 20
    assert math.isclose(rate, 1.025)


def test_windows_slowed_by_a_passing_load_are_outvoted_by_two_that_agree():
    """Rule 5's one window timed m at ~0.6 of its rate beside a run starting on the other core,
    and auto fell back to a smaller model; the probe now times on until two windows agree."""
    from aiayn.tasks.speed_probe import steady_rate

    window, calls = _windows([0.50, 0.62, 0.55, 1.00, 0.98, 99.0])
    rate, timed = steady_rate(window)
    assert len(calls) == 5 and timed == 50
    assert math.isclose(rate, 0.99)


def test_a_load_that_lasts_every_window_still_shows_and_the_probe_stops():
    from aiayn.tasks import speed_probe

    rates = [0.8 ** i for i in range(speed_probe.MAX_WINDOWS)]  # each 20% under the one before
    window, calls = _windows(rates + [99.0])
    rate, _ = speed_probe.steady_rate(window)
    assert len(calls) == speed_probe.MAX_WINDOWS  # never agreed: stopped at the cap
    top = sorted(rates)[-2:]
    assert math.isclose(rate, sum(top) / 2)



def test_the_probe_times_updates_with_the_r_drop_it_is_given(monkeypatch):
    """train.rdrop: the probe's updates use the run's loss, R-Drop's two reads included (its
    alpha reaches seq2seq_loss); without it, alpha 0."""
    from aiayn.tasks import seq2seq_loss as module

    given, real = [], module.seq2seq_loss

    def recording(eps, counted_once=(), rdrop=0.0):
        given.append(rdrop)
        return real(eps, counted_once, rdrop)

    monkeypatch.setattr(module, "seq2seq_loss", recording)
    SpeedProbe((6.0, 6.5), TrainConfig(threads=1, precision="fp32"), pairs=100)("xs", 1000, 1500)
    SpeedProbe((6.0, 6.5), TrainConfig(threads=1, precision="fp32", rdrop=5.0),
               pairs=100)("xs", 1000, 1500)
    assert given == [0.0, 5.0]
