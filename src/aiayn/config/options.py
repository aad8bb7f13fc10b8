"""How every exporter treats every option of the encoder-decoder (TransformerConfig and the
BlockConfig it extends): one row per field, read by the exporters themselves.

    exporter      what it writes                                     read by
    marian        MarianMTModel's config.json                        convert/hf_marian.py
    bart          BartForConditionalGeneration's config.json         convert/hf_bart.py
    t5            T5ForConditionalGeneration's config.json           convert/hf_t5.py
    ctranslate2   CTranslate2's TransformerSpec                      convert/ctranslate2.py
    params        the parameter count (models.count_parameters)      tests/convert/test_option_table.py

Each entry is one of:

    Maps(name)          the exporter writes the option under `name` (a config.json key, a spec
                        attribute or weight; for params: the weights it shapes); `refuse` lists
                        (when, why) for values it cannot express, refused by name
    Only(value)         the exporter has this value alone; any other is refused by name
    Inert(why)          nothing the exporter writes depends on it (dropout in an inference
                        engine; a count of layers resolved into two others), and why

A field added to TransformerConfig without a row fails tests/convert/test_option_table.py, which
also checks every row against the exporters: a Maps changes what is written, an Only refuses
every other value with the field named, an Inert changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiayn.errors import UserError

EXPORTERS = ("marian", "bart", "t5", "ctranslate2", "params")
# exporter -> (how messages name it, the HF architecture); CTranslate2's messages are its own
ARCHITECTURES = {"marian": ("Marian", "MarianMTModel"),
                 "bart": ("BART", "BartForConditionalGeneration"),
                 "t5": ("T5", "T5ForConditionalGeneration")}

Refusal = tuple[Callable[[Any], Any], str]  # (when(config) -> true: refused, why)


@dataclass(frozen=True)
class Maps:
    """Written under `name`; a value for which a `refuse` entry's `when(config)` holds is refused:
    "model.FIELD=VALUE WHY"."""

    name: str
    refuse: tuple[Refusal, ...] = ()


@dataclass(frozen=True)
class Only:
    """The exporter has `value` alone: "model.FIELD=X: Marian has FIELD=VALUE, so ..."."""

    value: Any


@dataclass(frozen=True)
class Inert:
    """Nothing the exporter writes depends on the field, because `why`."""

    why: str


Entry = Maps | Only | Inert


@dataclass(frozen=True)
class Option:
    """One field's row: `values`, two values of it the tests try (the first that differs from a
    model's own), with `needs` (other fields a valid config then needs), and one entry per
    exporter."""

    values: tuple[Any, Any]
    marian: Entry
    bart: Entry
    t5: Entry
    ctranslate2: Entry
    params: Entry
    needs: tuple[tuple[str, Any], ...] = ()

    def entry(self, exporter: str) -> Entry:
        return getattr(self, exporter)


_NO_WEIGHTS = Inert("no weights")
_NO_DROPOUT = Inert("an inference engine: no dropout")
_T5_DROPOUT = Inert("T5 has one dropout_rate, written from dropout")
_NO_WORD_DROPOUT = Inert("a training regulariser HF's models do not have: fine-tuning there "
                         "runs without it")
_LAYERS = Inert("read through n_encoder_layers and n_decoder_layers, which it sets")
_NO_BUCKETS = Inert("read only with relative_attention_num_buckets > 0, which this exporter refuses")
_CT2_NO_PAD = Inert("CTranslate2 pads by itself: the id is not in its spec")
_ODD = ((lambda c: c.d_model % 2, ": Marian's positions need an even d_model"),)
_GATED_GELU = ((lambda c: c.gated_ffn and c.activation == "gelu",
                "with model.gated_ffn=True: T5's gated GELU (feed_forward_proj 'gated-gelu') is "
                "the tanh form, activation='gelu_tanh'"),)
_CT2_POSITIONS = ((lambda c: c.positions == "none" and not c.relative_attention_num_buckets,
                   ": the CTranslate2 export needs sinusoidal or learned positions, or T5's "
                   "relative position bias"),
                  (lambda c: c.positions != "none" and c.relative_attention_num_buckets,
                   "with T5's relative position bias: CTranslate2 has one or the other"))
_CT2_NO_ENCODER = ((lambda c: not c.n_encoder_layers,
                    ": the CTranslate2 export needs an encoder and a decoder"),)
_CT2_NO_DECODER = ((lambda c: not c.n_decoder_layers,
                    ": the CTranslate2 export needs an encoder and a decoder"),)
_CT2_FINAL_NORM = ((lambda c: c.final_norm and not c.norm_first,
                    "with post-norm: CTranslate2 has a final LayerNorm only in pre-norm stacks"),)
_CT2_EMBEDDING_NORM = ((lambda c: c.embedding_norm and c.norm == "rms_norm",
                        "with model.norm='rms_norm': CTranslate2's embedding norm is then an "
                        "RMSNorm, aiayn's a LayerNorm"),)
_CT2_VALUE_DIM = ((lambda c: c.value_dim is not None and c.value_dim != c.d_k,
                   "(d_v apart from d_k): CTranslate2's heads have one width"),)

# TransformerConfig's fields, in its order (BlockConfig's first).
#   field: Option(values, marian, bart, t5, ctranslate2, params)
OPTIONS: dict[str, Option] = {
    "d_model": Option((24, 32), Maps("d_model", _ODD), Maps("d_model"), Maps("d_model"),
                      Maps("embeddings"), Maps("every matrix")),
    "n_heads": Option((4, 1), Maps("encoder_attention_heads"), Maps("encoder_attention_heads"),
                      Maps("num_heads"), Maps("num_heads"),
                      Maps("relative_bias: a column per head (the heads split d_model)")),
    "d_ff": Option((48, 64), Maps("encoder_ffn_dim"), Maps("encoder_ffn_dim"), Maps("d_ff"),
                   Maps("ffn.linear_0"), Maps("ffn.w1, ffn.w2")),
    "dropout": Option((0.2, 0.0), Maps("dropout"), Maps("dropout"), Maps("dropout_rate"),
                      _NO_DROPOUT, _NO_WEIGHTS),
    "attn_dropout": Option((0.2, 0.0), Maps("attention_dropout"), Maps("attention_dropout"),
                           _T5_DROPOUT, _NO_DROPOUT, _NO_WEIGHTS),
    "activation": Option(("silu", "gelu"), Maps("activation_function"),
                         Maps("activation_function"), Maps("feed_forward_proj", _GATED_GELU),
                         Maps("activation"), _NO_WEIGHTS),
    "norm_first": Option((True, False), Only(False), Only(False), Only(True), Maps("pre_norm"),
                         Inert("the same norms, in another order")),
    "bias": Option((False, True), Only(True), Only(True), Only(False), Maps("*.bias"),
                   Maps("every bias")),
    "layer_norm_eps": Option((1e-6, 1e-5), Only(1e-5), Only(1e-5), Maps("layer_norm_epsilon"),
                             Maps("layer_norm_epsilon"), _NO_WEIGHTS),
    "activation_dropout": Option((0.2, 0.0), Maps("activation_dropout"),
                                 Maps("activation_dropout"), _T5_DROPOUT, _NO_DROPOUT,
                                 _NO_WEIGHTS),
    "vocab_size": Option((60, 50), Maps("vocab_size"), Maps("vocab_size"), Maps("vocab_size"),
                         Maps("vocabulary"), Maps("embeddings, output")),
    "tgt_vocab_size": Option((60, None), Only(None), Only(None), Only(None),
                             Maps("target vocabulary"), Maps("target embeddings, output"),
                             needs=(("share_embeddings", False),)),
    "n_layers": Option((3, 1), _LAYERS, _LAYERS, _LAYERS, _LAYERS, _LAYERS),
    "n_encoder_layers": Option((3, 1), Maps("encoder_layers"), Maps("encoder_layers"),
                               Maps("num_layers"), Maps("encoder.layer", _CT2_NO_ENCODER),
                               Maps("encoder.layers")),
    "n_decoder_layers": Option((3, 1), Maps("decoder_layers"), Maps("decoder_layers"),
                               Maps("num_decoder_layers"), Maps("decoder.layer", _CT2_NO_DECODER),
                               Maps("decoder.layers")),
    "max_len": Option((80, 64), Maps("max_position_embeddings"),
                      Maps("max_position_embeddings"), Maps("n_positions"),
                      Maps("position_encodings"), Maps("learned position rows")),
    "positions": Option(("learned", "sinusoidal"), Only("sinusoidal"), Only("learned"),
                        Only("none"), Maps("position_encodings", _CT2_POSITIONS),
                        Maps("learned position table"), needs=(("position_offset", 0),)),
    "share_embeddings": Option((False, True), Only(True), Only(True), Only(True),
                               Maps("decoder.embeddings"), Maps("a second embedding matrix")),
    "scale_embeddings": Option((False, True), Maps("scale_embedding"), Maps("scale_embedding"),
                               Only(False), Maps("scale_embeddings"), _NO_WEIGHTS),
    "final_norm": Option((True, False), Only(False), Only(False), Only(True),
                         Maps("no_final_norm", _CT2_FINAL_NORM), Maps("encoder/decoder.norm")),
    "pad_id": Option((1, 0), Maps("pad_token_id"), Maps("pad_token_id"), Maps("pad_token_id"),
                     _CT2_NO_PAD, _NO_WEIGHTS),
    "position_offset": Option((2, 0), Only(0), Only(2), Only(0), Maps("position_encodings"),
                              Maps("learned position rows"), needs=(("positions", "learned"),)),
    "embedding_norm": Option((True, False), Only(False), Only(True), Only(False),
                             Maps("layernorm_embedding", _CT2_EMBEDDING_NORM),
                             Maps("src/tgt_embed.norm")),
    "output_bias": Option((True, False), Only(False), Only(True), Only(False),
                          Maps("decoder.projection.bias"), Maps("output.bias")),
    "relative_attention_num_buckets": Option(
        (8, 0), Only(0), Only(0), Maps("relative_attention_num_buckets"),
        Maps("relative_attention_bias"), Maps("relative_bias")),
    "relative_attention_max_distance": Option(
        (64, 128), _NO_BUCKETS, _NO_BUCKETS, Maps("relative_attention_max_distance"),
        Maps("relative_attention_max_distance"), _NO_WEIGHTS),
    "norm": Option(("rms_norm", "layer_norm"), Only("layer_norm"), Only("layer_norm"),
                   Only("rms_norm"), Maps("rms_norm"), Maps("every norm's bias")),
    "scale_attention": Option((False, True), Only(True), Only(True), Only(False),
                              Maps("queries_scale"), _NO_WEIGHTS),
    "gated_ffn": Option((True, False), Only(False), Only(False), Maps("feed_forward_proj"),
                        Maps("ffn_glu"), Maps("ffn.w3")),
    "tie_output": Option((False, True), Only(True), Only(True), Maps("tie_word_embeddings"),
                         Maps("decoder.projection"), Maps("output.weight")),
    "scale_output": Option((True, False), Only(False), Only(False),
                           Maps("scale_decoder_outputs"), Maps("scale_outputs"), _NO_WEIGHTS),
    "head_dim": Option((4, None), Only(None), Only(None), Maps("d_kv"), Maps("head_dim"),
                       Maps("q/k/v/out_proj")),
    "value_dim": Option((4, None), Only(None), Only(None), Only(None),
                        Maps("head_dim", _CT2_VALUE_DIM), Maps("v_proj, out_proj")),
    "word_dropout": Option((0.2, 0.0), _NO_WORD_DROPOUT, _NO_WORD_DROPOUT, _NO_WORD_DROPOUT,
                           _NO_DROPOUT, _NO_WEIGHTS),
}


def refusal(config: Any, exporter: str, where: str = "") -> str | None:
    """The message refusing the first field (in TransformerConfig's order) of `config` that
    `exporter` cannot express, or None. `where` (a folder's config.json) starts CTranslate2's."""
    for field, option in OPTIONS.items():
        value, entry = getattr(config, field), option.entry(exporter)
        if isinstance(entry, Only) and value != entry.value:
            name, architecture = ARCHITECTURES[exporter]
            return (f"model.{field}={value!r}: {name} has {field}={entry.value!r}, so this "
                    f"translation model has no exact {architecture}")
        for when, why in entry.refuse if isinstance(entry, Maps) else ():
            if when(config):
                sep = "" if why.startswith(":") else " "
                message = f"model.{field}={value!r}{sep}{why}"
                return f"{where}: {message}" if where else message
    return None


def check_expressible(config: Any, exporter: str, where: str = "") -> None:
    """A one-line UserError naming the first option of `config` that `exporter` cannot express."""
    message = refusal(config, exporter, where)
    if message is not None:
        raise UserError(message)


__all__ = ["ARCHITECTURES", "EXPORTERS", "Entry", "Inert", "Maps", "OPTIONS", "Only", "Option",
           "check_expressible", "refusal"]
