"""What the encoder-decoder converters (hf_marian.py, hf_bart.py, hf_t5.py) share: the check that
a translation model has the architecture's shape, and the weights renamed both ways around one
embedding matrix that source, target and the output layer share (§3.4).

Their name lists hold (aiayn name, HF name) or (aiayn name, HF name, how), where `how` is what a
`layout` needs to know of the tensor (Marian's d_model renumbering: "reads", "writes", "none").
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from torch import Tensor, nn

from aiayn.config import TransformerConfig
from aiayn.errors import UserError

Names = Iterable[tuple[str, ...]]
Layout = Callable[[Tensor, str], Tensor]


def check_shape(config: TransformerConfig, shape: dict[str, Any], name: str,
                architecture: str) -> None:
    """Each option of `shape` (TransformerConfig option -> the value `name` has) is the model's;
    a UserError naming the first that is not."""
    for key, value in shape.items():
        if getattr(config, key, value) != value:
            raise UserError(f"model.{key}={getattr(config, key)!r}: {name} has {key}={value!r}, "
                            f"so this translation model has no exact {architecture}")


def _as_it_is(value: Tensor, how: str = "none") -> Tensor:
    return value


def _own_copies(weights: dict[str, Tensor]) -> dict[str, Tensor]:
    """Every tensor contiguous and a copy of its own (no storage shared with a model, a
    checkpoint or another entry)."""
    return {k: v.contiguous().clone() for k, v in weights.items()}


def to_hf_weights(model: nn.Module, shared_as: Iterable[str], names: Names,
                  extra: dict[str, Tensor] | None = None,
                  layout: Layout | None = None) -> dict[str, Tensor]:
    """An encoder-decoder's weights (float32) under HF's names: the embedding matrix source and
    target share under each name of `shared_as`, `extra` (HF name -> tensor) as given, and each
    parameter of `names` under its HF name, through `layout(tensor, how)` where given (the
    embedding's `how` is "reads": d_model is its columns)."""
    ours = {k: v.detach().float() for k, v in model.state_dict().items()}
    relaid = layout or _as_it_is
    out = dict.fromkeys(shared_as, relaid(ours["src_embed.tokens.weight"], "reads"))
    out.update(extra or {})
    for mine, theirs, *how in names:
        out[theirs] = relaid(ours[mine], *how)
    return _own_copies(out)


def weight_getter(state: dict[str, Tensor], where: str,
                  architecture: str) -> Callable[[str], Tensor]:
    """get(HF name): that tensor of the checkpoint `state` in float32; a UserError naming it, and
    the `architecture` expected ("MarianMTModel"), where `state` lacks it."""
    def get(name: str) -> Tensor:
        if name not in state:
            raise UserError(f"{where}: the weights have no {name!r} (not a {architecture} "
                            "checkpoint of this config?)")
        return state[name].float()

    return get


def from_hf_weights(get: Callable[[str], Tensor], embedding: Tensor, names: Names,
                    output: Tensor | None = None, extra: dict[str, Tensor] | None = None,
                    layout: Layout | None = None) -> dict[str, Tensor]:
    """An encoder-decoder's weights under aiayn's names (the inverse of to_hf_weights):
    `embedding` as the source and target embeddings and the output layer (`output` where the
    output layer is its own), `extra` (aiayn name -> tensor) as given, and each parameter of
    `names` read with get(HF name), through `layout(tensor, how)` where given."""
    relaid = layout or _as_it_is
    out = {"src_embed.tokens.weight": embedding, "tgt_embed.tokens.weight": embedding,
           "output.weight": embedding if output is None else output, **(extra or {})}
    for mine, theirs, *how in names:
        out[mine] = relaid(get(theirs), *how)
    return _own_copies(out)


__all__ = ["Layout", "Names", "check_shape", "from_hf_weights", "to_hf_weights", "weight_getter"]
