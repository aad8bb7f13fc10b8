"""Where a model runs: "auto" (CUDA when present, else Apple's MPS, else the CPU), "cpu",
"cuda", "cuda:N" or "mps". An unavailable device is an error naming it, raised before any work
(and before any folder is written), never an assertion deep inside torch."""

from __future__ import annotations

import os
import re

from aiayn.errors import ConfigError

DEVICE_NAMES = "auto, cpu, cuda, cuda:N, mps"
_DEVICE = re.compile(r"^(auto|cpu|mps|cuda(:\d+)?)$")


def check_device_name(name: str) -> None:
    """ConfigError for a string that names no device (availability is checked by resolve)."""
    if not isinstance(name, str) or not _DEVICE.match(name):
        raise ConfigError(f"device={name!r}: must be one of {DEVICE_NAMES}")


def resolve_device(name: str = "auto") -> str:
    """The torch device string for `name`, after checking this machine has it."""
    import torch

    check_device_name(name)
    mps = getattr(torch.backends, "mps", None)
    has_mps = bool(mps is not None and mps.is_available())
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "mps" if has_mps else "cpu"
    if name.startswith("cuda"):
        if not torch.cuda.is_available():
            build = "a CPU-only build" if torch.version.cuda is None else f"CUDA {torch.version.cuda}"
            raise ConfigError(f"device={name!r}: CUDA is not available on this machine (torch "
                              f"{torch.__version__}, {build}); use device=cpu or auto")
        index = int(name.split(":")[1]) if ":" in name else 0
        if index >= torch.cuda.device_count():
            raise ConfigError(f"device={name!r}: this machine has {torch.cuda.device_count()} "
                              "CUDA device(s)")
    if name == "mps" and not has_mps:
        raise ConfigError("device='mps': Apple's MPS backend is not available on this machine; "
                          "use device=cpu or auto")
    return name


def cpu_flags(cpuinfo: str = "/proc/cpuinfo") -> set[str]:
    """The CPU's feature flags (Linux's cpuinfo; empty where it cannot be read)."""
    try:
        with open(cpuinfo, encoding="utf-8") as f:
            return {flag for line in f if line.startswith("flags")
                    for flag in line.split(":", 1)[1].split()}
    except OSError:
        return set()


def cpu_has_bf16(cpuinfo: str = "/proc/cpuinfo") -> bool:
    """Whether this CPU multiplies bf16 matrices in hardware: AVX512-BF16 dot products or Intel
    AMX tiles (Linux's cpuinfo flags). Without either, torch emulates bf16 and it is slower."""
    return bool(cpu_flags(cpuinfo) & {"avx512_bf16", "amx_bf16"})


def cpu_has_vnni(cpuinfo: str = "/proc/cpuinfo") -> bool:
    """Whether this CPU adds int8 products in 32 bits in hardware (AVX512-VNNI, AVX-VNNI or AMX).
    Without, x86 int8 kernels add pairs of u8 x s8 products in saturating 16 bits."""
    return bool(cpu_flags(cpuinfo) & {"avx512_vnni", "avx_vnni", "amx_int8"})


def resolve_precision(precision: str, device: str) -> tuple[str, str]:
    """(fp32 | bf16 | fp16, why) for train.precision on `device`. "auto" takes bf16 where the
    hardware computes it natively and its loss matches fp32's (tests/test_cli_translation.py:
    test_mixed_precision_trains_like_fp32): CUDA GPUs with bf16 support, and CPUs with
    AVX512-BF16 or AMX-bf16 (on this project's 2-core machine matmuls run 2.1-3x and a whole
    training run 1.1-1.5x as fast as fp32, except tiny models: benchmarks/RESULTS.md, "Training
    on the CPU in bf16"). Elsewhere fp32. `why` is "set" for a precision used as given, and says
    otherwise what was chosen and why, or that bf16 is emulated on this CPU."""
    import torch

    if precision == "bf16" and device == "cpu" and not cpu_has_bf16():
        return "bf16", ("set; emulated: this CPU has no AVX512-BF16 or AMX, so bf16 runs slower "
                        "than fp32 here")
    if precision != "auto":
        return precision, "set"
    if device.startswith("cuda") and torch.cuda.is_bf16_supported():
        return "bf16", "auto: the GPU computes bf16"
    if device == "cpu" and cpu_has_bf16():
        return "bf16", "auto: the CPU computes bf16"
    lacks = "this CPU has no AVX512-BF16 or AMX" if device == "cpu" else f"{device}: no bf16"
    return "fp32", f"auto: {lacks}"


def launched() -> bool:
    """True when torchrun (or another launcher) started this process as one of several (read
    from the environment alone: no torch import)."""
    try:
        return int(os.environ.get("WORLD_SIZE", "1")) > 1
    except ValueError:
        return False


__all__ = ["DEVICE_NAMES", "check_device_name", "cpu_has_bf16", "launched", "resolve_device",
           "resolve_precision"]
