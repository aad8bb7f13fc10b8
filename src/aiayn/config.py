"""Typed model configs with the paper's names, named presets, and JSON round-trips.

Every check lives in ``__post_init__`` and raises ``ValueError`` naming the field and the value, so a
bad config fails where it is written, not three layers deep in a matmul.
"""

from __future__ import annotations

import dataclasses
import json
import typing
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, TypeVar

from aiayn.errors import ConfigError

ACTIVATIONS = ("relu", "gelu", "gelu_tanh")
POSITIONS = ("sinusoidal", "learned", "none")

C = TypeVar("C", bound="BlockConfig")


def _fail(field: str, value: Any, why: str) -> typing.NoReturn:
    raise ConfigError(f"invalid config: {field}={value!r}: {why}")


@dataclass
class BlockConfig:
    """What one attention + feed-forward block needs; every model family's config extends it."""

    d_model: int = 512
    n_heads: int = 8
    d_ff: int = 2048
    dropout: float = 0.1  # §5.4 residual dropout, also on embedding + position sums
    # Not in the paper (tensor2tensor's base config has 0): dropout on attention probabilities.
    # It also forces PyTorch's slow math SDPA kernel, so it is off by default.
    attn_dropout: float = 0.0
    activation: str = "relu"  # §3.3: max(0, xW1 + b1)W2 + b2
    norm_first: bool = False  # §3.1 post-norm: LayerNorm(x + Sublayer(x)); True = pre-norm
    bias: bool = True
    layer_norm_eps: float = 1e-5

    def __post_init__(self) -> None:
        self._check_types()
        for name in ("d_model", "n_heads", "d_ff"):
            if getattr(self, name) <= 0:
                _fail(name, getattr(self, name), "must be a positive integer")
        if self.d_model % self.n_heads:
            _fail("d_model", self.d_model, f"must be divisible by n_heads={self.n_heads}")
        for name in ("dropout", "attn_dropout"):
            p = getattr(self, name)
            if not 0.0 <= p < 1.0:
                _fail(name, p, "must be in [0, 1)")
        if self.activation not in ACTIVATIONS:
            _fail("activation", self.activation, f"must be one of {', '.join(ACTIVATIONS)}")
        if self.layer_norm_eps <= 0:
            _fail("layer_norm_eps", self.layer_norm_eps, "must be positive")

    def _check_types(self) -> None:
        hints = typing.get_type_hints(type(self))
        for f in fields(self):
            value = getattr(self, f.name)
            hint = hints[f.name]
            allowed = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, _UnionType) else (hint,)
            if value is None and type(None) in allowed:
                continue
            if float in allowed and isinstance(value, int) and not isinstance(value, bool):
                setattr(self, f.name, float(value))
                continue
            if not any(_isinstance(value, t) for t in allowed if t is not type(None)):
                names = " or ".join(getattr(t, "__name__", str(t)) for t in allowed)
                _fail(f.name, value, f"must be {names}")

    # -- presets and serialisation -----------------------------------------------------------

    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in fields(cls)]

    @classmethod
    def from_dict(cls: type[C], data: dict[str, Any]) -> C:
        unknown = sorted(set(data) - set(cls.field_names()))
        if unknown:
            _fail(unknown[0], data[unknown[0]], f"unknown field for {cls.__name__}")
        return cls(**data)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_json(cls: type[C], text: str) -> C:
        return cls.from_dict(json.loads(text))

    def save(self, path: str | Path) -> None:
        Path(path).write_text(self.to_json() + "\n", encoding="utf-8")

    @classmethod
    def load(cls: type[C], path: str | Path) -> C:
        return cls.from_json(Path(path).read_text(encoding="utf-8"))

    def replace(self: C, **changes: Any) -> C:
        return self.from_dict({**self.to_dict(), **changes})


try:  # Python 3.10+: `int | None` is a types.UnionType, not typing.Union
    from types import UnionType as _UnionType
except ImportError:  # pragma: no cover
    _UnionType = typing.Union  # type: ignore[misc,assignment]


def _isinstance(value: Any, hint: Any) -> bool:
    if hint is float:
        return isinstance(value, float)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if typing.get_origin(hint) is typing.Literal:
        return value in typing.get_args(hint)
    return isinstance(value, typing.get_origin(hint) or hint)


@dataclass
class TransformerConfig(BlockConfig):
    """The encoder-decoder of §3. Defaults are the paper's base model (Table 3, first row)."""

    vocab_size: int = 37000  # §5.1: shared source-target BPE vocabulary of ~37k tokens
    tgt_vocab_size: int | None = None  # None: one joint vocabulary for source and target
    n_layers: int = 6  # §3.1: N = 6 for both stacks unless the two counts below are set
    n_encoder_layers: int | None = None
    n_decoder_layers: int | None = None
    max_len: int = 1024
    positions: str = "sinusoidal"  # §3.5; "learned" is Table 3 row (E); "none" adds nothing
    # §3.4: share source/target embeddings and the pre-softmax projection. None = on when the
    # vocabulary is joint; a separate target vocabulary shares only target emb. <-> projection.
    share_embeddings: bool | None = None
    scale_embeddings: bool = True  # §3.4: embeddings are multiplied by sqrt(d_model)
    # A LayerNorm after the last layer of each stack. The paper's post-norm has none (each layer
    # already ends in one); pre-norm needs it. None = follow norm_first. torch.nn.Transformer
    # always has one, so parity with it sets True.
    final_norm: bool | None = None
    pad_id: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.n_encoder_layers is None:
            self.n_encoder_layers = self.n_layers
        if self.n_decoder_layers is None:
            self.n_decoder_layers = self.n_layers
        if self.share_embeddings is None:
            self.share_embeddings = self.tgt_vocab_size is None
        if self.final_norm is None:
            self.final_norm = self.norm_first
        for name in ("vocab_size", "n_layers", "max_len"):
            if getattr(self, name) <= 0:
                _fail(name, getattr(self, name), "must be a positive integer")
        for name in ("tgt_vocab_size", "n_encoder_layers", "n_decoder_layers"):
            if getattr(self, name) is not None and getattr(self, name) < 0:
                _fail(name, getattr(self, name), "must be a non-negative integer")
        if self.positions not in POSITIONS:
            _fail("positions", self.positions, f"must be one of {', '.join(POSITIONS)}")
        if self.share_embeddings and self.tgt_vocab_size not in (None, self.vocab_size):
            _fail("share_embeddings", True, "source and target embeddings can only be shared "
                  f"with one vocabulary (vocab_size={self.vocab_size}, tgt_vocab_size={self.tgt_vocab_size})")
        if not 0 <= self.pad_id < self.vocab_size:
            _fail("pad_id", self.pad_id, f"must be a token id below vocab_size={self.vocab_size}")

    @property
    def target_vocab_size(self) -> int:
        return self.tgt_vocab_size if self.tgt_vocab_size is not None else self.vocab_size


# The paper's Table 3 rows, and CPU-sized variants. Presets are data: a dict of overrides.
TRANSFORMER_PRESETS: dict[str, dict[str, Any]] = {
    # Table 3 "base": N=6, d_model 512, d_ff 2048, h 8, P_drop 0.1, 65M parameters.
    "base": dict(d_model=512, n_heads=8, d_ff=2048, n_layers=6, dropout=0.1),
    # Table 3 "big": N=6, d_model 1024, d_ff 4096, h 16, P_drop 0.3, 213M parameters.
    "big": dict(d_model=1024, n_heads=16, d_ff=4096, n_layers=6, dropout=0.3),
    # CPU-sized: what trains in minutes on 2 cores (the benchmark shape).
    "small": dict(d_model=256, n_heads=4, d_ff=1024, n_layers=3, dropout=0.1, vocab_size=8000),
    # Unit-test sized.
    "tiny": dict(d_model=16, n_heads=2, d_ff=32, n_layers=2, dropout=0.0, vocab_size=50, max_len=64),
}


def preset(name: str, **overrides: Any) -> TransformerConfig:
    """A named TransformerConfig preset with optional field overrides."""
    if name not in TRANSFORMER_PRESETS:
        _fail("preset", name, f"unknown preset; choose one of {', '.join(TRANSFORMER_PRESETS)}")
    return TransformerConfig.from_dict({**TRANSFORMER_PRESETS[name], **overrides})
