"""aiayn Transformer (translation) <-> HF ``transformers``' BartForConditionalGeneration, exactly.

BART (Lewis et al. 2020) is the paper's encoder-decoder with these departures, each an option of
TransformerConfig (the "bart-*" presets set them): learned positions read from row 2 of their
table (BartLearnedPositionalEmbedding's offset; §3.5 has sinusoids), a LayerNorm on each stack's
embedding sum (layernorm_embedding), GELU (§3.3: ReLU), embeddings not scaled by sqrt(d_model)
unless scale_embedding (§3.4), and a bias on the tied output layer (final_logits_bias). The layers
are the paper's post-norm ones (§3.1), and one matrix embeds source and target tokens and
projects to the logits (§3.4). Every parameter maps, with no renumbering:

    src/tgt_embed.tokens, output.weight   model.shared (= encoder/decoder embed_tokens, lm_head)
    output.bias                           final_logits_bias (1, V)
    src/tgt_embed.positions               model.encoder/decoder.embed_positions (max_len + 2 rows)
    src/tgt_embed.norm                    model.encoder/decoder.layernorm_embedding
    encoder/decoder.layers.i.*            as for Marian (convert/hf_marian.py's table)

BART's special ids are its own (<s> 0, <pad> 1, </s> 2, <unk> 3) and its decoder starts from
</s>: the folder keeps them (meta "special_ids", with "decoder_start"), its tokenizer is BART's
byte-level BPE unchanged, and sources are <s> ... </s> (meta "source_bos", "source_eos"), as
BartTokenizer makes them. The import keeps the BART folder's config.json and tokenizer files
(meta "hf_original"), which the export of an imported BART gives back (convert/hf_original.py).
Options BART's config names but aiayn lacks (mBART's pre-norm and final LayerNorm, sinusoidal
positions, LayerDrop, ...) are refused in one line naming the key.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from aiayn.config import TransformerConfig
from aiayn.config.options import check_expressible
from aiayn.convert import TO_HF_ACTIVATION, activation_from_hf, read_hf_folder, require_model_type
from aiayn.convert.hf_marian import generation_from_hf as marian_generation
from aiayn.convert.hf_original import KEY, keep
from aiayn.convert.hf_seq2seq import from_hf_weights, layer_names, to_hf_weights, weight_getter
from aiayn.data.special import BOS, EOS
from aiayn.errors import UserError
from aiayn.folder import read_json
from aiayn.models.transformer import Transformer
from aiayn.sizes import check_fits

OFFSET = 2  # BartLearnedPositionalEmbedding.offset: rows of the position table before position 0
# Keys of older BART config.json files (and mBART's) that asked for what aiayn does not have ->
# BART's own value; another value is refused, naming the key.
_LEGACY = {"normalize_before": False, "add_final_layer_norm": False, "normalize_embedding": True,
           "static_position_embeddings": False, "add_bias_logits": False,
           "extra_pos_embeddings": OFFSET, "encoder_layerdrop": 0, "decoder_layerdrop": 0}
_WHY = {"normalize_before": "BART's layers are post-norm (§3.1); mBART's pre-norm is not "
                            "supported",
        "add_final_layer_norm": "mBART's LayerNorm after each stack is not supported",
        "normalize_embedding": "BART normalises its embedding sums; a model without that "
                               "LayerNorm is not supported",
        "static_position_embeddings": "sinusoidal BART positions are not supported",
        "add_bias_logits": "a second logits bias is not supported",
        "extra_pos_embeddings": f"BART's position table starts {OFFSET} rows in",
        "encoder_layerdrop": "aiayn has no LayerDrop", "decoder_layerdrop": "aiayn has no LayerDrop"}


def is_bart(config: TransformerConfig) -> bool:
    """Whether the export of this translation model is a BART (else a Marian)."""
    return config.embedding_norm or config.position_offset == OFFSET or config.output_bias


def config_to_hf(config: TransformerConfig) -> dict[str, Any]:
    """The BartConfig (as config.json) of a translation model; a UserError naming the first
    option BART does not have. aiayn's special ids; an imported model's own replace them."""
    check_expressible(config, "bart")  # aiayn.config.options, column "bart"
    return {"architectures": ["BartForConditionalGeneration"], "model_type": "bart",
            "vocab_size": config.vocab_size, "d_model": config.d_model,
            "encoder_layers": config.n_encoder_layers, "decoder_layers": config.n_decoder_layers,
            "encoder_attention_heads": config.n_heads, "decoder_attention_heads": config.n_heads,
            "encoder_ffn_dim": config.d_ff, "decoder_ffn_dim": config.d_ff,
            "activation_function": TO_HF_ACTIVATION[config.activation],
            "dropout": config.dropout, "attention_dropout": config.attn_dropout,
            "activation_dropout": config.activation_dropout,
            "max_position_embeddings": config.max_len, "scale_embedding": config.scale_embeddings,
            "tie_word_embeddings": True, "pad_token_id": config.pad_id, "bos_token_id": BOS,
            "eos_token_id": EOS, "decoder_start_token_id": BOS, "forced_eos_token_id": EOS,
            "is_encoder_decoder": True, "init_std": 0.02}


def _embedding_names() -> list[tuple[str, str]]:
    """(aiayn name, BART name) of the position tables and embedding LayerNorms."""
    names = []
    for mine, theirs in (("src_embed", "model.encoder"), ("tgt_embed", "model.decoder")):
        names.append((f"{mine}.positions.weight", f"{theirs}.embed_positions.weight"))
        for p in ("weight", "bias"):
            names.append((f"{mine}.norm.{p}", f"{theirs}.layernorm_embedding.{p}"))
    return names


def to_hf_state_dict(model: Transformer) -> dict[str, Tensor]:
    """The model's weights under BartForConditionalGeneration's names."""
    return to_hf_weights(model, ("model.shared.weight", "model.encoder.embed_tokens.weight",
                                 "model.decoder.embed_tokens.weight", "lm_head.weight"),
                         [*_embedding_names(), *layer_names(model.config)],
                         extra={"final_logits_bias": model.output.bias.detach().float()[None, :]})


# -- import (aiayn import hf-bart) ---------------------------------------------------------------

def require_bart(c: dict[str, Any], where: str) -> None:
    require_model_type(c, where, "bart", "BART (BartForConditionalGeneration)")


def config_from_hf(c: dict[str, Any], where: str) -> TransformerConfig:
    """The TransformerConfig of a BartConfig dict (config.json at `where`); a UserError naming
    the key aiayn lacks."""
    require_bart(c, where)
    for key, value in _LEGACY.items():
        if key in c and c[key] != value:
            raise UserError(f"{where}: {key}: {json.dumps(c[key])}: {_WHY[key]}")
    for a, b in (("encoder_attention_heads", "decoder_attention_heads"),
                 ("encoder_ffn_dim", "decoder_ffn_dim")):
        if c.get(a, 16 if "heads" in a else 4096) != c.get(b, 16 if "heads" in b else 4096):
            raise UserError(f"{where}: {a}={c.get(a)} but {b}={c.get(b)}: aiayn's encoder and "
                            "decoder have one head count and one d_ff")
    if not c.get("tie_word_embeddings", True):
        raise UserError(f"{where}: tie_word_embeddings: false: aiayn's translation model ties "
                        "its output layer to the embeddings (§3.4)")
    activation = activation_from_hf(c.get("activation_function", "gelu"),
                                    f"{where}: activation_function")
    layers = (int(c.get("encoder_layers", 12)), int(c.get("decoder_layers", 12)))
    try:
        config = TransformerConfig(
            vocab_size=int(c.get("vocab_size", 50265)), d_model=int(c.get("d_model", 1024)),
            n_heads=int(c.get("encoder_attention_heads", 16)),
            d_ff=int(c.get("encoder_ffn_dim", 4096)), n_layers=layers[0],
            n_encoder_layers=layers[0], n_decoder_layers=layers[1],
            max_len=int(c.get("max_position_embeddings", 1024)), positions="learned",
            position_offset=OFFSET, embedding_norm=True, output_bias=True,
            share_embeddings=True, scale_embeddings=bool(c.get("scale_embedding", False)),
            final_norm=False, norm_first=False, bias=True, layer_norm_eps=1e-5,
            activation=activation, dropout=float(c.get("dropout", 0.1)),
            attn_dropout=float(c.get("attention_dropout", 0.0)),
            activation_dropout=float(c.get("activation_dropout", 0.0)),
            pad_id=int(c.get("pad_token_id", 1)))
    except ValueError as e:
        raise UserError(f"{where}: {e}") from None
    check_fits(config, where)  # before any tensor of the model is made
    return config


def from_hf_state_dict(state: dict[str, Tensor], config: TransformerConfig,
                       where: str) -> dict[str, Tensor]:
    """BART weights -> aiayn's names (the inverse of to_hf_state_dict). A BartModel's weights
    (facebook/bart-base's: no "model." prefix, no final_logits_bias) read as well."""
    if not any(k.startswith("model.") for k in state):
        state = {k if k in ("final_logits_bias", "lm_head.weight") else f"model.{k}": v
                 for k, v in state.items()}
    get = weight_getter(state, where, "BartForConditionalGeneration")
    shared = next((get(k) for k in ("model.shared.weight", "model.encoder.embed_tokens.weight",
                                     "lm_head.weight") if k in state), None)
    if shared is None:
        get("model.shared.weight")  # raises, naming it
    bias = state.get("final_logits_bias")  # absent: transformers' zeros
    bias = torch.zeros(config.vocab_size) if bias is None else bias.float().reshape(-1)
    return from_hf_weights(get, shared, [*_embedding_names(), *layer_names(config)],
                           extra={"output.bias": bias})


def read_tokenizer(folder: Path, special: dict[str, int | None]) -> Any:
    """BART's byte-level BPE as a `tokenizers` Tokenizer: its tokenizer.json, or vocab.json +
    merges.txt (what BartTokenizer reads) with BART's special tokens and its <s> ... </s>
    post-processor, as BartTokenizerFast builds them."""
    from tokenizers import AddedToken, processors

    from aiayn.convert.hf_gpt2 import read_tokenizer as read_byte_level_bpe

    if not (folder / "tokenizer.json").is_file() and not (folder / "vocab.json").is_file():
        raise UserError(f"{folder}: no tokenizer: a BART folder needs tokenizer.json or "
                        "vocab.json + merges.txt")
    hf = read_byte_level_bpe(folder)
    if not (folder / "tokenizer.json").is_file():
        names = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]  # as transformers' BartTokenizer
        hf.add_special_tokens([AddedToken(t, special=True) for t in names if hf.token_to_id(t)
                               is not None])
        bos, eos = special["bos"], special["eos"]
        hf.post_processor = processors.RobertaProcessing(
            (hf.id_to_token(eos), eos), (hf.id_to_token(bos), bos), trim_offsets=True,
            add_prefix_space=False)
    for name in ("bos", "eos", "pad", "decoder_start"):
        if hf.id_to_token(special[name]) is None:
            raise UserError(f"{folder}: the tokenizer has no token at the {name} id "
                            f"{special[name]} (config.json)")
    return hf


def special_ids(c: dict[str, Any]) -> dict[str, int]:
    """BART's special ids in config.json (checked: HF_VALUES), transformers' defaults where
    absent: <s>, </s>, <pad> and the decoder's first input (</s>)."""
    return {"bos": c.get("bos_token_id", 0), "eos": c.get("eos_token_id", 2),
            "pad": c.get("pad_token_id", 1), "decoder_start": c.get("decoder_start_token_id", 2)}


def forced_bos(folder: Path, c: dict[str, Any], vocab_size: int) -> int | None:
    """The token generate() puts first in every output (forced_bos_token_id of
    generation_config.json, else of config.json; <s> in BART models fine-tuned on targets that
    start with it), or None."""
    path = folder / "generation_config.json"
    g = read_json(path) if path.is_file() else c
    where = path if path.is_file() else folder / "config.json"
    token = g.get("forced_bos_token_id") if isinstance(g, dict) else None
    if token is not None and (not isinstance(token, int) or isinstance(token, bool)
                              or not 0 <= token < vocab_size):
        raise UserError(f"{where}: forced_bos_token_id={json.dumps(token)}: must be a token id "
                        f"(a non-negative integer below vocab_size={vocab_size}) or null")
    return token


def generation_from_hf(folder: Path, c: dict[str, Any]) -> dict[str, Any]:
    """BART's own search (generation_config.json, else config.json) as aiayn's: what Marian's
    has (convert/hf_marian.py), and the lengths, counted in output tokens before </s>. HF counts
    the decoder's start in min_length / max_length and </s> in max_new_tokens; with
    forced_eos_token_id its last token is </s>. Absent keys: no limit (not HF's max_length 20)."""
    search = marian_generation(folder, c)
    path = folder / "generation_config.json"
    g = read_json(path) if path.is_file() else c
    where = path if path.is_file() else folder / "config.json"
    values = {}
    for key in ("min_length", "max_length", "min_new_tokens", "max_new_tokens"):
        value = g.get(key) if isinstance(g, dict) else None
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)
                                  or value < 0):
            raise UserError(f"{where}: {key}={json.dumps(value)}: must be a non-negative integer "
                            "or null")
        values[key] = value
    if values["min_new_tokens"] is not None:
        search["min_length"] = values["min_new_tokens"]
    elif values["min_length"]:
        search["min_length"] = max(values["min_length"] - 1, 0)
    if values["max_new_tokens"] is not None:
        search["max_new_tokens"] = max(values["max_new_tokens"] - 1, 0)
    elif values["max_length"] is not None:
        search["max_new_tokens"] = max(values["max_length"] - 2, 0)
    if "max_new_tokens" in search and isinstance(g, dict) and \
            g.get("forced_eos_token_id") is not None:
        search["forced_eos"] = True  # the capped </s> scores 0 (ForcedEOSTokenLogitsProcessor)
    return search


def load_hf_folder(folder: Path) -> tuple[Transformer, Any, dict[str, Any]]:
    """A BartForConditionalGeneration folder (config.json + model.safetensors, with
    tokenizer.json or vocab.json + merges.txt) -> (the aiayn Transformer, its `tokenizers`
    tokenizer, the folder's notes: special ids, source markers, BART's own search)."""
    hf_config, state, config_path = read_hf_folder(folder, "BART")
    config = config_from_hf(hf_config, str(config_path))
    special: dict[str, int | None] = {**special_ids(hf_config)}
    if (token := forced_bos(folder, hf_config, config.vocab_size)) is not None:
        special["forced_bos"] = token
    hf = read_tokenizer(folder, special)
    special["unk"] = hf.token_to_id("<unk>")
    if hf.token_to_id("<mask>") is not None:  # text infilling's (BART's pretraining) token
        special["mask"] = hf.token_to_id("<mask>")
    rows = hf.get_vocab_size(with_added_tokens=True)
    if rows > config.vocab_size:
        file = "tokenizer.json" if (folder / "tokenizer.json").is_file() else "vocab.json"
        raise UserError(f"{folder / file}: holds {rows} tokens, but {config_path.name} says "
                        f"vocab_size={config.vocab_size}: the tokenizer is not this model's")
    model = Transformer(config)
    model.load_state_dict(from_hf_state_dict(state, config, str(folder)))
    meta: dict[str, Any] = {"special_ids": special, "source_bos": True, "source_eos": True,
                            KEY: keep(folder, hf_config, config)}  # export gives it back
    exported = hf_config.get("aiayn")
    if not isinstance(exported, dict) or exported.get("own_search"):
        # a BART model's own search, also through aiayn's export (aiayn's own keep §6.1's)
        meta["generation"] = generation_from_hf(folder, hf_config)
    return model.eval(), hf, meta


__all__ = ["OFFSET", "config_from_hf", "config_to_hf", "forced_bos", "from_hf_state_dict",
           "generation_from_hf", "is_bart", "load_hf_folder", "read_tokenizer", "require_bart",
           "special_ids", "to_hf_state_dict"]
