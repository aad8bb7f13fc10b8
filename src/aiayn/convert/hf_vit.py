"""HF ViT (``transformers``' ViTModel / ViTForImageClassification, or a local checkpoint folder)
<-> aiayn VisionTransformer (``config_to_hf`` / ``to_hf_state_dict``: ``aiayn export hf``).

ViT's foreign names live only here. Its layers are pre-norm encoder layers:

    embeddings.cls_token (1, 1, D)            cls_token
    embeddings.position_embeddings (1, N+1, D) positions.weight (N+1, D)
    embeddings.patch_embeddings.projection    patch_embed.proj: a Conv2d kernel (D, C, P, P),
                                              flattened to the Linear (D, C*P*P) of patchify's layout
    encoder.layer.i.layernorm_before / layernorm_after
                                              encoder.layers.i.attn_residual.norm / ffn_residual.norm
    encoder.layer.i.attention.attention.query / key / value, attention.output.dense
                                              encoder.layers.i.self_attn.q_proj / k_proj /
                                                  v_proj / out_proj
    encoder.layer.i.intermediate.dense / output.dense
                                              encoder.layers.i.ffn.w1 / ffn.w2
    (transformers >= 5 in memory: layers.i.attention.q_proj / k_proj / v_proj / o_proj, mlp.fc1 / fc2)
    layernorm                                 encoder.norm
    classifier                                head

ViTModel's pooler (dense + tanh on [CLS]) is not used by ViTForImageClassification and has no
counterpart; it is left out.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from aiayn.config import ViTConfig
from aiayn.convert import TO_HF_ACTIVATION, activation_from_hf, read_hf_folder, weights_path
from aiayn.convert.hf_encoder import checked_config, renamed_state
from aiayn.errors import UserError
from aiayn.models.vit import VisionTransformer

_LAYER = {
    "layernorm_before": "attn_residual.norm", "layernorm_after": "ffn_residual.norm",
    "attention.attention.query": "self_attn.q_proj", "attention.attention.key": "self_attn.k_proj",
    "attention.attention.value": "self_attn.v_proj", "attention.output.dense": "self_attn.out_proj",
    "intermediate.dense": "ffn.w1", "output.dense": "ffn.w2",
    # transformers >= 5 names the same modules differently in memory (files keep the names above).
    "attention.q_proj": "self_attn.q_proj", "attention.k_proj": "self_attn.k_proj",
    "attention.v_proj": "self_attn.v_proj", "attention.o_proj": "self_attn.out_proj",
    "mlp.fc1": "ffn.w1", "mlp.fc2": "ffn.w2",
}
_IGNORED = ("pooler.",)


def config_from_hf(hf_config: Any, hf_state: Mapping[str, Tensor] | None = None) -> ViTConfig:
    """A transformers ViTConfig (or its config.json as a dict) -> the ViTConfig of the same model."""
    c = hf_config if isinstance(hf_config, Mapping) else hf_config.to_dict()
    state = {k.removeprefix("vit."): v for k, v in (hf_state or {}).items()}
    act = activation_from_hf(c.get("hidden_act", "gelu"), "ViT config hidden_act")
    if c.get("qkv_bias", True) is False:
        raise UserError("ViT config qkv_bias=false is not supported "
                        "(aiayn projections share one bias flag)")
    size, patch = c.get("image_size", 224), c.get("patch_size", 16)
    if isinstance(size, list | tuple) or isinstance(patch, list | tuple):
        raise UserError("ViT config with non-square image_size / patch_size is not supported")
    return ViTConfig(
        d_model=c.get("hidden_size", 768), n_heads=c.get("num_attention_heads", 12),
        d_ff=c.get("intermediate_size", 3072), n_layers=c.get("num_hidden_layers", 12),
        activation=act, dropout=float(c.get("hidden_dropout_prob", 0.0)),
        attn_dropout=float(c.get("attention_probs_dropout_prob", 0.0)),
        layer_norm_eps=float(c.get("layer_norm_eps", 1e-12)), image_size=size, patch_size=patch,
        channels=c.get("num_channels", 3),
        n_classes=state["classifier.weight"].shape[0] if "classifier.weight" in state else 0)


def convert_state_dict(hf_state: Mapping[str, Tensor], config: ViTConfig) -> dict[str, Tensor]:
    """ViT parameter names and layouts -> a VisionTransformer state dict."""
    return renamed_state(((name.removeprefix("vit."), t) for name, t in hf_state.items()),
                         _map_name, _IGNORED, "ViT", "VisionTransformer", _layout)


def _layout(ours: str, tensor: Tensor) -> Tensor:
    if ours == "positions.weight":
        return tensor.reshape(tensor.shape[-2], tensor.shape[-1])  # (1, N+1, D) -> (N+1, D)
    if ours == "patch_embed.proj.weight":
        return tensor.reshape(tensor.shape[0], -1)  # (D, C, P, P) -> (D, C*P*P)
    return tensor


def _map_name(name: str) -> str | None:
    fixed = {"embeddings.cls_token": "cls_token", "embeddings.position_embeddings": "positions.weight"}
    if name in fixed:
        return fixed[name]
    module, _, param = name.rpartition(".")
    top = {"embeddings.patch_embeddings.projection": "patch_embed.proj", "layernorm": "encoder.norm",
           "classifier": "head"}
    if module in top:
        return f"{top[module]}.{param}"
    parts = module.split(".")
    if parts[:2] == ["encoder", "layer"]:  # checkpoint files: encoder.layer.i.*
        parts = parts[1:]
    if parts[0] in ("layer", "layers") and len(parts) > 2 and ".".join(parts[2:]) in _LAYER:
        return f"encoder.layers.{parts[1]}.{_LAYER['.'.join(parts[2:])]}.{param}"
    return None


def config_to_hf(config: ViTConfig, classes: list[str]) -> dict[str, Any]:
    """The ViTConfig of transformers (as config.json) of a VisionTransformer with a head; a
    UserError naming the option ViT lacks."""
    if not config.norm_first:
        raise UserError("model.norm_first=False: ViT is pre-norm, so this model has no exact "
                        "ViTForImageClassification")
    if config.n_classes == 0:
        raise UserError("model.n_classes=0: the model has no classification head to export")
    hf_act = TO_HF_ACTIVATION[config.activation]
    names = classes if len(classes) == config.n_classes else [str(i) for i in range(config.n_classes)]
    return {"architectures": ["ViTForImageClassification"], "model_type": "vit",
            "hidden_size": config.d_model, "num_attention_heads": config.n_heads,
            "intermediate_size": config.d_ff, "num_hidden_layers": config.n_layers,
            "hidden_act": hf_act, "hidden_dropout_prob": config.dropout,
            "attention_probs_dropout_prob": config.attn_dropout,
            "layer_norm_eps": config.layer_norm_eps, "image_size": config.image_size,
            "patch_size": config.patch_size, "num_channels": config.channels,
            "qkv_bias": config.bias, "initializer_range": 0.02,
            "id2label": {str(i): n for i, n in enumerate(names)},
            "label2id": {n: i for i, n in enumerate(names)}}


def to_hf_state_dict(model: VisionTransformer) -> dict[str, Tensor]:
    """A VisionTransformer's weights under ViTForImageClassification's checkpoint names."""
    cfg = model.config
    out: dict[str, Tensor] = {}
    names = {v: k for k, v in list(_LAYER.items())[:8]}  # aiayn -> checkpoint-file names
    for name, tensor in model.state_dict().items():
        if name == "cls_token":
            out["vit.embeddings.cls_token"] = tensor
        elif name == "positions.weight":
            out["vit.embeddings.position_embeddings"] = tensor[None]  # (N+1, D) -> (1, N+1, D)
        elif name.startswith("patch_embed.proj."):
            p = cfg.patch_size
            if name.endswith("weight"):  # (D, C*P*P) -> the Conv2d kernel (D, C, P, P)
                tensor = tensor.reshape(cfg.d_model, cfg.channels, p, p)
            out[f"vit.embeddings.patch_embeddings.projection.{name.rpartition('.')[2]}"] = tensor
        elif name.startswith("encoder.norm."):
            out[f"vit.layernorm.{name.rpartition('.')[2]}"] = tensor
        elif name.startswith("head."):
            out[f"classifier.{name.rpartition('.')[2]}"] = tensor
        else:  # encoder.layers.i.<module>.<param>
            _, _, i, rest = name.split(".", 3)
            module, _, param = rest.rpartition(".")
            out[f"vit.encoder.layer.{i}.{names[module]}.{param}"] = tensor
    return {k: v.detach().float().contiguous().clone() for k, v in out.items()}


def _load(model: VisionTransformer, state: dict[str, Tensor], where: str) -> None:
    missing, unexpected = model.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise UserError(f"{where} do not match the config (missing {missing[:3]}, "
                        f"unexpected {unexpected[:3]})")


def from_hf(hf_model: torch.nn.Module) -> VisionTransformer:
    """A transformers ViTModel / ViTForImageClassification -> an equivalent VisionTransformer."""
    state = hf_model.state_dict()
    config = config_from_hf(hf_model.config, state)
    model = VisionTransformer(config)
    _load(model, convert_state_dict(state, config), "ViT weights")
    return model.eval()


def load_hf_folder(folder: str | Path) -> VisionTransformer:
    """A local ViT folder (config.json + model.safetensors) -> VisionTransformer. No network."""
    hf_config, state, config_path = read_hf_folder(folder, "ViT")
    config = checked_config(config_from_hf, hf_config, state, config_path)
    model = VisionTransformer(config)
    _load(model, convert_state_dict(state, config), str(weights_path(folder)))
    return model.eval()


__all__ = ["config_from_hf", "config_to_hf", "convert_state_dict", "from_hf", "load_hf_folder",
           "to_hf_state_dict"]
