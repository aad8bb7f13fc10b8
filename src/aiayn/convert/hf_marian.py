"""aiayn Transformer (translation) -> HF ``transformers``' MarianMTModel, exactly.

Marian's architecture in ``transformers`` is the paper's: post-norm encoder and decoder layers,
sinusoidal positions, embeddings scaled by sqrt(d_model), one embedding matrix shared by source,
target and the pre-softmax projection (§3.4), no final LayerNorm. Every parameter maps:

    src/tgt_embed.tokens, output          model.shared, lm_head (tied), final_logits_bias = 0
    encoder.layers.i.self_attn.*          model.encoder.layers.i.self_attn.{q,k,v,out}_proj
    encoder.layers.i.attn_residual.norm   model.encoder.layers.i.self_attn_layer_norm
    encoder.layers.i.ffn.w1 / w2          model.encoder.layers.i.fc1 / fc2
    encoder.layers.i.ffn_residual.norm    model.encoder.layers.i.final_layer_norm
    decoder.layers.i.self_*/cross_*       model.decoder.layers.i.self_attn* / encoder_attn*

One difference is in the positions, not the weights: §3.5 interleaves sines and cosines (even
dimensions sin, odd cos), Marian puts all sines first, then all cosines, and computes its table
itself (it is not in the checkpoint). The two tables are the same columns in another order, so
the export renumbers the model's d_model dimensions with that permutation everywhere the residual
stream is read or written (embeddings, LayerNorms, the inputs of every projection and the outputs
of out_proj and fc2). LayerNorm, attention and the tied output are unchanged by a renumbering,
so the exported model computes the same logits.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from aiayn.config import TransformerConfig
from aiayn.data.special import BOS, EOS, PAD
from aiayn.errors import UserError
from aiayn.models.transformer import Transformer

# TransformerConfig option -> Marian's value
_MARIAN_SHAPE = {"norm_first": False, "final_norm": False, "positions": "sinusoidal",
                 "share_embeddings": True, "bias": True, "layer_norm_eps": 1e-5}
_ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "gelu_tanh": "gelu_new"}


def config_to_hf(config: TransformerConfig) -> dict[str, Any]:
    """The MarianConfig (as config.json) of a translation model; a UserError naming the first
    option Marian does not have."""
    for key, value in _MARIAN_SHAPE.items():
        if getattr(config, key) != value:
            raise UserError(f"model.{key}={getattr(config, key)!r}: Marian has {key}={value!r}, "
                            "so this translation model has no exact MarianMTModel")
    if config.d_model % 2:
        raise UserError(f"model.d_model={config.d_model}: Marian's positions need an even d_model")
    return {"architectures": ["MarianMTModel"], "model_type": "marian",
            "vocab_size": config.vocab_size, "decoder_vocab_size": config.vocab_size,
            "d_model": config.d_model, "encoder_layers": config.n_encoder_layers,
            "decoder_layers": config.n_decoder_layers,
            "encoder_attention_heads": config.n_heads, "decoder_attention_heads": config.n_heads,
            "encoder_ffn_dim": config.d_ff, "decoder_ffn_dim": config.d_ff,
            "activation_function": _ACTIVATIONS[config.activation],
            "dropout": config.dropout, "attention_dropout": config.attn_dropout,
            "activation_dropout": 0.0, "max_position_embeddings": config.max_len,
            "scale_embedding": config.scale_embeddings,
            "share_encoder_decoder_embeddings": True, "tie_word_embeddings": True,
            "pad_token_id": PAD, "eos_token_id": EOS, "bos_token_id": BOS,
            "decoder_start_token_id": BOS, "forced_eos_token_id": EOS,
            "is_encoder_decoder": True, "init_std": 0.02}


def position_permutation(d_model: int) -> Tensor:
    """perm with marian_table[:, j] == paper_table[:, perm[j]]: sines (even columns) first."""
    return torch.cat([torch.arange(0, d_model, 2), torch.arange(1, d_model, 2)])


def to_hf_state_dict(model: Transformer) -> dict[str, Tensor]:
    """The model's weights under MarianMTModel's names, with d_model renumbered (see above)."""
    perm = position_permutation(model.config.d_model)
    ours = {k: v.detach().float() for k, v in model.state_dict().items()}

    def reads(name: str) -> Tensor:  # a Linear whose input is the residual stream
        return ours[name][:, perm]

    def writes(name: str) -> Tensor:  # a Linear (or bias, or LayerNorm) on the residual stream
        return ours[name][perm]

    out = {"model.shared.weight": ours["src_embed.tokens.weight"][:, perm]}
    out["model.encoder.embed_tokens.weight"] = out["model.decoder.embed_tokens.weight"] = \
        out["lm_head.weight"] = out["model.shared.weight"]
    out["final_logits_bias"] = torch.zeros(1, model.config.vocab_size)
    attention = {"encoder": [("self_attn", "self_attn", "attn_residual")],
                 "decoder": [("self_attn", "self_attn", "self_residual"),
                             ("cross_attn", "encoder_attn", "cross_residual")]}
    for side, n_layers in (("encoder", model.config.n_encoder_layers),
                           ("decoder", model.config.n_decoder_layers)):
        for i in range(n_layers):
            src, dst = f"{side}.layers.{i}.", f"model.{side}.layers.{i}."
            for mine, theirs, residual in attention[side]:
                for proj in ("q_proj", "k_proj", "v_proj"):
                    out[f"{dst}{theirs}.{proj}.weight"] = reads(f"{src}{mine}.{proj}.weight")
                    out[f"{dst}{theirs}.{proj}.bias"] = ours[f"{src}{mine}.{proj}.bias"]
                out[f"{dst}{theirs}.out_proj.weight"] = writes(f"{src}{mine}.out_proj.weight")
                out[f"{dst}{theirs}.out_proj.bias"] = writes(f"{src}{mine}.out_proj.bias")
                for p in ("weight", "bias"):
                    out[f"{dst}{theirs}_layer_norm.{p}"] = writes(f"{src}{residual}.norm.{p}")
            out[f"{dst}fc1.weight"] = reads(f"{src}ffn.w1.weight")
            out[f"{dst}fc1.bias"] = ours[f"{src}ffn.w1.bias"]
            out[f"{dst}fc2.weight"] = writes(f"{src}ffn.w2.weight")
            out[f"{dst}fc2.bias"] = writes(f"{src}ffn.w2.bias")
            for p in ("weight", "bias"):
                out[f"{dst}final_layer_norm.{p}"] = writes(f"{src}ffn_residual.norm.{p}")
    return {k: v.contiguous().clone() for k, v in out.items()}


__all__ = ["config_to_hf", "position_permutation", "to_hf_state_dict"]
