"""What a model config will cost in memory, checked before anything is allocated.

A mistyped or crafted size (`model.d_ff=2000000000`, a folder whose config.json says d_model 65536
or 100k layers) would otherwise allocate until the machine swaps or the process dies with
`std::bad_alloc`. `check_fits` estimates the bytes from the config's fields alone and refuses,
with the figures, a model that cannot fit in the memory available now. Setting the environment
variable AIAYN_SKIP_MEMORY_CHECK=1 goes past the check (e.g. on a machine with swap to spare).
"""

from __future__ import annotations

import os
from typing import Any

from aiayn.errors import UserError

SKIP_ENV = "AIAYN_SKIP_MEMORY_CHECK"
# Training holds, per parameter: the fp32 weight, its gradient and Adam's two moments.
TRAIN_BYTES_PER_PARAM = 16
LOAD_BYTES_PER_PARAM = 4


def estimate_parameters(config: Any) -> int:
    """An upper estimate of the parameter count of any family's config (duck-typed fields).

    Per layer: self-attention 4 d^2, cross-attention 4 d^2 (decoder layers), feed-forward 2 d d_ff;
    plus token, position (a sinusoid table is counted too: it is allocated), segment and patch
    embeddings and a classifier head. Biases and LayerNorms are small and left out.
    """
    d, d_ff = int(getattr(config, "d_model", 0)), int(getattr(config, "d_ff", 0))
    # TransformerConfig resolves its two stack sizes; the other families have one stack.
    enc = int(getattr(config, "n_encoder_layers", getattr(config, "n_layers", 0)))
    dec = int(getattr(config, "n_decoder_layers", 0))
    per_layer = 4 * d * d + 2 * d * d_ff
    total = enc * per_layer + dec * (per_layer + 4 * d * d)
    vocab = int(getattr(config, "vocab_size", 0) or 0) + int(getattr(config, "tgt_vocab_size", 0) or 0)
    total += vocab * d
    total += int(getattr(config, "max_len", 0) or 0) * d
    total += int(getattr(config, "type_vocab_size", 0) or 0) * d
    if hasattr(config, "patch_size"):
        patch, size = int(config.patch_size), int(config.image_size)
        total += patch * patch * int(getattr(config, "channels", 3)) * d
        total += (size // max(patch, 1)) ** 2 * d
    total += int(getattr(config, "n_classes", 0) or 0) * d + int(getattr(config, "n_labels", 0) or 0) * d
    return total


def available_bytes() -> int | None:
    """Memory the system can give now (MemAvailable), or None where that cannot be read."""
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
    need = params * (TRAIN_BYTES_PER_PARAM if training else LOAD_BYTES_PER_PARAM)
    have = available_bytes()
    if have is not None and need > have:
        purpose = "to train (weights, gradients, Adam)" if training else "to load"
        raise UserError(f"{what}: about {params:,} parameters need {_gib(need)} {purpose}, more "
                        f"than the {_gib(have)} of memory available (a size typo? set "
                        f"{SKIP_ENV}=1 to try anyway)")


__all__ = ["SKIP_ENV", "available_bytes", "check_fits", "estimate_parameters"]
