"""aiayn Transformer (translation) <-> HF ``transformers``' T5ForConditionalGeneration, exactly.

T5 (Raffel et al. 2020) is the paper's encoder-decoder with other choices, all options of
aiayn's one Transformer (TransformerConfig; the "t5-*" presets): no absolute positions (§3.5)
but a relative position bias on self-attention, bucketed, one table per stack
(nn/relative_position.py); pre-norm RMSNorm with a final norm per stack (§3.1's post-norm
LayerNorm); no biases; no 1/sqrt(d_k) (§3.2.1); no sqrt(d_model) on the embeddings (§3.4);
ReLU (v1.0) or a gated GELU (v1.1's "gated-gelu", tanh form) feed-forward (§3.3); the output
tied and scaled by d_model^-0.5 (v1.0) or untied (v1.1). Every parameter maps:

    src/tgt_embed.tokens, output           shared (= encoder/decoder.embed_tokens), lm_head
    encoder.relative_bias                  encoder.block.0.layer.0.SelfAttention.relative_attention_bias
    encoder.layers.i.self_attn.{q,k,v,out}_proj   encoder.block.i.layer.0.SelfAttention.{q,k,v,o}
    encoder.layers.i.attn_residual.norm    encoder.block.i.layer.0.layer_norm
    encoder.layers.i.ffn.w1 / w3 / w2      encoder.block.i.layer.1.DenseReluDense.wi (wi_0) / wi_1 / wo
    encoder.layers.i.ffn_residual.norm     encoder.block.i.layer.1.layer_norm
    encoder.norm                           encoder.final_layer_norm
    decoder.*                              the same, with layer.1 = EncDecAttention, layer.2 = FFN

The import (`aiayn import hf-t5`) maps the vocabulary onto aiayn's fixed special ids as the
Marian import does (hf_marian.vocabulary_order): T5 has <pad> = 0, </s> = 1, <unk> = 2, and
starts the decoder with <pad>; aiayn has <pad> 0, <s> 1, </s> 2, <unk> 3. The <pad> row is used
twice, as aiayn's padding and as its <s>, and every other id moves up by one. The tokenizer
(tokenizer.json, or spiece.model, SentencePiece) is renumbered the same way, and the folder
notes that the source ends in </s> (meta "source_eos"), as T5's tokenizer makes it, and keeps
the T5 folder's config.json and tokenizer files (meta "hf_original", convert/hf_original.py).
The export (`aiayn export hf`) of an imported T5 gives that folder back, its rows at T5's ids
again (aiayn's <s> row as T5's <pad>, its <pad> row dropped); a model aiayn trained exports with
aiayn's ids as they are (the decoder starts from <s>).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from aiayn.config import TransformerConfig
from aiayn.config.options import check_expressible
from aiayn.convert import (
    FROM_HF_ACTIVATION,
    TO_HF_ACTIVATION,
    read_hf_folder,
    require_model_type,
    weights_path,
)
from aiayn.convert.hf_original import KEY, keep
from aiayn.convert.hf_seq2seq import (
    from_hf_weights,
    to_hf_weights,
    tokenizer_config,
    weight_getter,
)
from aiayn.data.special import BOS, EOS, PAD, SPECIAL_TOKENS, UNK_TOKEN
from aiayn.errors import UserError
from aiayn.models.transformer import Transformer
from aiayn.sizes import check_fits


def is_t5(config: TransformerConfig) -> bool:
    """Whether `aiayn export hf` writes this translation model as a T5 (it has T5's relative
    position bias) rather than as a Marian."""
    return config.relative_attention_num_buckets > 0


# -- export (aiayn export hf) --------------------------------------------------------------------

def _feed_forward_proj(config: TransformerConfig) -> str:
    """T5's feed_forward_proj of the model's feed-forward ("gated-gelu" is the tanh GELU in
    transformers, for backward compatibility; the exact GELU gated is refused: the table)."""
    if not config.gated_ffn:
        return TO_HF_ACTIVATION[config.activation]
    return "gated-gelu" if config.activation == "gelu_tanh" else f"gated-{config.activation}"


def config_to_hf(config: TransformerConfig) -> dict[str, Any]:
    """The T5Config (as config.json) of a translation model; a UserError naming the first option
    T5 does not have."""
    check_expressible(config, "t5")  # aiayn.config.options, column "t5"
    return {"architectures": ["T5ForConditionalGeneration"], "model_type": "t5",
            "vocab_size": config.vocab_size, "d_model": config.d_model,
            "d_kv": config.d_k, "d_ff": config.d_ff,
            "num_layers": config.n_encoder_layers, "num_decoder_layers": config.n_decoder_layers,
            "num_heads": config.n_heads,
            "relative_attention_num_buckets": config.relative_attention_num_buckets,
            "relative_attention_max_distance": config.relative_attention_max_distance,
            "dropout_rate": config.dropout, "layer_norm_epsilon": config.layer_norm_eps,
            "feed_forward_proj": _feed_forward_proj(config), "initializer_factor": 1.0,
            # transformers 4 scales exactly when tied; 5 reads scale_decoder_outputs
            "tie_word_embeddings": config.tie_output,
            "scale_decoder_outputs": config.scale_output, "n_positions": config.max_len,
            "pad_token_id": config.pad_id, "eos_token_id": EOS, "decoder_start_token_id": BOS,
            "is_encoder_decoder": True, "use_cache": True}


def _parameter_names(config: TransformerConfig) -> list[tuple[str, str]]:
    """(aiayn name, T5 name) of every parameter but the embeddings and the output."""
    names = []
    # per stack: (aiayn attention, its residual, T5's sub-layer), in T5's layer order
    stacks = [("encoder", config.n_encoder_layers, [("self_attn", "attn_residual", "SelfAttention")]),
              ("decoder", config.n_decoder_layers, [("self_attn", "self_residual", "SelfAttention"),
                                                    ("cross_attn", "cross_residual", "EncDecAttention")])]
    for side, n_layers, sublayers in stacks:
        names += [(f"{side}.relative_bias.weight",
                   f"{side}.block.0.layer.0.SelfAttention.relative_attention_bias.weight"),
                  (f"{side}.norm.weight", f"{side}.final_layer_norm.weight")]
        for i in range(n_layers):
            src, dst = f"{side}.layers.{i}.", f"{side}.block.{i}.layer."
            for j, (mine, residual, theirs) in enumerate(sublayers):
                for ours, t5 in (("q_proj", "q"), ("k_proj", "k"), ("v_proj", "v"), ("out_proj", "o")):
                    names.append((f"{src}{mine}.{ours}.weight", f"{dst}{j}.{theirs}.{t5}.weight"))
                names.append((f"{src}{residual}.norm.weight", f"{dst}{j}.layer_norm.weight"))
            ffn = f"{dst}{len(sublayers)}."
            if config.gated_ffn:
                names += [(f"{src}ffn.w1.weight", f"{ffn}DenseReluDense.wi_0.weight"),
                          (f"{src}ffn.w3.weight", f"{ffn}DenseReluDense.wi_1.weight")]
            else:
                names.append((f"{src}ffn.w1.weight", f"{ffn}DenseReluDense.wi.weight"))
            names += [(f"{src}ffn.w2.weight", f"{ffn}DenseReluDense.wo.weight"),
                      (f"{src}ffn_residual.norm.weight", f"{ffn}layer_norm.weight")]
    return names


def to_hf_state_dict(model: Transformer) -> dict[str, Tensor]:
    """The model's weights under T5ForConditionalGeneration's names (lm_head: the output layer,
    tied or not)."""
    return to_hf_weights(model, ("shared.weight", "encoder.embed_tokens.weight",
                                 "decoder.embed_tokens.weight"),
                         [("output.weight", "lm_head.weight"), *_parameter_names(model.config)])


# -- import (aiayn import hf-t5) -----------------------------------------------------------------

def require_t5(c: dict[str, Any], where: str) -> None:
    require_model_type(c, where, "t5", "T5 (T5ForConditionalGeneration)")


def _feed_forward_from_hf(value: Any, where: str) -> tuple[str, bool]:
    """(aiayn activation, gated) of T5's feed_forward_proj ("relu", "gated-gelu", ...)."""
    if value == "gated-gelu":  # transformers: the tanh GELU, for backward compatibility
        return "gelu_tanh", True
    parts = value.split("-") if isinstance(value, str) else []
    gated = len(parts) == 2 and parts[0] == "gated"
    if not (gated or len(parts) == 1) or parts[-1] not in FROM_HF_ACTIVATION:
        raise UserError(f"{where}: feed_forward_proj={value!r} is not supported (known: "
                        f"{', '.join(FROM_HF_ACTIVATION)}, each also as gated-NAME)")
    return FROM_HF_ACTIVATION[parts[-1]], gated


def config_from_hf(c: dict[str, Any], vocab_size: int, where: str,
                   tied: bool | None = None) -> TransformerConfig:
    """The TransformerConfig of a T5Config dict (config.json at `where`), with the vocabulary
    size of the reordered vocabulary; a UserError naming the key aiayn lacks. `tied`: whether
    the output layer is the embedding matrix (the checkpoint says: load_hf_folder); None:
    as config.json's tie_word_embeddings."""
    require_t5(c, where)
    d_model, n_heads = int(c.get("d_model", 512)), int(c.get("num_heads", 8))
    d_kv = int(c.get("d_kv", 64))
    activation, gated = _feed_forward_from_hf(c.get("feed_forward_proj", "relu"), where)
    # T5 v1.0 ties its output to the embeddings and scales it by d_model^-0.5; v1.1 does
    # neither (config.json: tie_word_embeddings false). transformers 5 writes v1.1 as
    # tie_word_embeddings true, scale_decoder_outputs false, with lm_head.weight in the
    # checkpoint when it differs from the embeddings.
    declared = c.get("tie_word_embeddings", True) is not False
    scaled = c.get("scale_decoder_outputs", declared)
    if not isinstance(scaled, bool):
        raise UserError(f"{where}: scale_decoder_outputs={scaled!r}: expected true or false")
    tied = declared if tied is None else tied
    n_layers = int(c.get("num_layers", 6))
    n_decoder = c.get("num_decoder_layers")
    rate = float(c.get("dropout_rate", 0.1))
    try:
        config = TransformerConfig(
            vocab_size=vocab_size, d_model=d_model, n_heads=n_heads, d_ff=int(c.get("d_ff", 2048)),
            n_layers=n_layers, n_encoder_layers=n_layers,
            n_decoder_layers=n_layers if n_decoder is None else int(n_decoder),
            max_len=int(c.get("n_positions") or 512), positions="none",
            relative_attention_num_buckets=int(c.get("relative_attention_num_buckets", 32)),
            relative_attention_max_distance=int(c.get("relative_attention_max_distance", 128)),
            norm="rms_norm", norm_first=True, final_norm=True, bias=False, scale_attention=False,
            scale_embeddings=False, share_embeddings=True, tie_output=tied, scale_output=scaled,
            gated_ffn=gated, activation=activation,
            head_dim=None if d_kv * n_heads == d_model else d_kv,
            layer_norm_eps=float(c.get("layer_norm_epsilon", 1e-6)),
            dropout=rate, attn_dropout=rate, activation_dropout=rate, pad_id=PAD)
    except ValueError as e:
        raise UserError(f"{where}: {e}") from None
    check_fits(config, where)  # before any tensor of the model is made
    return config


def from_hf_state_dict(state: dict[str, Tensor], config: TransformerConfig, order: list[int],
                       where: str) -> dict[str, Tensor]:
    """T5 weights -> aiayn's names, the vocabulary rows in `order`."""
    get = weight_getter(state, where, "T5ForConditionalGeneration")
    rows = torch.tensor(order)
    shared = get("shared.weight" if "shared.weight" in state else "encoder.embed_tokens.weight")
    output = None if config.tie_output else get("lm_head.weight")[rows]
    return from_hf_weights(get, shared[rows], _parameter_names(config), output=output)


def read_tokenizer(folder: Path) -> Any:
    """The folder's T5 tokenizer with T5's own ids (a `tokenizers` Tokenizer): its
    tokenizer.json, else one built from spiece.model as transformers' T5Tokenizer builds it."""
    from tokenizers import Tokenizer as HFTokenizer

    if (folder / "tokenizer.json").is_file():
        try:
            return HFTokenizer.from_file(str(folder / "tokenizer.json"))
        except Exception as e:  # tokenizers raises a bare Exception
            raise UserError(f"{folder / 'tokenizer.json'}: not a valid tokenizer file ({e})") from None
    if (folder / "spiece.model").is_file():
        return _spiece_tokenizer(folder)
    raise UserError(f"{folder}: no tokenizer: a T5 folder needs tokenizer.json or spiece.model "
                    "(SentencePiece)")


def _spiece_tokenizer(folder: Path) -> Any:
    """transformers' T5Tokenizer of spiece.model: its pieces and scores, then the sentinels
    <extra_id_N> (tokenizer_config.json's extra_ids, 100 by default) in reverse order, split on
    whitespace, "▁" before every word, </s> appended."""
    from tokenizers import AddedToken, decoders, normalizers, pre_tokenizers, processors
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers.models import Unigram

    from aiayn.convert.spm import read_spm

    spm = read_spm(folder / "spiece.model")
    pieces = [(p, s) for p, s, _ in spm.pieces]
    names = [p for p, _ in pieces]
    for needed in ("<pad>", "</s>", UNK_TOKEN):
        if needed not in names:
            raise UserError(f"{folder / 'spiece.model'}: no {needed} piece (not a T5 vocabulary)")
    extra = tokenizer_config(folder).get("extra_ids", 100)
    if not isinstance(extra, int) or isinstance(extra, bool) or not 0 <= extra <= 10_000:
        raise UserError(f"{folder / 'tokenizer_config.json'}: extra_ids={extra!r}: expected a "
                        "count of sentinel tokens")
    sentinels = [f"<extra_id_{i}>" for i in range(extra - 1, -1, -1) if f"<extra_id_{i}>" not in names]
    hf = HFTokenizer(Unigram(pieces + [(s, 0.0) for s in sentinels], names.index(UNK_TOKEN), False))
    if spm.precompiled_charsmap:
        hf.normalizer = normalizers.Precompiled(spm.precompiled_charsmap)
    hf.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.WhitespaceSplit(),
        pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)])
    hf.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    hf.add_special_tokens([AddedToken(t, special=True, normalized=False)
                           for t in ("<pad>", "</s>", UNK_TOKEN, *reversed(sentinels))])
    hf.post_processor = processors.TemplateProcessing(
        single="$A </s>", pair="$A </s> $B </s>", special_tokens=[("</s>", names.index("</s>"))])
    return hf


def renumbered_tokenizer(hf: Any, tokens: list[str | None], order: list[int], where: str) -> Any:
    """The tokenizer `hf` (T5's ids) with aiayn's ids: aiayn id a is T5's id order[a]; the row
    used twice (<pad> as aiayn's <s>) is named <s>, rows without a token <unused_N>. Pieces
    keep their scores, so the segmentation is T5's; <unused_N> are special tokens (decoded to
    nothing; text never becomes one). Without a post-processor: aiayn appends
    </s> itself (Translator.encode_source), and the export writes one back."""
    from tokenizers import Tokenizer as HFTokenizer

    if order == list(range(len(order))):  # aiayn's own ids already (an aiayn export)
        return hf
    data = json.loads(hf.to_str())
    model = data.get("model", {})
    if model.get("type") != "Unigram":
        raise UserError(f"{where}: a {model.get('type')} tokenizer: only a Unigram (SentencePiece) "
                        "T5 tokenizer can be renumbered to aiayn's special ids")
    scores = {piece: score for piece, score in model["vocab"]}
    names = [*SPECIAL_TOKENS] + [tokens[i] or f"<unused_{i}>" for i in order[len(SPECIAL_TOKENS):]]
    never = min(scores.values(), default=0.0) - 1e6  # a piece that text never becomes
    model["vocab"] = [[t, 0.0 if t in SPECIAL_TOKENS else scores.get(t, never)] for t in names]
    model["unk_id"] = names.index(UNK_TOKEN)
    new_id = {t: i for i, t in enumerate(names)}
    data["added_tokens"] = [{**a, "id": new_id[a["content"]]} for a in data.get("added_tokens", [])
                            if a.get("content") in new_id]
    # rows without a token decode to nothing, as in T5's tokenizer (special: skipped)
    data["added_tokens"] += [{"id": i, "content": t, "single_word": False, "lstrip": False,
                              "rstrip": False, "normalized": False, "special": True}
                             for i, t in enumerate(names) if t.startswith("<unused_")]
    data["post_processor"] = None
    return HFTokenizer.from_str(json.dumps(data))


def load_hf_folder(folder: Path) -> tuple[Transformer, Any, dict[str, Any]]:
    """A T5ForConditionalGeneration folder (config.json + model.safetensors, with tokenizer.json
    or spiece.model) -> (the aiayn Transformer, its `tokenizers` tokenizer with aiayn's ids, the
    folder's notes: "source_eos", and the model's own search unless the folder is aiayn's
    export)."""
    from aiayn.convert.hf_marian import generation_from_hf, vocabulary_order

    hf_config, state, config_path = read_hf_folder(folder, "T5")
    require_t5(hf_config, str(config_path))
    name = "shared.weight" if "shared.weight" in state else "encoder.embed_tokens.weight"
    if name not in state:
        raise UserError(f"{weights_path(folder)}: no shared.weight (not a "
                        "T5ForConditionalGeneration checkpoint?)")
    rows = state[name].shape[0]
    hf = read_tokenizer(folder)
    tokens: list[str | None] = [None] * rows
    vocab = hf.get_vocab(with_added_tokens=True)
    for token, i in vocab.items():
        if not 0 <= i < rows:
            file = "tokenizer.json" if (folder / "tokenizer.json").is_file() else "spiece.model"
            raise UserError(f"{folder / file}: holds {len(vocab)} tokens ({token!r} has id {i}), "
                            f"but the model has {rows} embedding rows ({config_path.name}: "
                            f"vocab_size={hf_config.get('vocab_size')}): the tokenizer is not "
                            "this model's")
        tokens[i] = token
    ids = dict(hf_config)  # T5 starts the decoder with <pad>
    if ids.get("decoder_start_token_id") is None:
        ids["decoder_start_token_id"] = ids.get("pad_token_id")
    order = vocabulary_order(ids, tokens, str(config_path), "the tokenizer")
    head = state.get("lm_head.weight")  # absent, or the embeddings again: tied
    tied = head is None or (head.shape == state[name].shape and torch.equal(head, state[name]))
    config = config_from_hf(hf_config, len(order), str(config_path), tied)
    weights = from_hf_state_dict(state, config, order, str(folder))
    with torch.device("meta"):  # the shapes config.json gives, before anything is allocated
        expected = {k: v.shape for k, v in Transformer(config).state_dict().items()}
    for key, shape in expected.items():
        if key in weights and weights[key].shape != shape:
            raise UserError(f"{weights_path(folder)}: the weights do not fit "
                            f"{config_path.name} ({key} is {tuple(weights[key].shape)}, "
                            f"config.json makes it {tuple(shape)})")
    model = Transformer(config)
    model.load_state_dict(weights)
    with_specials = hf.encode("a", add_special_tokens=True).ids
    meta: dict[str, Any] = {"source_eos": bool(with_specials) and
                            with_specials[-1] == ids.get("eos_token_id"),
                            KEY: keep(folder, hf_config, config, order)}  # export gives it back
    exported = hf_config.get("aiayn")
    if not isinstance(exported, dict) or exported.get("own_search"):
        # a T5 model's own search, also through aiayn's export (aiayn's own keep §6.1's)
        meta["generation"] = generation_from_hf(folder, hf_config)
    return model.eval(), renumbered_tokenizer(hf, tokens, order, str(folder)), meta


__all__ = ["config_from_hf", "config_to_hf", "from_hf_state_dict", "is_t5", "load_hf_folder",
           "read_tokenizer", "renumbered_tokenizer", "require_t5", "to_hf_state_dict"]
