"""Devices and precision: names checked, unavailable devices refused, "auto" precision chosen
from the hardware."""

import json

import pytest
import torch

from aiayn import devices
from aiayn.config import TrainConfig
from aiayn.errors import ConfigError
from aiayn.training.trainer import Trainer


def test_auto_precision_is_bf16_only_where_the_hardware_computes_it(monkeypatch):
    monkeypatch.setattr(devices, "cpu_has_bf16", lambda: False)
    assert devices.resolve_precision("auto", "cpu") == \
        ("fp32", "auto: this CPU has no AVX512-BF16 or AMX")
    # asked for on a CPU without it: said to be emulated (it ran ~4x slower, unstated)
    chosen, why = devices.resolve_precision("bf16", "cpu")
    assert chosen == "bf16" and "emulated" in why and "slower than fp32" in why
    monkeypatch.setattr(devices, "cpu_has_bf16", lambda: True)
    assert devices.resolve_precision("bf16", "cpu") == ("bf16", "set")
    assert devices.resolve_precision("auto", "cpu") == ("bf16", "auto: the CPU computes bf16")
    assert devices.resolve_precision("auto", "mps")[0] == "fp32"
    assert devices.resolve_precision("fp16", "cpu") == ("fp16", "set")
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    assert devices.resolve_precision("auto", "cuda:1")[0] == "bf16"


@pytest.mark.parametrize("flags, native", [("fpu avx512f avx512_bf16 avx512vl", True),
                                            ("fpu amx_bf16 amx_tile", True),
                                            ("fpu avx512f avx512vl avx2", False)])
def test_bf16_counts_as_native_with_avx512_bf16_or_amx(tmp_path, flags, native):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(f"processor\t: 0\nflags\t\t: {flags}\n\n", encoding="utf-8")
    assert devices.cpu_has_bf16(str(cpuinfo)) is native
    assert devices.cpu_has_bf16(str(tmp_path / "missing")) is False


@pytest.mark.parametrize("flags, vnni", [("fpu avx512f avx512_vnni", True), ("fpu avx_vnni avx2", True),
                                          ("fpu amx_int8 amx_tile", True), ("fpu avx2 fma", False)])
def test_vnni_read_from_the_cpu_flags(tmp_path, flags, vnni):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(f"processor\t: 0\nflags\t\t: {flags}\n\n", encoding="utf-8")
    assert devices.cpu_has_vnni(str(cpuinfo)) is vnni


def test_the_trainer_autocasts_to_the_precision_chosen(monkeypatch, tmp_path):
    monkeypatch.setattr(devices, "cpu_has_bf16", lambda: True)
    model = torch.nn.Linear(2, 2)
    trainer = Trainer(model, TrainConfig(device="cpu"), iter(()), None, tmp_path, family="x")
    assert trainer.precision == "bf16" and trainer.autocast is torch.bfloat16
    monkeypatch.setattr(devices, "cpu_has_bf16", lambda: False)
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


def test_inference_commands_run_under_the_precision_asked_for(tmp_path, monkeypatch, capsys):
    from aiayn.cli import main
    from aiayn.tasks.seq2seq import Translator
    from tests.builders import write_config

    assert main(["train", str(write_config(tmp_path, max_steps=2))]) == 0
    seen = []
    original = Translator.translate

    def spy(self, *args, **kwargs):
        seen.append((torch.is_autocast_enabled("cpu"), next(self.model.parameters()).dtype))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Translator, "translate", spy)
    model = str(tmp_path / "model")
    # On the CPU (the spy reads the CPU's autocast state), also on a machine with a GPU. bf16
    # decodes with a bf16 copy of the weights, not under autocast (aiayn.nn.precision).
    assert main(["translate", "--model", model, "--device", "cpu", "--precision", "bf16",
                 "12 3"]) == 0
    assert main(["translate", "--model", model, "--device", "cpu", "12 3"]) == 0
    assert seen == [(False, torch.bfloat16), (False, torch.float32)]
    (tmp_path / "s").write_text("12 3\n")
    (tmp_path / "r").write_text("3 12\n")
    capsys.readouterr()
    assert main(["eval", "--model", model, "--src", str(tmp_path / "s"), "--ref",
                 str(tmp_path / "r"), "--precision", "bf16", "--json", "--device", "cpu"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["precision"] == "bf16" and report["device"] == "cpu"


@pytest.mark.parametrize("argv", [["generate", "--model", "m"], ["classify", "predict", "--model", "m"],
                                  ["embed", "--model", "m"], ["vit", "predict", "--model", "m", "x.png"],
                                  ["lm", "eval", "--model", "m"]])
def test_every_inference_command_refuses_a_device_this_machine_lacks(argv, monkeypatch, capsys):
    from aiayn.cli import main

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit) as info:
        main([*argv, "--device", "cuda"])
    err = capsys.readouterr().err
    assert info.value.code == 2 and err.count("\n") == 1 and "CUDA is not available" in err
