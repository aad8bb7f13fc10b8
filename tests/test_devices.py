"""Devices and precision: names checked, unavailable devices refused, "auto" precision chosen
from the hardware."""

import pytest
import torch

from aiayn import devices
from aiayn.config import TrainConfig
from aiayn.errors import ConfigError
from aiayn.training.trainer import Trainer


def test_auto_precision_is_bf16_only_where_the_hardware_computes_it(monkeypatch):
    monkeypatch.setattr(devices, "cpu_has_amx_bf16", lambda: False)
    assert devices.resolve_precision("auto", "cpu") == ("fp32", "auto")
    monkeypatch.setattr(devices, "cpu_has_amx_bf16", lambda: True)
    assert devices.resolve_precision("auto", "cpu") == ("bf16", "auto: the CPU has AMX-bf16")
    assert devices.resolve_precision("auto", "mps")[0] == "fp32"
    assert devices.resolve_precision("fp16", "cpu") == ("fp16", "set")
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    assert devices.resolve_precision("auto", "cuda:1")[0] == "bf16"


def test_the_trainer_autocasts_to_the_precision_chosen(monkeypatch, tmp_path):
    monkeypatch.setattr(devices, "cpu_has_amx_bf16", lambda: True)
    model = torch.nn.Linear(2, 2)
    trainer = Trainer(model, TrainConfig(device="cpu"), iter(()), None, tmp_path, family="x")
    assert trainer.precision == "bf16" and trainer.autocast is torch.bfloat16
    monkeypatch.setattr(devices, "cpu_has_amx_bf16", lambda: False)
    trainer = Trainer(model, TrainConfig(device="cpu"), iter(()), None, tmp_path, family="x")
    assert trainer.precision == "fp32" and trainer.autocast is None


@pytest.mark.parametrize("name", ["gpu", "cuda:x", "CPU", ""])
def test_a_device_name_that_names_nothing_is_refused(name):
    with pytest.raises(ConfigError, match="must be one of auto, cpu, cuda, cuda:N, mps"):
        devices.check_device_name(name)


def test_cuda_on_a_machine_without_it_is_one_clear_error(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ConfigError, match="CUDA is not available on this machine"):
        devices.resolve_device("cuda")
