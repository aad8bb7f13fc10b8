"""aiayn translation folder -> a CTranslate2 model directory (`aiayn export ctranslate2`).

CTranslate2 (OpenNMT's C++ inference engine) reads a directory its converters write: model.bin
and the vocabularies. Its Marian converter (`ct2-transformers-converter`) assumes OPUS-MT's
layout (padding last, a decoder starting from a zero embedding), so it refuses what `aiayn export
hf` writes; this module fills CTranslate2's own spec instead (ctranslate2.specs.TransformerSpec,
as its fairseq and OpenNMT-py converters do) and keeps aiayn's conventions:

    aiayn                                   CTranslate2 spec
    post-norm (§3.1) / norm_first           pre_norm=False / True (no_final_norm when there is none)
    §3.4 embeddings x sqrt(d_model)         scale_embeddings (1 when scale_embeddings=false)
    §3.5 sinusoids, interleaved             position_encodings.encodings: aiayn's own table,
                                            written out (CTranslate2's built-in sinusoids are
                                            sines then cosines, tensor2tensor's layout)
    learned positions (Table 3 row E)       the table itself, from row position_offset
    q_proj, k_proj, v_proj, out_proj        self-attention: one fused q|k|v linear, then out;
                                            cross-attention: q, fused k|v, out
    ffn.w1 / ffn.w2, *_residual.norm        ffn.linear_0 / linear_1, the sub-layer's layer_norm
    output (tied or not)                    decoder.projection
    special ids: <s> 1, </s> 2, <unk> 3     the token strings; the decoder starts from <s>
    meta "special_ids" (imported BART)      their strings; BART's decoder starts from </s>
    meta "source_eos" (Marian, BART, T5)    add_source_eos: </s> after every source
    meta "source_bos" (imported BART)       add_source_bos: <s> before every source
  T5 and BART's options (aiayn.config.presets):
    relative_attention_num_buckets (T5)     relative_attention_bias: the stack's one table on
                                            every self-attention, its max distance
    norm="rms_norm", no biases (T5)         rms_norm (gamma only)
    scale_attention=false (T5)              queries_scale 1
    gated_ffn (T5 v1.1): act(x W1) * x W3   ffn_glu: linear_0 (W1), linear_0_noact (W3)
    head_dim (T5 v1.1: d_kv)                head_dim
    scale_output (T5 v1.0)                  decoder.scale_outputs = d_model^-0.5
    embedding_norm (BART)                   layernorm_embedding
    output_bias (BART's final_logits_bias)  decoder.projection.bias
    an imported T5's / Marian's <pad> row   decoder.projection.bias -1e4 on aiayn's <pad> column:
      (also its <s>: convert/hf_original)   the row counted once in the softmax, as T5 counts it

Every id keeps its row: the vocabularies are the tokenizer's tokens in id order (an embedding row
past the tokenizer's last token gets a placeholder name), so aiayn's ids map one to one. An
option the spec cannot express, or this export does not map yet, is refused in one line naming
it (the "ctranslate2" column of aiayn.config.options, the table every exporter follows); nothing
approximate is written.

    export(folder, out, quantization=None) -> Path     # a new CTranslate2 directory
    ctranslate2.Translator(str(path), compute_type="int8")   # then decode with CTranslate2

Decoding a folder with CTranslate2 under aiayn's search rules: aiayn.generation.ctranslate2;
the folder's directory exported on first use and loaded: aiayn.convert.ctranslate2_dir.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path
from typing import Any

from aiayn.config import options
from aiayn.errors import UserError
from aiayn.folder import TOKENIZER_FILE, checkpoint_path, load_model, new_folder, require_new_folder
from aiayn.folder.families import SEQ2SEQ

# ctranslate2's weight types (ctranslate2.specs.model_spec.ACCEPTED_MODEL_TYPES) that make sense
# on a CPU or a GPU: --quantization's choices
QUANTIZATIONS = ("int8", "int8_float32", "int8_float16", "int8_bfloat16", "int16", "float16",
                 "bfloat16", "float32")
INSTALL = "pip install aiayn[ct2]"
AIAYN_FILE = "aiayn.json"  # what the directory was exported from (folder, weights, options)


def import_ctranslate2():
    """The ctranslate2 module, or a one-line UserError naming the extra that installs it."""
    try:
        import ctranslate2
    except ImportError:
        raise UserError(f"CTranslate2 is not installed: {INSTALL} (ctranslate2==4.8.5)") from None
    return ctranslate2


_ACTIVATIONS = {"relu": "RELU", "gelu": "GELU", "gelu_tanh": "GELUTanh", "silu": "SWISH"}


def check_expressible(cfg, meta: dict[str, Any], where: str) -> None:
    """A UserError naming the first option of the model (config.json's `model`) that the
    CTranslate2 export cannot express (aiayn.config.options, column "ctranslate2")."""
    options.check_expressible(cfg, "ctranslate2", where)


def vocabulary(tokenizer, rows: int) -> list[str]:
    """The token string of every embedding row, in id order: the tokenizer's, and for a row past
    its last token a placeholder no text encodes to."""
    tokens = [tokenizer.hf.id_to_token(i) for i in range(rows)]
    taken = set(tokens)
    out = []
    for i, token in enumerate(tokens):
        if token is None:
            token = f"<aiayn_unused_{i}>"
            if token in taken:
                raise UserError(f"{TOKENIZER_FILE}: a token is named {token!r}, aiayn's name for "
                                f"the unused row {i}")
        out.append(token)
    return out


def model_spec(model, meta: dict[str, Any], tokenizer, where: str = "the model"):
    """CTranslate2's TransformerSpec holding `model`'s weights (aiayn.models.Transformer, its
    folder's `meta` and tokenizer), its vocabularies and its special tokens. Not yet validated,
    optimised or saved (Converter.convert does that)."""
    import_ctranslate2()  # a one-line error naming the extra when it is missing
    from ctranslate2.specs import common_spec, transformer_spec

    cfg = model.config
    check_expressible(cfg, meta, where)
    # The stacks' shape: the paper's, or T5's (pre-norm RMSNorm, relative position bias, gated
    # FFN, heads of their own width) and BART's (a LayerNorm on the embeddings) options.
    shape = dict(pre_norm=cfg.norm_first, no_final_norm=cfg.norm_first and not cfg.final_norm,
                 activation=getattr(common_spec.Activation, _ACTIVATIONS[cfg.activation]),
                 layernorm_embedding=cfg.embedding_norm, rms_norm=cfg.norm == "rms_norm",
                 relative_attention_bias=bool(cfg.relative_attention_num_buckets),
                 ffn_glu=cfg.gated_ffn,
                 head_dim=cfg.head_dim if cfg.d_k * cfg.n_heads != cfg.d_model else None)
    encoder = transformer_spec.TransformerEncoderSpec(cfg.n_encoder_layers, cfg.n_heads, **shape)
    decoder = transformer_spec.TransformerDecoderSpec(cfg.n_decoder_layers, cfg.n_heads, **shape)
    spec = transformer_spec.TransformerSpec(encoder, decoder)
    state = {k: v.detach().float().cpu().numpy() for k, v in model.state_dict().items()}
    _set_stack(encoder, state, "encoder", cfg, model.src_embed, cross=False)
    _set_stack(decoder, state, "decoder", cfg, model.tgt_embed, cross=True)
    _linear(decoder.projection, state, "output")  # BART's final_logits_bias: its bias
    _count_once(decoder.projection, state, meta, cfg.vocab_size)
    if cfg.scale_output:  # T5 v1.0: d_model^-0.5 on the decoder's output (tied projection)
        decoder.scale_outputs = cfg.d_model ** -0.5
    tokens = vocabulary(tokenizer, cfg.vocab_size)
    spec.register_source_vocabulary(tokens)
    spec.register_target_vocabulary(tokens if cfg.target_vocab_size == cfg.vocab_size
                                    else vocabulary(tokenizer, cfg.target_vocab_size))
    from aiayn.data.special import BOS, EOS, UNK
    # aiayn's decoder starts from <s> (§3.1: the target shifted right), an imported BART's from
    # </s> (its special_ids); the strings of those ids, so that a renamed tokenizer maps by id.
    ids = {"bos": BOS, "eos": EOS, "unk": UNK, "decoder_start": BOS, **meta.get("special_ids", {})}
    spec.config.bos_token, spec.config.eos_token = tokens[ids["bos"]], tokens[ids["eos"]]
    spec.config.unk_token = tokens[ids["unk"]]
    spec.config.decoder_start_token = tokens[ids["decoder_start"]]
    spec.config.add_source_bos = bool(meta.get("source_bos"))  # BART: <s> before the source
    spec.config.add_source_eos = bool(meta.get("source_eos"))
    spec.config.layer_norm_epsilon = cfg.layer_norm_eps
    return spec


def _set_stack(spec, state: dict, prefix: str, cfg, embed, cross: bool) -> None:
    """One stack: embeddings, positions, layers, the final LayerNorm of a pre-norm stack."""
    table = spec.embeddings[0] if isinstance(spec.embeddings, list) else spec.embeddings
    table.weight = state[f"{'src' if prefix == 'encoder' else 'tgt'}_embed.tokens.weight"]
    # §3.4: CTranslate2 multiplies by this factor (True means sqrt(d_model), as fairseq's
    # embed_scale); 1.0 leaves them as they are.
    spec.scale_embeddings = math.sqrt(cfg.d_model) if cfg.scale_embeddings else 1.0
    if cfg.positions != "none":
        spec.position_encodings.encodings = _positions(embed.positions, cfg)
    if cfg.embedding_norm:  # BART's layernorm_embedding
        _norm(spec.layernorm_embedding, state, f"{'src' if prefix == 'encoder' else 'tgt'}_embed.norm")
    relative = None  # T5: one (buckets, heads) table per stack, shared by its layers
    if cfg.relative_attention_num_buckets:
        import numpy as np

        relative = (state[f"{prefix}.relative_bias.weight"],
                    np.int32(cfg.relative_attention_max_distance))
    for i, layer in enumerate(spec.layer):
        p = f"{prefix}.layers.{i}."
        _attention(layer.self_attention, state, p + "self_attn.", fused_qkv=True,
                   scaled=cfg.scale_attention)
        if relative is not None:
            (layer.self_attention.relative_attention_bias,
             layer.self_attention.relative_attention_max_distance) = relative
        _norm(layer.self_attention.layer_norm, state,
              p + ("self_residual" if cross else "attn_residual") + ".norm")
        if cross:
            _attention(layer.attention, state, p + "cross_attn.", fused_qkv=False,
                       scaled=cfg.scale_attention)
            _norm(layer.attention.layer_norm, state, p + "cross_residual.norm")
        _linear(layer.ffn.linear_0, state, p + "ffn.w1")
        if cfg.gated_ffn:  # T5 v1.1: act(x W1) * (x W3), CTranslate2's linear_0 and linear_0_noact
            _linear(layer.ffn.linear_0_noact, state, p + "ffn.w3")
        _linear(layer.ffn.linear_1, state, p + "ffn.w2")
        _norm(layer.ffn.layer_norm, state, p + "ffn_residual.norm")
    if cfg.norm_first and cfg.final_norm:
        _norm(spec.layer_norm, state, f"{prefix}.norm")


# Sinusoid rows past max_len: CTranslate2's default max_decoding_length, for a user who decodes
# the directory directly (aiayn's own sinusoids extend on demand too; learned ones cannot)
EXTRA_SINUSOIDS = 256


def _positions(module, cfg):
    """Position vectors as the model adds them: §3.5's interleaved sinusoids (aiayn's own table,
    not CTranslate2's built-in [sin..., cos...]), max_len + EXTRA_SINUSOIDS rows, or the
    learned table's max_len rows from row position_offset. aiayn decodes at most max_len - 1
    tokens after <s>, so max_len rows serve every position either stack reads."""
    from aiayn.nn.positions import LearnedPositions, sinusoidal_positions

    if isinstance(module, LearnedPositions):
        first = module.first_row
        return module.weight.detach().float().cpu().numpy()[first:first + cfg.max_len]
    return sinusoidal_positions(cfg.max_len + EXTRA_SINUSOIDS, cfg.d_model).numpy()


def _attention(spec, state: dict, p: str, fused_qkv: bool, scaled: bool = True) -> None:
    import numpy as np

    if not scaled:  # T5: no 1/sqrt(d_k) on the scores
        spec.queries_scale = 1.0

    def weight_and_bias(names):
        w = np.concatenate([state[f"{p}{n}.weight"] for n in names])
        b = [state.get(f"{p}{n}.bias") for n in names]
        return w, (np.concatenate(b) if all(x is not None for x in b) else None)

    groups = [("q_proj", "k_proj", "v_proj")] if fused_qkv else [("q_proj",), ("k_proj", "v_proj")]
    for linear, names in zip(spec.linear, groups, strict=False):
        linear.weight, bias = weight_and_bias(names)
        if bias is not None:
            linear.bias = bias
    _linear(spec.linear[-1], state, p + "out_proj")


# The bias that leaves a column out of the softmax: finite (no -inf that turns into NaN in fp16),
# e^-10000 is 0 in every precision.
NEVER = -1e4


def _count_once(projection, state: dict, meta: dict[str, Any], rows: int) -> None:
    """An imported T5's or Marian's <pad> row, which the import made its <s> as well, counted
    once in the softmax, as the original counts it and Translator.score does
    (convert/hf_original.repeated_ids): a bias of NEVER on aiayn's <pad> column."""
    import numpy as np

    from aiayn.convert.hf_original import repeated_ids

    repeated = repeated_ids(meta)
    if repeated:
        bias = state.get("output.bias", np.zeros(rows, dtype=np.float32)).copy()
        bias[repeated] = NEVER
        projection.bias = bias


def _linear(spec, state: dict, name: str) -> None:
    spec.weight = state[f"{name}.weight"]
    if f"{name}.bias" in state:
        spec.bias = state[f"{name}.bias"]


def _norm(spec, state: dict, name: str) -> None:
    spec.gamma = state[f"{name}.weight"]
    if f"{name}.bias" in state:  # RMSNorm (T5) has none
        spec.beta = state[f"{name}.bias"]


def converter(folder: str | Path, checkpoint: int | None = None):
    """A ctranslate2.converters.Converter of the aiayn translation folder (its weights of
    `checkpoint`, a saved step, when given): `.convert(out, quantization=...)` as CTranslate2's
    own converters."""
    import_ctranslate2()
    from ctranslate2.converters.converter import Converter

    class AiaynConverter(Converter):
        """Converts an aiayn translation folder (aiayn.convert.ctranslate2)."""

        def _load(self):
            from aiayn.data.tokenizer import Tokenizer

            model, meta = load_model(folder, expect=SEQ2SEQ, checkpoint=checkpoint)
            tokenizer = Tokenizer.load(folder, check_specials="special_ids" not in meta)
            return model_spec(model, meta, tokenizer, str(folder))

    return AiaynConverter()


def weights_stamp(folder: str | Path, checkpoint: int | None = None) -> dict[str, Any]:
    """What identifies the source a directory is exported from, by content: the weights file
    read (its name, size and SHA-256) and the folder's config and tokenizer (their SHA-256: the
    vocabulary and special ids the export writes)."""
    from aiayn.data.fingerprint import fingerprint

    folder = Path(folder)
    path = folder / "model.safetensors" if checkpoint is None else \
        checkpoint_path(folder, checkpoint)
    weights = fingerprint(path) if path.is_file() else {}
    stamp = {"weights": path.name, "size": weights.get("bytes"), "sha256": weights.get("sha256")}
    for name in ("config.json", "tokenizer.json"):
        stamp[f"{name}_sha256"] = fingerprint(folder / name)["sha256"] \
            if (folder / name).is_file() else None
    return stamp


def export_stamp(out: Path) -> dict[str, str]:
    """The SHA-256 of each file CTranslate2 wrote into `out` (model.bin, the vocabularies,
    config.json): a damaged, reordered or shortened file there no longer matches."""
    from aiayn.data.fingerprint import fingerprint

    return {p.name: fingerprint(p)["sha256"] for p in sorted(out.iterdir())
            if p.is_file() and p.name != AIAYN_FILE and not p.name.startswith(".")}


def write_into(folder: str | Path, out: Path, quantization: str | None,
               checkpoint: int | None = None) -> None:
    """Convert into `out`, a folder its writer holds (new_folder / writer_lock): CTranslate2
    writes a directory of its own (Converter.convert refuses an existing one), so it writes a
    hidden one inside `out`, whose files then move up; aiayn.json, written last, names the
    source."""
    for _ in range(3):  # a save that lands during the conversion: convert again
        before = weights_stamp(folder, checkpoint)
        _convert(folder, out, quantization, checkpoint)
        if weights_stamp(folder, checkpoint) == before:
            break
    else:
        raise UserError(f"{folder}: its weights changed during each of 3 exports (a run saving "
                        "into it?); export it once the run is done")
    source = {"exported_from": str(folder), "quantization": quantization or "float32",
              "checkpoint": checkpoint, **before, "files": export_stamp(out)}
    from aiayn.folder import atomic_write_text

    atomic_write_text(out / AIAYN_FILE, json.dumps(source, indent=2) + "\n")


def _convert(folder: Path, out: Path, quantization: str | None, checkpoint: int | None) -> None:
    tmp = out / ".ctranslate2.tmp"
    if tmp.exists():
        shutil.rmtree(tmp)
    try:
        converter(folder, checkpoint).convert(str(tmp), quantization=quantization)
    except UserError:
        raise
    except (ValueError, NotImplementedError, RuntimeError) as e:  # the spec's own checks
        shutil.rmtree(tmp, ignore_errors=True)
        raise UserError(f"{folder}: CTranslate2 refused the model: {e}") from None
    for item in tmp.iterdir():
        os.replace(item, out / item.name)
    tmp.rmdir()


def export(folder: str | Path, out: str | Path, quantization: str | None = None,
           checkpoint: int | None = None) -> Path:
    """Write the CTranslate2 directory of the aiayn translation folder `folder` into `out` (new
    or empty, written as `aiayn export` writes folders: one writer, .aiayn-incomplete until the
    last file). `quantization`: the weights' type (QUANTIZATIONS; None keeps float32, and
    CTranslate2 can still quantize when it loads them: compute_type). Returns `out`."""
    if quantization is not None and quantization not in QUANTIZATIONS:
        raise UserError(f"--quantization {quantization}: one of {', '.join(QUANTIZATIONS)}")
    import_ctranslate2()
    folder, out = Path(folder), require_new_folder(out)
    with new_folder(out):
        write_into(folder, out, quantization, checkpoint)
    return out


__all__ = ["AIAYN_FILE", "QUANTIZATIONS", "check_expressible", "converter", "export",
           "export_stamp", "import_ctranslate2", "model_spec", "vocabulary", "weights_stamp",
           "write_into"]
