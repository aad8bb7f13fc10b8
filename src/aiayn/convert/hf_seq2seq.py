"""What the encoder-decoder converters (hf_marian.py, hf_bart.py, hf_t5.py) share: the layer names
of Marian and BART (fairseq's), the weights renamed both ways around one embedding matrix that
source, target and the output layer share (§3.4), and a folder's tokenizer_config.json. Which
options each architecture can express is aiayn.config.options' table.

Their name lists hold (aiayn name, HF name) or (aiayn name, HF name, how), where `how` is what a
`layout` needs to know of the tensor (Marian's d_model renumbering: "reads", "writes", "none").
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from torch import Tensor, nn

from aiayn.config import TransformerConfig
from aiayn.errors import UserError
from aiayn.folder import read_json

Names = Iterable[tuple[str, ...]]
Layout = Callable[[Tensor, str], Tensor]


def layer_names(config: TransformerConfig) -> list[tuple[str, str, str]]:
    """(aiayn name, Marian / BART name, how d_model is laid out in it) of every layer parameter; how:
    "reads" (a Linear reading the residual stream: its columns), "writes" (a Linear, bias or
    LayerNorm writing it: its rows) or "none" (inside a sublayer: untouched)."""
    names = []
    attention = {"encoder": [("self_attn", "self_attn", "attn_residual")],
                 "decoder": [("self_attn", "self_attn", "self_residual"),
                             ("cross_attn", "encoder_attn", "cross_residual")]}
    for side, n_layers in (("encoder", config.n_encoder_layers),
                           ("decoder", config.n_decoder_layers)):
        for i in range(n_layers):
            src, dst = f"{side}.layers.{i}.", f"model.{side}.layers.{i}."
            for mine, theirs, residual in attention[side]:
                for proj in ("q_proj", "k_proj", "v_proj"):
                    names.append((f"{src}{mine}.{proj}.weight", f"{dst}{theirs}.{proj}.weight", "reads"))
                    names.append((f"{src}{mine}.{proj}.bias", f"{dst}{theirs}.{proj}.bias", "none"))
                for p in ("weight", "bias"):
                    names.append((f"{src}{mine}.out_proj.{p}", f"{dst}{theirs}.out_proj.{p}", "writes"))
                    names.append((f"{src}{residual}.norm.{p}", f"{dst}{theirs}_layer_norm.{p}", "writes"))
            names += [(f"{src}ffn.w1.weight", f"{dst}fc1.weight", "reads"),
                      (f"{src}ffn.w1.bias", f"{dst}fc1.bias", "none")]
            for p in ("weight", "bias"):
                names.append((f"{src}ffn.w2.{p}", f"{dst}fc2.{p}", "writes"))
                names.append((f"{src}ffn_residual.norm.{p}", f"{dst}final_layer_norm.{p}", "writes"))
    return names


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


def tokenizer_config(folder: Path) -> dict[str, Any]:
    """The folder's tokenizer_config.json as a dict ({} where absent or not an object)."""
    path = folder / "tokenizer_config.json"
    config = read_json(path) if path.is_file() else {}
    return config if isinstance(config, dict) else {}


__all__ = ["Layout", "Names", "from_hf_weights", "layer_names", "to_hf_weights", "tokenizer_config",
           "weight_getter"]
