"""SpeedProbe (tasks/speed_probe.py): `aiayn train auto`'s updates/s, measured with a few real
updates of the model, loss, optimizer and precision the run will use."""

import math

import torch

from aiayn.config.train import TrainConfig
from aiayn.tasks.speed_probe import SpeedProbe
from aiayn.training.auto_recipe import update_flops


def test_the_probe_measures_each_shape_once_and_leaves_the_threads_as_they_were():
    before = torch.get_num_threads()
    probe = SpeedProbe((6.0, 6.5), TrainConfig(threads=1, precision="fp32"))
    small = probe("xs", 1000, 1500)
    assert math.isfinite(small) and small > 0 and torch.get_num_threads() == before
    spent = probe.seconds
    assert probe("xs", 1000, 1500) == small and probe.seconds == spent  # measured once
    assert spent > 0


def test_a_model_with_many_times_the_flops_measures_slower():
    """xl (512 wide, 6+6 layers) does ~40x the work of xs (128 wide, 2+2) an update: whatever the
    machine's load, its rate cannot come out higher."""
    probe = SpeedProbe((6.0, 6.5), TrainConfig(threads=1, precision="fp32"))
    assert update_flops("xl", 1000, 1500) > 20 * update_flops("xs", 1000, 1500)
    assert probe("xl", 1000, 1500) < probe("xs", 1000, 1500)
    assert len(probe.measured) == 2
