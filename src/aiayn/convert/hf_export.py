"""aiayn model folder -> a Hugging Face `transformers` folder (`aiayn export hf`).

The folder written is what `transformers`' `from_pretrained` reads offline: config.json (the HF
architecture's own schema), model.safetensors (its parameter names and layouts), and for text
models generation_config.json and the tokenizer (tokenizer.json, aiayn's own file, with
tokenizer_config.json and special_tokens_map.json naming its special tokens), for a ViT
preprocessor_config.json. `AutoModel*`, `AutoTokenizer` and `AutoImageProcessor` (and what builds
on them: ONNX export, TGI) take it as it is. CTranslate2's `ct2-transformers-converter` does not
take a translator: its Marian loader assumes OPUS-MT's layout (padding last, a decoder starting
from a zero embedding) and stops at "Source vocabulary 0 has size N but the model expected a
vocabulary of size N-1" (tested); `aiayn export ctranslate2` (convert/ctranslate2.py) writes a
CTranslate2 directory with its own spec API instead. An option the HF architecture does not
have is refused with the option named; nothing approximate is written.

A model imported from transformers (`aiayn import hf-*`) exports back as the folder it came from
(convert/hf_original.py): its own config.json (with what the model changed since), tokenizer and
generation files byte for byte, and its vocabulary at the original ids, so HF -> aiayn -> HF is an
identity.

    transformer (translation)  -> MarianMTModel               (convert/hf_marian.py)
      BART-shaped              -> BartForConditionalGeneration (convert/hf_bart.py)
      T5-shaped                -> T5ForConditionalGeneration  (convert/hf_t5.py)
    decoder_lm (GPT-2-shaped)  -> GPT2LMHeadModel             (convert/hf_gpt2.py)
    vit (with a head)          -> ViTForImageClassification   (convert/hf_vit.py)
    encoder (BERT-shaped)      -> BertForSequenceClassification, BertForMaskedLM or BertModel
                                                              (convert/hf_bert.py)
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from torch import Tensor, nn

from aiayn.convert.hf_original import restore
from aiayn.data.special import BOS, BOS_TOKEN, EOS, EOS_TOKEN, PAD, PAD_TOKEN, UNK_TOKEN
from aiayn.errors import UserError
from aiayn.folder import (
    TOKENIZER_FILE,
    atomic_write,
    atomic_write_text,
    load_model,
    new_folder,
    require_new_folder,
)
from aiayn.folder.families import ENCODER, FAMILIES, LANGUAGE_MODEL, SEQ2SEQ, VIT


def _gpt2(config: Any, meta: dict[str, Any]) -> dict[str, Any]:
    from aiayn.convert.hf_gpt2 import config_to_hf

    return config_to_hf(config)


def _gpt2_weights(model: nn.Module) -> dict[str, Tensor]:
    from aiayn.convert.hf_gpt2 import to_hf_state_dict

    return to_hf_state_dict(model)


def _translation_module(config: Any) -> Any:
    """The converter a translation model exports through: BART's options make it a
    BartForConditionalGeneration, T5's relative positions a T5ForConditionalGeneration, the
    paper's model a MarianMTModel."""
    from aiayn.convert import hf_bart, hf_marian, hf_t5

    return hf_bart if hf_bart.is_bart(config) else hf_t5 if hf_t5.is_t5(config) else hf_marian


def _marian(config: Any, meta: dict[str, Any]) -> dict[str, Any]:
    return _translation_module(config).config_to_hf(config)


def _marian_weights(model: nn.Module) -> dict[str, Tensor]:
    return _translation_module(model.config).to_hf_state_dict(model)


def _bert(config: Any, meta: dict[str, Any]) -> dict[str, Any]:
    from aiayn.convert.hf_bert import config_to_hf

    return config_to_hf(config, list(meta.get("labels", [])))


def _bert_weights(model: nn.Module) -> dict[str, Tensor]:
    from aiayn.convert.hf_bert import to_hf_state_dict

    return to_hf_state_dict(model)


def _vit(config: Any, meta: dict[str, Any]) -> dict[str, Any]:
    from aiayn.convert.hf_vit import config_to_hf

    return config_to_hf(config, list(meta.get("classes", [])))


def _vit_weights(model: nn.Module) -> dict[str, Tensor]:
    from aiayn.convert.hf_vit import to_hf_state_dict

    return to_hf_state_dict(model)


# family -> (what it exports as, its config.json of a model config and the folder's meta, its
# weights); the config names the exact class
ConfigOf = Callable[[Any, dict[str, Any]], dict[str, Any]]
WeightsOf = Callable[[nn.Module], dict[str, Tensor]]
EXPORTERS: dict[str, tuple[str, ConfigOf, WeightsOf]] = {
    SEQ2SEQ: ("MarianMTModel", _marian, _marian_weights),
    LANGUAGE_MODEL: ("GPT2LMHeadModel", _gpt2, _gpt2_weights),
    VIT: ("ViTForImageClassification", _vit, _vit_weights),
    ENCODER: ("BERT", _bert, _bert_weights),
}


def export_hf(folder: str | Path, out: str | Path) -> str:
    """Write the HF folder of the aiayn model folder `folder` into `out` (new or empty).
    Returns the HF architecture's name."""
    from safetensors.torch import save_file

    folder, out = Path(folder), require_new_folder(out)
    model, meta = load_model(folder)
    family = meta.get("family")
    if family not in EXPORTERS:
        what = FAMILIES[family].what if family in FAMILIES else f"family {family!r}"
        known = ", ".join(f"{FAMILIES[f].what} -> {arch}" for f, (arch, *_) in EXPORTERS.items())
        raise UserError(f"{folder}: {what} has no Hugging Face export yet (exported: {known})")
    _, config_of, weights_of = EXPORTERS[family]
    config, state = config_of(model.config, meta), weights_of(model)
    # an imported model: the folder it came from, its vocabulary at the original ids
    original = restore(meta, model.config, lambda c: config_of(c, meta), state,
                       str(folder / "config.json"))
    if original is not None:
        config, state, kept = original
    config["aiayn"] = {"exported_from": str(folder), "family": family}
    if family == SEQ2SEQ and meta.get("generation"):  # an imported model's own search
        config["aiayn"]["own_search"] = True
    if family == ENCODER:  # BERT's own special tokens: [CLS] = <s>, [SEP] = </s>, [MASK]
        ids = dict(meta.get("special_ids", {}))
    else:  # aiayn's (data/special.py), or an imported model's own (GPT-2's <|endoftext|>)
        ids = {"bos": BOS, "eos": EOS, "pad": PAD, **meta.get("special_ids", {})}
    if family in (SEQ2SEQ, LANGUAGE_MODEL) and original is None:
        config.update({f"{k}_token_id": v for k, v in ids.items()
                       if k not in ("unk", "mask") and v is not None})  # (the tokenizer's two)
    if family != VIT and not (folder / TOKENIZER_FILE).is_file():
        raise UserError(f"{folder / TOKENIZER_FILE}: not found: the export needs the model's "
                        "tokenizer")
    for key in ("decoder_start", "forced_bos"):  # config.json's (BART's </s> and <s>) only
        ids.pop(key, None)
    # Read and checked before anything is written: a broken tokenizer.json is refused, not copied.
    tokenizer = None if family == VIT else _tokenizer_text(folder, meta, ids, model, family)
    with new_folder(out):
        atomic_write(out / "model.safetensors",
                     lambda tmp: save_file(state, str(tmp), metadata={"format": "pt"}))
        atomic_write_text(out / "config.json", json.dumps(config, indent=2, sort_keys=True) + "\n")
        if original is not None:  # its own files, as they came
            for name, data in kept.items():
                atomic_write(out / name, lambda tmp, data=data: tmp.write_bytes(data))
        elif family == VIT:
            _write_image_processor(out, model)
        else:
            if family != ENCODER:
                _write_generation_config(out, config, model, family, meta.get("generation"))
            _write_tokenizer(out, tokenizer, meta, ids, model)
    return config["architectures"][0]


def _write_generation_config(out: Path, config: dict[str, Any], model: nn.Module,
                             family: str, search: dict[str, Any] | None = None) -> None:
    """generate()'s defaults: the token ids, the model's length, and §6.1's beam of 4 for a
    translator (HF's length penalty is its own, |Y|^alpha, not aiayn's GNMT default); an
    imported translator's own search (meta "generation", `search`) as it came."""
    generation = {k: config[k] for k in ("bos_token_id", "eos_token_id", "pad_token_id",
                                          "decoder_start_token_id", "forced_bos_token_id",
                                          "forced_eos_token_id")
                  if k in config}
    generation["max_length"] = getattr(model.config, "max_len", 1024)
    if family == SEQ2SEQ:
        generation["num_beams"] = 4
    if family == SEQ2SEQ and search:
        generation.update(_hf_search(search))
    atomic_write_text(out / "generation_config.json", json.dumps(generation, indent=2) + "\n")


def _hf_search(search: dict[str, Any]) -> dict[str, Any]:
    """aiayn's search settings (an imported model's meta "generation") as generation_config.json
    keys: the inverse of convert/hf_marian.py's and hf_bart.py's generation_from_hf."""
    stopping = {"first_k": True, "current_length": False, "exact": "never"}
    out: dict[str, Any] = {"num_beams": search["beam"],
                           "early_stopping": stopping[search["early_stopping"]]}
    if search.get("length_penalty") == "avg":  # HF's |Y|^alpha (GNMT's it has not)
        out["length_penalty"] = search["alpha"]
    if search.get("no_repeat_ngram_size"):
        out["no_repeat_ngram_size"] = search["no_repeat_ngram_size"]
    if search.get("min_length"):  # HF counts the decoder's start
        out["min_length"] = search["min_length"] + 1
    if search.get("max_new_tokens") is not None:  # ... and </s>
        out["max_length"] = search["max_new_tokens"] + 2
    return out


def _tokenizer_text(folder: Path, meta: dict[str, Any], ids: dict[str, Any], model: nn.Module,
                    family: str) -> str:
    """The tokenizer.json to write: the folder's, read as aiayn reads it (a UserError naming the
    file when it is not a tokenizer, lacks a special id or has more tokens than the model has
    embedding rows). An encoder's also adds [CLS] ... [SEP] as TextEncoder does, and knows the
    [MASK] id the masked LM added past its vocabulary; an imported Marian model's appends </s>."""
    from aiayn.data.tokenizer import Tokenizer

    path = folder / TOKENIZER_FILE
    own = family != ENCODER and "special_ids" not in meta  # aiayn's specials at ids 0-3
    hf = Tokenizer.load(path, check_specials=own).hf
    size, rows = hf.get_vocab_size(with_added_tokens=True), model.config.vocab_size
    if size > rows:
        raise UserError(f"{path}: {size} tokens, but the model has {rows} embedding rows (the "
                        "tokenizer of another model?)")
    for name, i in ids.items():
        past = family == ENCODER and name == "mask" and i == size  # the masked LM's own row
        if i is not None and not past and hf.id_to_token(i) is None:
            raise UserError(f"{path}: no token at the model's {name} id {i}")
    text = path.read_text(encoding="utf-8")  # the file as it is, once it reads as a tokenizer
    if family == ENCODER:
        return _with_cls_sep_mask(text, ids)
    if meta.get("source_bos"):  # an imported BART's own tokenizer: <s> ... </s> already
        return text
    return _with_eos(text, ids["eos"]) if meta.get("source_eos") else text


def _write_tokenizer(out: Path, text: str, meta: dict[str, Any], ids: dict[str, Any],
                     model: nn.Module) -> None:
    """tokenizer.json (`text`: _tokenizer_text's) and the two files naming its special tokens."""
    atomic_write_text(out / TOKENIZER_FILE, text)
    if "special_ids" in meta:  # the token strings of the model's own ids
        from tokenizers import Tokenizer as HFTokenizer

        hf = HFTokenizer.from_str(text)
        special = {f"{k}_token": hf.id_to_token(i) for k, i in ids.items()
                   if i is not None and hf.id_to_token(i) is not None}
    else:
        special = {"pad_token": PAD_TOKEN, "bos_token": BOS_TOKEN, "eos_token": EOS_TOKEN,
                   "unk_token": UNK_TOKEN}
    atomic_write_text(out / "special_tokens_map.json", json.dumps(special, indent=2) + "\n")
    tokenizer_config = {"tokenizer_class": "PreTrainedTokenizerFast",
                        "model_max_length": getattr(model.config, "max_len", None), **special}
    atomic_write_text(out / "tokenizer_config.json",
                      json.dumps(tokenizer_config, indent=2, sort_keys=True) + "\n")


def _with_cls_sep_mask(text: str, ids: dict[str, int]) -> str:
    """The tokenizer JSON `text` with a [MASK] token at ids["mask"] (when it lies just past the
    vocabulary, where the masked LM put it) and a post-processor adding [CLS] / [SEP]."""
    from tokenizers import AddedToken, processors
    from tokenizers import Tokenizer as HFTokenizer

    hf = HFTokenizer.from_str(text)
    if "mask" in ids and ids["mask"] == hf.get_vocab_size(with_added_tokens=True):
        hf.add_special_tokens([AddedToken("[MASK]", special=True)])
    cls, sep = hf.id_to_token(ids["cls"]), hf.id_to_token(ids["sep"])
    hf.post_processor = processors.TemplateProcessing(
        single=f"{cls} $A {sep}", pair=f"{cls} $A {sep} $B:1 {sep}:1",
        special_tokens=[(cls, ids["cls"]), (sep, ids["sep"])])
    return hf.to_str()


def _with_eos(text: str, eos: int) -> str:
    """The tokenizer JSON `text` with a post-processor appending </s> (id `eos`), so that HF's
    tokenizer gives the model the source it was trained on."""
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import processors

    hf = HFTokenizer.from_str(text)
    token = hf.id_to_token(eos)
    hf.post_processor = processors.TemplateProcessing(single=f"$A {token}",
                                                      special_tokens=[(token, eos)])
    return hf.to_str()


def _write_image_processor(out: Path, model: nn.Module) -> None:
    """A ViTImageProcessor that gives the model what aiayn feeds it: the image resized to the
    model's size, scaled to [0, 1], not normalised (aiayn's images are never normalised)."""
    size = model.config.image_size
    processor = {"image_processor_type": "ViTImageProcessor", "do_resize": True,
                 "size": {"height": size, "width": size}, "resample": 2, "do_rescale": True,
                 "rescale_factor": 1 / 255, "do_normalize": False,
                 "image_mean": [0.0] * model.config.channels,
                 "image_std": [1.0] * model.config.channels}
    atomic_write_text(out / "preprocessor_config.json", json.dumps(processor, indent=2) + "\n")


__all__ = ["EXPORTERS", "export_hf"]
