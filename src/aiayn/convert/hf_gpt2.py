"""HF GPT-2 (``transformers``' GPT2Model / GPT2LMHeadModel) <-> aiayn DecoderLM.

GPT-2's foreign names live only here. Its layers are pre-norm decoder-only blocks, so every
parameter has an aiayn counterpart:

    wte / wpe                      embed.tokens / embed.positions
    h.i.ln_1, h.i.ln_2             decoder.layers.i.attn_residual.norm, .ffn_residual.norm
    h.i.attn.c_attn (D, 3D)        q_proj, k_proj, v_proj   (one fused matrix, split in three)
    h.i.attn.c_proj                out_proj
    h.i.mlp.c_fc, h.i.mlp.c_proj   ffn.w1, ffn.w2
    ln_f                           decoder.norm
    lm_head                        output   (tied to wte unless tie_word_embeddings is false)

GPT-2's ``Conv1D`` stores weights as (in, out), the transpose of ``nn.Linear``'s (out, in).
Works offline: ``load_hf_folder`` reads a local folder (config.json + model.safetensors);
``config_to_hf`` / ``to_hf_state_dict`` go the other way (``aiayn export hf``), for a DecoderLM
whose options GPT-2 has, and refuse one naming the option it lacks.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from aiayn.config import DecoderLMConfig
from aiayn.convert import TO_HF_ACTIVATION, activation_from_hf, read_hf_folder, weights_path
from aiayn.errors import UserError
from aiayn.models.decoder_lm import DecoderLM
from aiayn.sizes import check_fits

# Buffers some transformers versions keep in the state dict (the causal mask); not weights.
_IGNORED = (".attn.bias", ".attn.masked_bias")


def config_from_hf(hf_config: Any) -> DecoderLMConfig:
    """A GPT2Config (or its config.json as a dict) -> the DecoderLMConfig of the same model."""
    c = hf_config if isinstance(hf_config, Mapping) else hf_config.to_dict()

    def get(key: str, default: Any = None) -> Any:
        return c.get(key, default)

    unsupported = {"add_cross_attention": True, "scale_attn_by_inverse_layer_idx": True,
                   "scale_attn_weights": False}
    for key, bad in unsupported.items():
        if get(key) is bad:
            raise UserError(f"GPT-2 config {key}={bad} is not supported by DecoderLM")
    act = activation_from_hf(get("activation_function", "gelu_new"),
                             "GPT-2 config activation_function")
    d_model = get("n_embd", 768)
    return DecoderLMConfig(
        vocab_size=get("vocab_size", 50257), d_model=d_model, n_heads=get("n_head", 12),
        d_ff=get("n_inner") or 4 * d_model, n_layers=get("n_layer", 12),
        max_len=get("n_positions", 1024), activation=act,
        # GPT-2 has three dropout rates (embedding, residual, attention); aiayn's one `dropout`
        # covers the first two, so it takes the residual rate.
        dropout=float(get("resid_pdrop", 0.1)), attn_dropout=float(get("attn_pdrop", 0.1)),
        layer_norm_eps=float(get("layer_norm_epsilon", 1e-5)), norm_first=True, final_norm=True,
        positions="learned", scale_embeddings=False,
        tie_embeddings=bool(get("tie_word_embeddings", True)), pad_id=0)


# GPT-2's per-layer names -> aiayn's (besides the fused c_attn = q, k, v)
_LINEARS = {"attn.c_proj": "self_attn.out_proj", "mlp.c_fc": "ffn.w1", "mlp.c_proj": "ffn.w2"}
_NORMS = {"ln_1": "attn_residual.norm", "ln_2": "ffn_residual.norm"}
# DecoderLM option -> the value GPT-2 has (and what to set for an exportable model).
_GPT2_SHAPE = {"positions": "learned", "norm_first": True, "final_norm": True,
               "scale_embeddings": False, "bias": True}


def config_to_hf(config: DecoderLMConfig) -> dict[str, Any]:
    """The GPT2Config (as config.json) of a DecoderLM; a UserError naming the first option that
    GPT-2 does not have (e.g. sinusoidal positions)."""
    for key, value in _GPT2_SHAPE.items():
        if getattr(config, key) != value:
            raise UserError(f"model.{key}={getattr(config, key)!r}: GPT-2 has {key}={value!r}, "
                            "so this language model has no exact GPT2LMHeadModel (train with "
                            "the gpt2-* presets for an exportable model)")
    act = TO_HF_ACTIVATION[config.activation]
    return {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2",
            "vocab_size": config.vocab_size, "n_positions": config.max_len,
            "n_embd": config.d_model, "n_layer": config.n_layers, "n_head": config.n_heads,
            "n_inner": config.d_ff, "activation_function": act,
            "resid_pdrop": config.dropout, "embd_pdrop": config.dropout,
            "attn_pdrop": config.attn_dropout, "layer_norm_epsilon": config.layer_norm_eps,
            "tie_word_embeddings": config.tie_embeddings, "scale_attn_weights": True,
            "initializer_range": 0.02}


def to_hf_state_dict(model: DecoderLM) -> dict[str, Tensor]:
    """A DecoderLM's weights under GPT2LMHeadModel's names and layouts (the inverse of
    convert_state_dict; a tied lm_head is written as its own copy, as transformers saves it)."""
    ours = model.state_dict()
    out = {"transformer.wte.weight": ours["embed.tokens.weight"],
           "transformer.wpe.weight": ours["embed.positions.weight"],
           "transformer.ln_f.weight": ours["decoder.norm.weight"],
           "transformer.ln_f.bias": ours["decoder.norm.bias"]}
    for i in range(model.config.n_layers):
        src, dst = f"decoder.layers.{i}.", f"transformer.h.{i}."
        qkv = [ours[f"{src}self_attn.{n}_proj.weight"] for n in "qkv"]
        out[dst + "attn.c_attn.weight"] = _linear(torch.cat(qkv, dim=0))  # (3D, D) -> (D, 3D)
        out[dst + "attn.c_attn.bias"] = torch.cat([ours[f"{src}self_attn.{n}_proj.bias"]
                                                   for n in "qkv"])
        for theirs, mine, conv1d in _layer_names(i):
            out["transformer." + theirs] = _linear(ours[mine]) if conv1d else ours[mine]
    out["lm_head.weight"] = ours["embed.tokens.weight" if model.config.tie_embeddings
                                 else "output.weight"]
    return {k: v.detach().float().contiguous().clone() for k, v in out.items()}


def _linear(conv1d_weight: Tensor) -> Tensor:
    return conv1d_weight.t().contiguous()  # Conv1D (in, out) -> Linear (out, in); and back


def _layer_names(i: int) -> list[tuple[str, str, bool]]:
    """(GPT-2 name, aiayn name, whether it is a Conv1D weight, transposed between the two) of
    layer i's parameters other than the fused c_attn: the same list for import and export."""
    src, dst = f"h.{i}.", f"decoder.layers.{i}."
    names = []
    for theirs, ours in _LINEARS.items():
        names += [(f"{src}{theirs}.weight", f"{dst}{ours}.weight", True),
                  (f"{src}{theirs}.bias", f"{dst}{ours}.bias", False)]
    for theirs, ours in _NORMS.items():
        names += [(f"{src}{theirs}.{p}", f"{dst}{ours}.{p}", False) for p in ("weight", "bias")]
    return names


def _layer(hf: Mapping[str, Tensor], i: int) -> dict[str, Tensor]:
    src, dst = f"h.{i}.", f"decoder.layers.{i}."
    out: dict[str, Tensor] = {}
    q, k, v = _linear(hf[src + "attn.c_attn.weight"]).chunk(3, dim=0)  # (3D, D) -> 3 x (D, D)
    qb, kb, vb = hf[src + "attn.c_attn.bias"].chunk(3, dim=0)
    for name, w, b in (("q_proj", q, qb), ("k_proj", k, kb), ("v_proj", v, vb)):
        out[f"{dst}self_attn.{name}.weight"], out[f"{dst}self_attn.{name}.bias"] = w, b
    for theirs, ours, conv1d in _layer_names(i):
        out[ours] = _linear(hf[theirs]) if conv1d else hf[theirs]
    return out


def convert_state_dict(hf_state: Mapping[str, Tensor], config: DecoderLMConfig) -> dict[str, Tensor]:
    """GPT-2 parameter names and layouts -> a DecoderLM state dict (tied output left out)."""
    hf = {k.removeprefix("transformer."): v for k, v in hf_state.items()
          if not k.endswith(_IGNORED)}
    try:
        out = {"embed.tokens.weight": hf["wte.weight"], "embed.positions.weight": hf["wpe.weight"],
               "decoder.norm.weight": hf["ln_f.weight"], "decoder.norm.bias": hf["ln_f.bias"]}
        for i in range(config.n_layers):
            out.update(_layer(hf, i))
        if not config.tie_embeddings:
            out["output.weight"] = hf["lm_head.weight"]
    except KeyError as e:
        raise UserError(f"GPT-2 checkpoint lacks parameter {e.args[0]!r}") from None
    return {k: v.detach().clone() for k, v in out.items()}


def from_hf(hf_model: torch.nn.Module) -> DecoderLM:
    """A transformers GPT2LMHeadModel / GPT2Model -> an equivalent DecoderLM (eval mode)."""
    config = config_from_hf(hf_model.config)
    model = DecoderLM(config)
    _load(model, convert_state_dict(hf_model.state_dict(), config))
    return model.eval()


def load_hf_folder(folder: str | Path) -> DecoderLM:
    """A local HF GPT-2 folder (config.json + model.safetensors) -> DecoderLM. No network."""
    hf_config, state, config_path = read_hf_folder(folder, "GPT-2")
    try:
        config = config_from_hf(hf_config)
    except (ValueError, UserError) as e:  # named by the file, not "GPT-2 config"
        raise UserError(f"{config_path}: {str(e).removeprefix('GPT-2 config ')}") from None
    check_fits(config, str(config_path))
    model = DecoderLM(config)
    try:
        _load(model, convert_state_dict(state, config))
    except UserError as e:  # the weights' file, and what config.json made of the model
        raise UserError(f"{weights_path(folder)}: {e} ({config_path.name})") from None
    return model.eval()


def read_tokenizer(folder: str | Path) -> Any:
    """The `tokenizers` Tokenizer of a GPT-2 folder: its tokenizer.json, or the byte-level BPE
    of vocab.json + merges.txt (the original GPT-2 files)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    folder = Path(folder)
    try:
        if (folder / "tokenizer.json").is_file():
            return Tokenizer.from_file(str(folder / "tokenizer.json"))
        vocab, merges = folder / "vocab.json", folder / "merges.txt"
        if vocab.is_file() and merges.is_file():
            tok = Tokenizer(models.BPE.from_file(str(vocab), str(merges)))
            tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
            tok.decoder = decoders.ByteLevel()
            return tok
    except Exception as e:  # tokenizers raises its own exception types
        raise UserError(f"{folder}: unreadable tokenizer files ({e})") from None
    raise UserError(f"{folder}: no tokenizer.json (or vocab.json + merges.txt): a GPT-2 folder "
                    "needs its tokenizer")


def special_ids(hf_config: Mapping[str, Any], where: str | Path = "config.json"
                ) -> dict[str, int | None]:
    """GPT-2's special ids: one <|endoftext|> (50256) begins and ends a text and pads. A language
    model needs the first two in its vocabulary: a UserError naming `where` (the config's path)."""
    eos = hf_config.get("eos_token_id", 50256)
    bos = hf_config.get("bos_token_id", eos)
    vocab = hf_config.get("vocab_size", 50257)
    for key, value in (("eos_token_id", eos), ("bos_token_id", bos)):
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < vocab:
            raise UserError(f"{where}: {key}={json.dumps(value)}: a language model needs the id "
                            f"of <|endoftext|>, below vocab_size={vocab}")
    pad = hf_config.get("pad_token_id")
    return {"bos": bos, "eos": eos, "pad": eos if pad is None else pad, "unk": None}


def _load(model: DecoderLM, state: dict[str, Tensor]) -> None:
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [m for m in missing if not (m == "output.weight" and model.config.tie_embeddings)]
    if missing or unexpected:
        raise UserError(f"GPT-2 weights do not match the config (missing {missing[:3]}, "
                        f"unexpected {unexpected[:3]})")
