"""HF BERT (``transformers``' BertModel / BertForMaskedLM / BertForSequenceClassification, or a
local checkpoint folder such as all-MiniLM-L6-v2) <-> aiayn EncoderModel (``config_to_hf`` /
``to_hf_state_dict``: ``aiayn export hf``).

BERT's foreign names live only here. Its layers are the paper's post-norm encoder layers, so every
parameter has an aiayn counterpart:

    embeddings.word_embeddings / position_embeddings / token_type_embeddings
                                          embed.tokens / embed.positions / embed.segments
    embeddings.LayerNorm                  embed.norm
    encoder.layer.i.attention.self.query / key / value
                                          encoder.layers.i.self_attn.q_proj / k_proj / v_proj
    encoder.layer.i.attention.output.dense / LayerNorm
                                          encoder.layers.i.self_attn.out_proj / attn_residual.norm
    encoder.layer.i.intermediate.dense    encoder.layers.i.ffn.w1
    encoder.layer.i.output.dense / LayerNorm
                                          encoder.layers.i.ffn.w2 / ffn_residual.norm
    pooler.dense                          pooler
    cls.predictions.transform.dense / LayerNorm, cls.predictions.bias
                                          mlm.dense / mlm.norm, mlm.output.bias (weight tied)
    classifier                            classifier

The next-sentence head (``cls.seq_relationship``) has no counterpart and is left out.
Works offline: ``import_folder`` reads a local folder (config.json + model.safetensors +
tokenizer.json); pickled ``pytorch_model.bin`` files are refused (safetensors only).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from aiayn.config import EncoderConfig
from aiayn.convert import TO_HF_ACTIVATION, activation_from_hf, read_hf_folder, weights_path
from aiayn.convert.hf_encoder import checked_config, renamed_state
from aiayn.errors import UserError
from aiayn.models.encoder import EncoderModel

_LAYER = {
    "attention.self.query": "self_attn.q_proj", "attention.self.key": "self_attn.k_proj",
    "attention.self.value": "self_attn.v_proj", "attention.output.dense": "self_attn.out_proj",
    "attention.output.LayerNorm": "attn_residual.norm", "intermediate.dense": "ffn.w1",
    "output.dense": "ffn.w2", "output.LayerNorm": "ffn_residual.norm",
}
_TOP = {
    "embeddings.word_embeddings": "embed.tokens", "embeddings.position_embeddings": "embed.positions",
    "embeddings.token_type_embeddings": "embed.segments", "embeddings.LayerNorm": "embed.norm",
    "pooler.dense": "pooler", "cls.predictions.transform.dense": "mlm.dense",
    "cls.predictions.transform.LayerNorm": "mlm.norm", "classifier": "classifier",
}
# Not weights (buffers some transformers versions save), or heads aiayn has no counterpart for.
_IGNORED = ("embeddings.position_ids", "cls.seq_relationship.", "cls.predictions.decoder.weight")


def _strip(hf_state: Mapping[str, Tensor]) -> dict[str, Tensor]:
    out = {}
    for k, v in hf_state.items():
        k = k.removeprefix("bert.")
        # Old checkpoints name LayerNorm parameters gamma / beta.
        k = k.replace("LayerNorm.gamma", "LayerNorm.weight").replace("LayerNorm.beta", "LayerNorm.bias")
        out[k] = v
    return out


def config_from_hf(hf_config: Any, hf_state: Mapping[str, Tensor] | None = None) -> EncoderConfig:
    """A BertConfig (or its config.json as a dict) -> the EncoderConfig of the same model.

    Which heads exist (pooler, masked-LM, classifier) is read from the weights when given.
    """
    c = hf_config if isinstance(hf_config, Mapping) else hf_config.to_dict()
    state = _strip(hf_state) if hf_state is not None else {}
    if c.get("position_embedding_type", "absolute") != "absolute":
        raise UserError(f"BERT config position_embedding_type={c['position_embedding_type']!r} "
                        "is not supported (only 'absolute')")
    if c.get("is_decoder") or c.get("add_cross_attention"):
        raise UserError("BERT config is_decoder / add_cross_attention is not supported by EncoderModel")
    act = activation_from_hf(c.get("hidden_act", "gelu"), "BERT config hidden_act")
    n_labels = state["classifier.weight"].shape[0] if "classifier.weight" in state else 0
    return EncoderConfig(
        vocab_size=c.get("vocab_size", 30522), d_model=c.get("hidden_size", 768),
        n_heads=c.get("num_attention_heads", 12), d_ff=c.get("intermediate_size", 3072),
        n_layers=c.get("num_hidden_layers", 12), max_len=c.get("max_position_embeddings", 512),
        type_vocab_size=c.get("type_vocab_size", 2), activation=act,
        dropout=float(c.get("hidden_dropout_prob", 0.1)),
        attn_dropout=float(c.get("attention_probs_dropout_prob", 0.1)),
        layer_norm_eps=float(c.get("layer_norm_eps", 1e-12)), pad_id=c.get("pad_token_id") or 0,
        pooler=not state or "pooler.dense.weight" in state,
        mlm_head=bool(state) and "cls.predictions.transform.dense.weight" in state,
        n_labels=n_labels)


def convert_state_dict(hf_state: Mapping[str, Tensor], config: EncoderConfig) -> dict[str, Tensor]:
    """BERT parameter names -> an EncoderModel state dict (the tied MLM projection left out)."""
    return renamed_state(_strip(hf_state).items(), _map_name, _IGNORED, "BERT", "EncoderModel")


def _map_name(name: str) -> str | None:
    module, _, param = name.rpartition(".")
    if name == "cls.predictions.bias" or name == "cls.predictions.decoder.bias":
        return "mlm.output.bias"
    if module in _TOP:
        return f"{_TOP[module]}.{param}"
    parts = module.split(".")
    if parts[:2] == ["encoder", "layer"] and len(parts) > 3:
        sub = ".".join(parts[3:])
        if sub in _LAYER:
            return f"encoder.layers.{parts[2]}.{_LAYER[sub]}.{param}"
    return None


# EncoderConfig option -> BERT's value
_BERT_SHAPE = {"norm_first": False, "embedding_norm": True, "pool": "cls", "bias": True}


def architecture(config: EncoderConfig) -> str:
    """The transformers class an encoder exports as: with a classifier, a masked-LM head, or
    neither."""
    return "BertForSequenceClassification" if config.n_labels else \
        "BertForMaskedLM" if config.mlm_head else "BertModel"


def config_to_hf(config: EncoderConfig, labels: list[str]) -> dict[str, Any]:
    """The BertConfig (as config.json) of an encoder; a UserError naming the option BERT lacks."""
    for key, value in _BERT_SHAPE.items():
        if getattr(config, key) != value:
            raise UserError(f"model.{key}={getattr(config, key)!r}: BERT has {key}={value!r}, so "
                            "this encoder has no exact BERT model")
    if config.type_vocab_size == 0:
        raise UserError("model.type_vocab_size=0: BERT always has segment embeddings")
    if config.n_labels and not config.pooler:
        raise UserError("model.pooler=False: BertForSequenceClassification reads its pooler")
    hf_act = TO_HF_ACTIVATION[config.activation]
    out = {"architectures": [architecture(config)], "model_type": "bert",
           "vocab_size": config.vocab_size, "hidden_size": config.d_model,
           "num_attention_heads": config.n_heads, "intermediate_size": config.d_ff,
           "num_hidden_layers": config.n_layers, "max_position_embeddings": config.max_len,
           "type_vocab_size": config.type_vocab_size, "hidden_act": hf_act,
           "hidden_dropout_prob": config.dropout,
           "attention_probs_dropout_prob": config.attn_dropout,
           "layer_norm_eps": config.layer_norm_eps, "pad_token_id": config.pad_id,
           "position_embedding_type": "absolute", "initializer_range": 0.02}
    if config.n_labels:
        names = labels if len(labels) == config.n_labels else [str(i) for i in range(config.n_labels)]
        out["id2label"] = {str(i): n for i, n in enumerate(names)}
        out["label2id"] = {n: i for i, n in enumerate(names)}
    return out


def to_hf_state_dict(model: EncoderModel) -> dict[str, Tensor]:
    """An EncoderModel's weights under the names of its transformers class (architecture())."""
    prefix = "" if architecture(model.config) == "BertModel" else "bert."
    top = {v: k for k, v in _TOP.items()}
    layer = {v: k for k, v in _LAYER.items()}
    out: dict[str, Tensor] = {}
    for name, tensor in model.state_dict().items():
        module, _, param = name.rpartition(".")
        if name == "mlm.output.weight":  # tied to the token embeddings, as BERT's decoder is
            out["cls.predictions.decoder.weight"] = tensor
        elif name == "mlm.output.bias":
            out["cls.predictions.bias"] = tensor
        elif module in top:
            theirs = top[module]
            outside = theirs.startswith(("cls.", "classifier"))  # heads sit outside bert.
            out[f"{'' if outside else prefix}{theirs}.{param}"] = tensor
        elif module.startswith("encoder.layers."):
            _, _, i, sub = module.split(".", 3)
            out[f"{prefix}encoder.layer.{i}.{layer[sub]}.{param}"] = tensor
        else:
            raise UserError(f"encoder parameter {name!r} has no BERT counterpart")
    if architecture(model.config) != "BertForMaskedLM":  # the only one with the masked-LM head
        out = {k: v for k, v in out.items() if not k.startswith("cls.")}
    return {k: v.detach().float().contiguous().clone() for k, v in out.items()}


def load_state(model: EncoderModel, state: dict[str, Tensor], where: str = "BERT weights") -> None:
    """Load a converted state dict, requiring every parameter (but the tied projection)."""
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [m for m in missing if m != "mlm.output.weight"]
    if missing or unexpected:
        raise UserError(f"{where} do not match the config (missing {missing[:3]}, "
                        f"unexpected {unexpected[:3]})")


def from_hf(hf_model: torch.nn.Module) -> EncoderModel:
    """A transformers BertModel / BertForMaskedLM / BertForSequenceClassification -> an
    equivalent EncoderModel (eval mode)."""
    state = hf_model.state_dict()
    config = config_from_hf(hf_model.config, state)
    model = EncoderModel(config)
    load_state(model, convert_state_dict(state, config))
    return model.eval()


def load_hf_folder(folder: str | Path) -> tuple[EncoderModel, dict[str, Any]]:
    """A local BERT folder (config.json + model.safetensors) -> (EncoderModel, the HF config dict)."""
    hf_config, state, config_path = read_hf_folder(folder, "BERT")
    if hf_config.get("model_type", "bert") != "bert":
        raise UserError(f"{config_path}: model_type={hf_config['model_type']!r}, expected 'bert'")
    config = checked_config(config_from_hf, hf_config, state, config_path)
    model = EncoderModel(config)
    load_state(model, convert_state_dict(state, config), str(weights_path(folder)))
    return model.eval(), hf_config


__all__ = ["architecture", "config_from_hf", "config_to_hf", "convert_state_dict", "from_hf",
           "load_hf_folder", "load_state", "to_hf_state_dict"]


def sentence_transformers_max_len(folder: Path) -> int | None:
    """sentence-transformers' max_seq_length (sentence_bert_config.json), when the folder has one."""
    path = folder / "sentence_bert_config.json"
    if not path.is_file():
        return None
    try:
        value = json.loads(path.read_text(encoding="utf-8")).get("max_seq_length")
    except (json.JSONDecodeError, UnicodeDecodeError, AttributeError, RecursionError) as e:
        raise UserError(f"{path}: invalid JSON ({e})") from None
    if value is not None and (not isinstance(value, int) or value < 3):
        raise UserError(f"{path}: max_seq_length={value!r} must be an integer >= 3")
    return value


_HF_SPECIALS = {"pad": "[PAD]", "cls": "[CLS]", "sep": "[SEP]", "unk": "[UNK]", "mask": "[MASK]"}


def load_hf_tokenizer(folder: Path, pad_id: int):
    """(the folder's fast tokenizer without padding or truncation, its special ids by aiayn's
    names: pad / cls / sep / unk [/ mask])."""
    from tokenizers import Tokenizer as HFTokenizer

    tok_path = folder / "tokenizer.json"
    if not tok_path.is_file():
        raise UserError(f"{tok_path}: not found (the importer needs the fast tokenizer file)")
    try:
        hf_tok = HFTokenizer.from_file(str(tok_path))
    except Exception as e:  # tokenizers raises a bare Exception
        raise UserError(f"{tok_path}: not a valid tokenizer file ({str(e).splitlines()[0]})") from None
    hf_tok.no_padding()  # the file may pad every text to a fixed length; aiayn pads per batch
    hf_tok.no_truncation()  # truncation is TextEncoder's (max_seq_length / max_len)
    special = {name: hf_tok.token_to_id(tok) for name, tok in _HF_SPECIALS.items()}
    missing = [tok for name, tok in _HF_SPECIALS.items() if special[name] is None and name != "mask"]
    if missing:
        raise UserError(f"{tok_path}: special token {missing[0]} not in the vocabulary")
    special = {k: v for k, v in special.items() if v is not None}
    if special["pad"] != pad_id:
        raise UserError(f"{tok_path}: [PAD] is id {special['pad']} but config.json says "
                        f"pad_token_id={pad_id}")
    return hf_tok, special

