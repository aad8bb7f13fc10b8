"""What a model config, or a count given on the command line, will cost in memory, checked
before anything is allocated.

A mistyped or crafted size (`model.d_ff=2000000000`, a folder whose config.json says d_model 65536
or 100k layers) would otherwise allocate until the machine swaps or the process dies with
`std::bad_alloc`. `check_fits` estimates the bytes from the config's fields alone and refuses,
with the figures, a model that cannot fit in the memory available now. `check_count` does the
same for a count flag (`--num-samples 1000000000`, `--beam`, `--batch-size`) from the bytes one
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


def estimate_parameters(config: Any) -> int:
    """An upper estimate of the parameter count of any family's config (duck-typed fields).

    Per layer: self-attention 4 d^2, cross-attention 4 d^2 (decoder layers), feed-forward 2 d d_ff;
    plus token, position (a sinusoid table is counted too: it is allocated), segment and patch
    embeddings and a classifier head. Biases and LayerNorms are small and left out.
    """
    d, d_ff = int(getattr(config, "d_model", 0)), int(getattr(config, "d_ff", 0))
    enc, dec = _stacks(config)
    # heads of their own width (T5's d_kv; Table 3 row B's d_k and d_v: the wider, an upper
    # estimate); a gated feed-forward (T5 v1.1) has a third matrix
    head_dim, value_dim = getattr(config, "head_dim", None), getattr(config, "value_dim", None)
    d_attn = int(getattr(config, "n_heads", 1)) * int(head_dim) if head_dim else d
    if value_dim:
        d_attn = max(d_attn, int(getattr(config, "n_heads", 1)) * int(value_dim))
    per_layer = 4 * d * d_attn + (3 if getattr(config, "gated_ffn", False) else 2) * d * d_ff
    total = enc * per_layer + dec * (per_layer + 4 * d * d_attn)
    vocab = int(getattr(config, "vocab_size", 0) or 0) + int(getattr(config, "tgt_vocab_size", 0) or 0)
    total += vocab * d * (1 if getattr(config, "tie_output", True) else 2)  # T5 v1.1: untied
    total += int(getattr(config, "max_len", 0) or 0) * d
    total += int(getattr(config, "type_vocab_size", 0) or 0) * d
    if hasattr(config, "patch_size"):
        patch, size = int(config.patch_size), int(config.image_size)
        total += patch * patch * int(getattr(config, "channels", 3)) * d
        total += (size // max(patch, 1)) ** 2 * d
    total += int(getattr(config, "n_classes", 0) or 0) * d + int(getattr(config, "n_labels", 0) or 0) * d
    return total


def _stacks(config: Any) -> tuple[int, int]:
    """(encoder or only stack's layers, decoder layers) of any family's config."""
    # TransformerConfig resolves its two stack sizes; the other families have one stack.
    enc = int(getattr(config, "n_encoder_layers", getattr(config, "n_layers", 0)))
    return enc, int(getattr(config, "n_decoder_layers", 0))


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
    """Refuse (UserError) a model whose estimated memory exceeds what is available now."""
    if os.environ.get(SKIP_ENV, "") not in ("", "0"):
        return
    params = estimate_parameters(config)
    need = params * (TRAIN_BYTES_PER_PARAM if training else LOAD_BYTES_PER_PARAM) + \
        sum(_stacks(config)) * LAYER_BYTES
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
    floats = 2 * 2 * sum(_stacks(config)) * keys * d + new * (heads * keys + d_ff + 4 * vocab)
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
           "estimate_parameters", "row_bytes"]
