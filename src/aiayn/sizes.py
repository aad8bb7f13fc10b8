"""What a model config, or a count given on the command line, will cost in memory, checked
before anything is allocated.

A mistyped or crafted size (`model.d_ff=2000000000`, a folder whose config.json says d_model 65536
or 100k layers) would otherwise allocate until the machine swaps or the process dies with
`std::bad_alloc`. `check_fits` counts the bytes of the config's model, built on the meta device
(count_parameters: shapes, no memory), and refuses, with the figures, a model that cannot fit in
the memory available now. `check_count` does the same for a count flag (`--num-samples 1000000000`, `--beam`, `--batch-size`) from the bytes one
item takes (`row_bytes`: a row of a decoding batch). Setting the environment variable
AIAYN_SKIP_MEMORY_CHECK=1 goes past both (e.g. on a machine with swap to spare).
"""

from __future__ import annotations

import os
from typing import Any

from aiayn.errors import UserError

SKIP_ENV = "AIAYN_SKIP_MEMORY_CHECK"
# Training holds, per parameter: the fp32 weight, its gradient and Adam's two moments.
TRAIN_BYTES_PER_PARAM = 16
LOAD_BYTES_PER_PARAM = 4
# Each layer is also a dozen Python modules and their tensors' objects (~50 KiB measured, and
# ~0.6 ms to build): what 10^7 layers of width 2 cost, whose weights alone would pass.
LAYER_BYTES = 64 * 1024


def count_parameters(config: Any, buffers: bool = False) -> int:
    """The exact parameter count of the model `config` describes (any family: TransformerConfig,
    DecoderLMConfig, EncoderConfig, ViTConfig), tied matrices counted once; with `buffers`, its
    buffers too (a sinusoid table is allocated as well: what memory holds)."""
    params, held = _counts(config)
    return params + held if buffers else params


def _counts(config: Any) -> tuple[int, int]:
    """(parameters, buffer elements) of `config`'s model, built on the meta device (shapes, no
    memory). Its layers are alike, so it is built with one and two layers per stack and the
    counts extended to the config's depth: 10^8 layers are counted as fast as the paper's 6."""
    from dataclasses import replace

    depth = {name: int(getattr(config, name)) for name in _stack_fields(config)}
    one = _count(replace(config, **dict.fromkeys(depth, 1)))
    total = list(one)
    for name, layers in depth.items():
        two = _count(replace(config, **{**dict.fromkeys(depth, 1), name: 2}))
        total = [t + (layers - 1) * (b - a) for t, a, b in zip(total, one, two, strict=True)]
    return total[0], total[1]


def _count(config: Any) -> tuple[int, int]:
    import torch

    from aiayn import config as configs
    from aiayn import models

    model_of = {configs.TransformerConfig: models.Transformer, configs.DecoderLMConfig:
                models.DecoderLM, configs.EncoderConfig: models.EncoderModel,
                configs.ViTConfig: models.VisionTransformer}
    with torch.device("meta"):
        model = model_of[type(config)](config)
    return (sum(p.numel() for p in model.parameters()), sum(b.numel() for b in model.buffers()))


def _stack_fields(config: Any) -> tuple[str, ...]:
    """The fields holding the depth of each stack: an encoder-decoder's two (TransformerConfig
    resolves them from n_layers), the other families' one."""
    if hasattr(config, "n_encoder_layers"):
        return ("n_encoder_layers", "n_decoder_layers")
    return ("n_layers",)


def _layers(config: Any) -> int:
    return sum(int(getattr(config, name)) for name in _stack_fields(config))


def available_bytes(device: Any = None) -> int | None:
    """Memory the system can give now (MemAvailable), or None where that cannot be read; with a
    CUDA `device`, that GPU's free memory."""
    if device is not None and str(device).startswith("cuda"):
        import torch

        return int(torch.cuda.mem_get_info(torch.device(device))[0])
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def _gib(n: float) -> str:
    return f"{n / 2**30:.1f} GiB"


def check_fits(config: Any, what: str, training: bool = False) -> None:
    """Refuse (UserError) a model whose memory (its weights and buffers, and for `training` the
    gradients and Adam's moments) exceeds what is available now."""
    if os.environ.get(SKIP_ENV, "") not in ("", "0"):
        return
    params, held = _counts(config)  # held: buffers (a sinusoid table, ...)
    need = params * (TRAIN_BYTES_PER_PARAM if training else LOAD_BYTES_PER_PARAM) + \
        held * LOAD_BYTES_PER_PARAM + _layers(config) * LAYER_BYTES
    have = available_bytes()
    if have is not None and need > have:
        purpose = "to train (weights, gradients, Adam)" if training else "to load"
        raise UserError(f"{what}: about {params:,} parameters need {_gib(need)} {purpose}, more "
                        f"than the {_gib(have)} of memory available (a size typo? set "
                        f"{SKIP_ENV}=1 to try anyway)")


# -- counts given on the command line (--num-samples, --beam, --batch-size, ...) --------------

# One output token kept until a batch ends: an int64 in its step's tensor, a list slot, an int.
KEPT_TOKEN_BYTES = 48


def row_bytes(config: Any, new: int, keys: int, kept: int = 0) -> int:
    """An upper estimate of the memory one row of a batch takes while `config`'s model reads
    `new` positions that attend to `keys` positions (fp32): the keys and values of every layer
    (a decoding cache grows by doubling: x2), one layer's attention scores and feed-forward
    activations for the new positions, their logits over the vocabulary with the copies that
    softmax, sampling and beam search make (x4), and `kept` output tokens."""
    d, d_ff, heads = (int(getattr(config, k, 0) or 0) for k in ("d_model", "d_ff", "n_heads"))
    vocab = int(getattr(config, "tgt_vocab_size", None) or getattr(config, "vocab_size", 0) or 0)
    floats = 2 * 2 * _layers(config) * keys * d + new * (heads * keys + d_ff + 4 * vocab)
    return 4 * floats + KEPT_TOKEN_BYTES * kept


def check_count(flag: str, value: int, each: int, what: str, used: int | None = None,
                device: Any = None) -> None:
    """Refuse `flag value` (a UserError, one line) when `used` items (default: `value`) of `each`
    bytes need more memory than is available now, e.g. "--num-samples 1000000000: would need
    ~3725.3 GiB for the batch; at most 5,120 fit in the 19.5 GiB of memory available".
    AIAYN_SKIP_MEMORY_CHECK=1 goes past it, as past check_fits."""
    if os.environ.get(SKIP_ENV, "") not in ("", "0"):
        return
    need = (value if used is None else used) * each
    have = available_bytes(device)
    if have is not None and need > have:
        raise UserError(f"{flag} {value}: would need ~{_gib(need)} for {what}; at most "
                        f"{have // max(each, 1):,} fit in the {_gib(have)} of memory available "
                        f"(set {SKIP_ENV}=1 to try anyway)")


__all__ = ["KEPT_TOKEN_BYTES", "SKIP_ENV", "available_bytes", "check_count", "check_fits",
           "count_parameters", "row_bytes"]
