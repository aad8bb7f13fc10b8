"""aiayn Transformer (translation) <-> HF ``transformers``' MarianMTModel, exactly.

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

The import (`aiayn import hf-marian`) undoes the renumbering and maps the vocabulary onto aiayn's
fixed special ids (vocabulary_order); OPUS-MT's tokenizer files (vocab.json + source.spm) become
an aiayn tokenizer (build_tokenizer, convert/spm.py), and the folder notes that the source ends
in </s> (meta "source_eos"), as Marian's tokenizer makes it. It keeps the Marian folder's
config.json and tokenizer files (meta "hf_original"), and the export of an imported Marian gives
that folder back, at Marian's ids (convert/hf_original.py).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from aiayn.config import TransformerConfig
from aiayn.config.options import check_expressible
from aiayn.convert import (
    TO_HF_ACTIVATION,
    activation_from_hf,
    read_hf_folder,
    require_model_type,
    weights_path,
)
from aiayn.convert.hf_original import KEY, keep
from aiayn.convert.hf_seq2seq import (
    from_hf_weights,
    layer_names,
    to_hf_weights,
    tokenizer_config,
    weight_getter,
)
from aiayn.data.special import BOS, EOS, PAD, SPECIAL_TOKENS, UNK_TOKEN
from aiayn.errors import UserError
from aiayn.folder import read_json
from aiayn.models.transformer import Transformer
from aiayn.sizes import check_fits


def config_to_hf(config: TransformerConfig) -> dict[str, Any]:
    """The MarianConfig (as config.json) of a translation model; a UserError naming the first
    option Marian does not have (aiayn.config.options, column "marian")."""
    check_expressible(config, "marian")
    return {"architectures": ["MarianMTModel"], "model_type": "marian",
            "vocab_size": config.vocab_size, "decoder_vocab_size": config.vocab_size,
            "d_model": config.d_model, "encoder_layers": config.n_encoder_layers,
            "decoder_layers": config.n_decoder_layers,
            "encoder_attention_heads": config.n_heads, "decoder_attention_heads": config.n_heads,
            "encoder_ffn_dim": config.d_ff, "decoder_ffn_dim": config.d_ff,
            "activation_function": TO_HF_ACTIVATION[config.activation],
            "dropout": config.dropout, "attention_dropout": config.attn_dropout,
            "activation_dropout": config.activation_dropout, "max_position_embeddings": config.max_len,
            "scale_embedding": config.scale_embeddings,
            "share_encoder_decoder_embeddings": True, "tie_word_embeddings": True,
            "pad_token_id": config.pad_id, "eos_token_id": EOS, "bos_token_id": BOS,
            "decoder_start_token_id": BOS, "forced_eos_token_id": EOS,
            "is_encoder_decoder": True, "init_std": 0.02}


def position_permutation(d_model: int) -> Tensor:
    """perm with marian_table[:, j] == paper_table[:, perm[j]]: sines (even columns) first."""
    return torch.cat([torch.arange(0, d_model, 2), torch.arange(1, d_model, 2)])


def _renumbered(perm: Tensor) -> Callable[[Tensor, str], Tensor]:
    """The d_model dimensions of a tensor renumbered by `perm`, as layer_names' `how` says."""
    def renumber(value: Tensor, how: str) -> Tensor:
        return value[:, perm] if how == "reads" else value[perm] if how == "writes" else value

    return renumber


def to_hf_state_dict(model: Transformer) -> dict[str, Tensor]:
    """The model's weights under MarianMTModel's names, with d_model renumbered (see above)."""
    return to_hf_weights(model, ("model.shared.weight", "model.encoder.embed_tokens.weight",
                                 "model.decoder.embed_tokens.weight", "lm_head.weight"),
                         layer_names(model.config),
                         extra={"final_logits_bias": torch.zeros(1, model.config.vocab_size)},
                         layout=_renumbered(position_permutation(model.config.d_model)))


# -- import (aiayn import hf-marian) -------------------------------------------------------------

def require_marian(c: dict[str, Any], where: str) -> None:
    require_model_type(c, where, "marian", "Marian (MarianMTModel)")


def config_from_hf(c: dict[str, Any], vocab_size: int, where: str) -> TransformerConfig:
    """The TransformerConfig of a MarianConfig dict (config.json at `where`), with the
    vocabulary size of the reordered vocabulary; a UserError naming the key aiayn lacks."""
    require_marian(c, where)
    for a, b in (("encoder_attention_heads", "decoder_attention_heads"),
                 ("encoder_ffn_dim", "decoder_ffn_dim")):
        if c.get(a) != c.get(b):
            raise UserError(f"{where}: {a}={c.get(a)} but {b}={c.get(b)}: aiayn's encoder and "
                            "decoder have one head count and one d_ff")
    if not c.get("share_encoder_decoder_embeddings", True):
        raise UserError(f"{where}: separate source and target vocabularies "
                        "(share_encoder_decoder_embeddings=false): aiayn imports Marian models "
                        "with one shared vocabulary")
    if c.get("decoder_vocab_size") not in (None, c.get("vocab_size")):
        raise UserError(f"{where}: vocab_size={c.get('vocab_size')} but decoder_vocab_size="
                        f"{c['decoder_vocab_size']}: a target vocabulary of its own; aiayn "
                        "imports Marian models with one shared vocabulary")
    if not c.get("tie_word_embeddings", True):
        raise UserError(f"{where}: tie_word_embeddings=false: aiayn's translation model ties "
                        "its output layer to the embeddings (§3.4)")
    d_model = int(c.get("d_model", 1024))
    if d_model % 2:
        raise UserError(f"{where}: d_model={d_model}: Marian's positions need an even d_model")
    activation = activation_from_hf(c.get("activation_function", "gelu"),
                                    f"{where}: activation_function")
    try:
        config = TransformerConfig(
            vocab_size=vocab_size, d_model=d_model,
            n_heads=int(c.get("encoder_attention_heads", 16)),
            d_ff=int(c.get("encoder_ffn_dim", 4096)), n_layers=int(c.get("encoder_layers", 12)),
            n_encoder_layers=int(c.get("encoder_layers", 12)),
            n_decoder_layers=int(c.get("decoder_layers", 12)),
            max_len=int(c.get("max_position_embeddings", 1024)), positions="sinusoidal",
            share_embeddings=True, scale_embeddings=bool(c.get("scale_embedding", False)),
            final_norm=False, norm_first=False, bias=True, layer_norm_eps=1e-5,
            activation=activation, dropout=float(c.get("dropout", 0.1)),
            attn_dropout=float(c.get("attention_dropout", 0.0)),
            activation_dropout=float(c.get("activation_dropout", 0.0)), pad_id=PAD)
    except ValueError as e:
        raise UserError(f"{where}: {e}") from None
    check_fits(config, where)  # before any tensor of the model is made
    return config


def vocabulary_order(c: dict[str, Any], tokens: list[str | None], where: str,
                     vocab_file: str = "the vocabulary") -> list[int]:
    """Marian's token ids in aiayn's id order. aiayn's special ids are fixed (data/special.py):
    0 padding, 1 the decoder's first input, 2 end of sentence, 3 unknown. OPUS-MT has </s> = 0,
    <unk> = 1 and <pad> = the last id, which is also the decoder's first input: that row is
    then used twice, as aiayn's padding (never attended to, never produced) and as its <s>. The
    other ids keep their order. `tokens` is the Marian vocabulary by id (None: no token), read
    from `vocab_file` (named in messages)."""
    held = f"{vocab_file} holds {sum(t is not None for t in tokens)} tokens"

    def token_id(key: str, default: Any = None) -> int:
        value = c.get(key, default)
        if not isinstance(value, int) or isinstance(value, bool) or \
                not 0 <= value < len(tokens):
            raise UserError(f"{where}: {key}={value!r} is not a token id: the model has "
                            f"{len(tokens)} embedding rows (ids 0..{len(tokens) - 1}), {held}")
        if tokens[value] is None:
            raise UserError(f"{where}: {key}={value}, but {held}, none with id {value}")
        return value

    if UNK_TOKEN not in tokens:
        raise UserError(f"{where}: the vocabulary has no {UNK_TOKEN} token")
    pad = token_id("pad_token_id")
    first = [pad, token_id("decoder_start_token_id", pad), token_id("eos_token_id"),
             tokens.index(UNK_TOKEN)]
    rest = [i for i, t in enumerate(tokens) if i not in first and t not in SPECIAL_TOKENS]
    return first + rest


def from_hf_state_dict(state: dict[str, Tensor], config: TransformerConfig, order: list[int],
                       where: str) -> dict[str, Tensor]:
    """Marian weights -> aiayn's names and layout: the vocabulary rows in `order`, the d_model
    dimensions renumbered back (the inverse of to_hf_state_dict)."""
    back = torch.argsort(position_permutation(config.d_model))
    get = weight_getter(state, where, "MarianMTModel")
    shared = get("model.shared.weight") if "model.shared.weight" in state \
        else get("model.encoder.embed_tokens.weight")
    if "final_logits_bias" in state and bool(state["final_logits_bias"].any()):
        raise UserError(f"{where}: final_logits_bias is not zero: aiayn's output layer has no "
                        "bias, so this model has no exact aiayn counterpart")
    return from_hf_weights(get, shared[torch.tensor(order)][:, back], layer_names(config),
                           layout=_renumbered(back))


def generation_from_hf(folder: Path, c: dict[str, Any]) -> dict[str, Any]:
    """The Marian model's own search (generation_config.json, else config.json), as aiayn's
    search settings: num_beams, HF's length penalty (|Y|^alpha, aiayn's "avg") and its stopping
    rule (early_stopping true: stop at K finished, "first_k"; false: HF's heuristic,
    "current_length"; "never": "exact") and no_repeat_ngram_size. transformers' defaults where
    a key is absent."""
    path = folder / "generation_config.json"
    g = read_json(path) if path.is_file() else c
    rule = g.get("early_stopping", False)
    beam = g.get("num_beams", 1)
    alpha = g.get("length_penalty", 1.0)
    ngram = g.get("no_repeat_ngram_size", 0)
    where = path if path.is_file() else folder / "config.json"
    if not isinstance(beam, int) or isinstance(beam, bool) or beam < 1 or \
            not isinstance(alpha, (int, float)) or isinstance(alpha, bool):
        raise UserError(f"{where}: num_beams={beam!r}, length_penalty={alpha!r}: expected a "
                        "positive integer and a number")
    if not isinstance(ngram, int) or isinstance(ngram, bool) or ngram < 0:
        raise UserError(f"{where}: no_repeat_ngram_size={ngram!r}: expected a non-negative integer")
    return {"beam": beam, "alpha": float(alpha), "length_penalty": "avg",
            "no_repeat_ngram_size": ngram,
            "early_stopping": "exact" if rule == "never" else "first_k" if rule else
            "current_length"}


def read_vocabulary(folder: Path, rows: int) -> tuple[list[str | None], str]:
    """The Marian vocabulary by id (None where an embedding row has no token) and where it
    comes from: "spm" (OPUS-MT's vocab.json + source.spm, what MarianTokenizer reads) or
    "json" (a tokenizer.json, as `aiayn export hf` writes). `rows`: the model's embedding rows
    (config.json's vocab_size, which the weights have: load_hf_folder checks it)."""
    from tokenizers import Tokenizer as HFTokenizer

    tokens: list[str | None] = [None] * rows
    if (folder / "vocab.json").is_file() and (folder / "source.spm").is_file():
        if tokenizer_config(folder).get("separate_vocabs"):
            raise UserError(f"{folder}: separate source and target vocabularies "
                            "(separate_vocabs): aiayn imports Marian models with one vocabulary")
        path, kind = folder / "vocab.json", "spm"
        vocab = read_json(path)
    elif (folder / "tokenizer.json").is_file():
        path, kind = folder / "tokenizer.json", "json"
        try:
            vocab = HFTokenizer.from_file(str(path)).get_vocab(with_added_tokens=True)
        except Exception as e:  # tokenizers raises a bare Exception
            raise UserError(f"{path}: not a valid tokenizer file ({e})") from None
    else:
        raise UserError(f"{folder}: no tokenizer: a Marian folder needs vocab.json + source.spm "
                        "(OPUS-MT) or tokenizer.json")
    if not isinstance(vocab, dict):
        raise UserError(f"{path}: expected a JSON object of token -> id")
    for token, i in vocab.items():
        if not isinstance(i, int) or not 0 <= i < rows:
            raise UserError(f"{path}: holds {len(vocab)} tokens ({token!r} has id {i!r}), but "
                            f"config.json says vocab_size={rows}, as the weights have it: "
                            "the tokenizer is not this model's")
        tokens[i] = token
    return tokens, kind


def build_tokenizer(folder: Path, kind: str, tokens: list[str | None],
                    order: list[int]) -> tuple[Any, bool]:
    """The aiayn tokenizer (a `tokenizers` Tokenizer with aiayn's ids: Marian's in `order`)
    and whether the source gets </s> appended, as the Marian tokenizer does. For OPUS-MT files
    the pieces are SentencePiece's, cut by source.spm's scores (convert/spm.py); targets are
    encoded with it too, where Marian has a target.spm (only evaluation's loss sees that)."""
    from tokenizers import AddedToken
    from tokenizers import Tokenizer as HFTokenizer

    from aiayn.convert.spm import read_spm, unigram_tokenizer

    names = [*SPECIAL_TOKENS] + [tokens[i] or f"<unused_{i}>" for i in order[len(SPECIAL_TOKENS):]]
    if kind == "json":
        hf = HFTokenizer.from_file(str(folder / "tokenizer.json"))
        if names != [tokens[i] for i in order]:
            raise UserError(f"{folder / 'tokenizer.json'}: its special tokens are not aiayn's "
                            f"({', '.join(SPECIAL_TOKENS)} at ids 0-3); only OPUS-MT's "
                            "vocab.json + source.spm can be renumbered")
        with_specials = hf.encode("a", add_special_tokens=True).ids
        return hf, bool(with_specials) and with_specials[-1] == EOS
    unused = [n for n in names if n.startswith("<unused_")]
    hf = unigram_tokenizer(read_spm(folder / "source.spm"), names, [*SPECIAL_TOKENS, *unused],
                           unk_id=SPECIAL_TOKENS.index(UNK_TOKEN))
    codes = [n for n in names if n.startswith(">>") and n.endswith("<<")]  # >>fra<< (multilingual)
    hf.add_tokens([AddedToken(c, normalized=False) for c in codes])
    return hf, True


def load_hf_folder(folder: Path) -> tuple[Transformer, Any, dict[str, Any]]:
    """A MarianMTModel folder (config.json + model.safetensors, with OPUS-MT's vocab.json +
    source.spm or a tokenizer.json) -> (the aiayn Transformer, its `tokenizers` tokenizer, the
    folder's notes: "source_eos", and Marian's own search unless the folder is aiayn's export)."""
    hf_config, state, config_path = read_hf_folder(folder, "Marian")
    require_marian(hf_config, str(config_path))
    rows = next((state[k].shape[0] for k in ("model.shared.weight",
                                               "model.encoder.embed_tokens.weight") if k in state), None)
    if rows is None:
        raise UserError(f"{weights_path(folder)}: no model.shared.weight (not a "
                        "MarianMTModel checkpoint?)")
    if hf_config.get("vocab_size", rows) != rows:
        raise UserError(f"{config_path}: vocab_size={hf_config['vocab_size']}, but "
                        f"{weights_path(folder)} has {rows} embedding rows "
                        "(model.shared.weight): config.json does not describe these weights")
    tokens, kind = read_vocabulary(folder, rows)
    name = "vocab.json" if kind == "spm" else "tokenizer.json"
    order = vocabulary_order(hf_config, tokens, str(config_path), str(folder / name))
    config = config_from_hf(hf_config, len(order), str(config_path))
    model = Transformer(config)
    model.load_state_dict(from_hf_state_dict(state, config, order, str(folder)))
    hf, source_eos = build_tokenizer(folder, kind, tokens, order)
    meta: dict[str, Any] = {"source_eos": source_eos,
                            KEY: keep(folder, hf_config, config, order)}  # export gives it back
    if "aiayn" not in hf_config:  # a Marian model's own search (aiayn's exports keep §6.1's)
        meta["generation"] = generation_from_hf(folder, hf_config)
    return model.eval(), hf, meta



__all__ = ["build_tokenizer", "config_from_hf", "config_to_hf", "from_hf_state_dict",
           "generation_from_hf", "load_hf_folder",
           "position_permutation", "read_vocabulary", "require_marian", "to_hf_state_dict",
           "vocabulary_order"]
