"""Encoder-only (BERT-style) models in one object: embed sentences, classify text, import BERT.

    from aiayn import load
    enc = load("minilm")                         # a TextEncoder
    enc.embed(["A cat sits.", "A dog sits."])    # (2, 384), mean-pooled, L2-normalised
    clf = load("origin-classifier")
    clf.classify(["Permission denied"])          # [("coreutils", 0.71)]

A text becomes [CLS] tokens [SEP] (truncated to the model's max_len); the special ids live in
the folder's config.json ("special_ids"), because an imported BERT's WordPiece vocabulary has
its own ([PAD]=0, [UNK]=100, [CLS]=101, [SEP]=102, [MASK]=103), unlike aiayn's tokenizers.
A model trained here uses aiayn's tokenizer: <s> as [CLS], </s> as [SEP], and one id past the
tokenizer's vocabulary as [MASK] (a symbol only the masked-LM objective ever writes).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from aiayn.data.tokenizer import Tokenizer
from aiayn.errors import UserError
from aiayn.folder import load_model, save_model
from aiayn.models.encoder import EncoderModel

FAMILY = "encoder"
SPECIAL_NAMES = ("pad", "cls", "sep", "unk", "mask")
_HF_SPECIALS = {"pad": "[PAD]", "cls": "[CLS]", "sep": "[SEP]", "unk": "[UNK]", "mask": "[MASK]"}


def pad_ids(seqs: Sequence[Sequence[int]], pad_id: int) -> Tensor:
    """Right-padded (B, T_max) LongTensor of token-id lists."""
    width = max(1, max((len(s) for s in seqs), default=1))
    out = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    for i, s in enumerate(seqs):
        out[i, :len(s)] = torch.as_tensor(list(s), dtype=torch.long)
    return out


class TextEncoder:
    """An EncoderModel with its tokenizer, special ids and (for a classifier) label names."""

    def __init__(self, model: EncoderModel, tokenizer: Tokenizer, special_ids: dict[str, int],
                 labels: Sequence[str] = (), device: str | torch.device = "cpu",
                 meta: dict[str, Any] | None = None, max_len: int | None = None):
        missing = [k for k in ("pad", "cls", "sep") if k not in special_ids]
        if missing:
            raise UserError(f"special_ids lacks {missing[0]!r} (have {sorted(special_ids)})")
        self.model = model.to(device).eval()
        self.tokenizer, self.special, self.labels = tokenizer, dict(special_ids), list(labels)
        self.device = torch.device(device)
        # What config.json says besides the family and the model fields (those come from `model`).
        self.meta = {k: v for k, v in (meta or {}).items() if k not in ("family", "model")}
        self.max_len = min(max_len or model.config.max_len, model.config.max_len)

    @classmethod
    def load(cls, folder: str | Path, device: str | torch.device = "cpu") -> TextEncoder:
        model, meta = load_model(folder, device, expect=FAMILY, what="an encoder")
        if "special_ids" not in meta:
            raise UserError(f"{Path(folder) / 'config.json'}: missing key 'special_ids'")
        tokenizer = Tokenizer.load(folder, check_specials=False)
        return cls(model, tokenizer, meta["special_ids"], meta.get("labels", []), device, meta,
                   meta.get("max_seq_length"))

    def save(self, folder: str | Path) -> Path:
        save_model(folder, FAMILY, self.model, {**self.meta, "special_ids": self.special,
                                                 "labels": self.labels})
        self.tokenizer.save(folder)
        return Path(folder)

    # -- text -> ids ---------------------------------------------------------------------------

    def token_ids(self, text: str) -> list[int]:
        """[CLS] + tokens + [SEP], truncated to max_len (the [SEP] kept)."""
        body = self.tokenizer.encode(text)[: self.max_len - 2]
        return [self.special["cls"], *body, self.special["sep"]]

    def batch(self, texts: Sequence[str]) -> Tensor:
        return pad_ids([self.token_ids(t) for t in texts], self.special["pad"]).to(self.device)

    # -- uses ------------------------------------------------------------------------------------

    @torch.no_grad()
    def embed(self, texts: str | Sequence[str], normalize: bool = True, batch_size: int = 64) -> Tensor:
        """Sentence embeddings (B, D): the mean of the last hidden states over real tokens
        ([CLS] and [SEP] included, as sentence-transformers does), L2-normalised."""
        texts = [texts] if isinstance(texts, str) else list(texts)
        self.model.eval()
        out = [self.model.sentence_embedding(self.batch(texts[i:i + batch_size]), normalize=normalize)
               for i in range(0, len(texts), batch_size)]
        return torch.cat(out).float().cpu() if out else torch.zeros(0, self.model.config.d_model)

    @torch.no_grad()
    def predict_proba(self, texts: Sequence[str], batch_size: int = 64) -> Tensor:
        """Class probabilities (B, n_labels)."""
        if self.model.classifier is None:
            raise UserError("this model has no classification head "
                            "(train one with `aiayn classify train`)")
        self.model.eval()
        out = [self.model.classify(self.batch(texts[i:i + batch_size])).float().softmax(-1).cpu()
               for i in range(0, len(texts), batch_size)]
        return torch.cat(out) if out else torch.zeros(0, len(self.labels))

    def classify(self, texts: str | Sequence[str]) -> list[tuple[str, float]]:
        """(label, probability) of the most likely class of each text."""
        texts = [texts] if isinstance(texts, str) else list(texts)
        probs = self.predict_proba(texts)
        if not texts:
            return []
        return [(self.labels[int(i)], float(p)) for p, i in zip(*probs.max(-1), strict=True)]

    def evaluate(self, examples: Sequence[tuple[str, str]]) -> float:
        """Accuracy on (text, label) examples."""
        if not examples:
            raise UserError("no examples to evaluate")
        predicted = self.classify([t for t, _ in examples])
        return sum(p == y for (p, _), (_, y) in zip(predicted, examples, strict=True)) / len(examples)


# -- importing a BERT checkpoint folder ------------------------------------------------------

def import_hf_bert(folder: str | Path, out: str | Path) -> TextEncoder:
    """Convert a BERT-architecture folder (config.json + model.safetensors + tokenizer.json,
    e.g. all-MiniLM-L6-v2) into an aiayn model folder; returns the TextEncoder."""
    from tokenizers import Tokenizer as HFTokenizer

    from aiayn.convert.hf_bert import load_hf_folder

    folder, out = Path(folder), Path(out)
    model, hf_config = load_hf_folder(folder)
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
    if special["pad"] != model.config.pad_id:
        raise UserError(f"{tok_path}: [PAD] is id {special['pad']} but config.json says "
                        f"pad_token_id={model.config.pad_id}")
    meta = {"task": "text-encoder", "source": str(folder.resolve()), "special_ids": special,
            "labels": [], "embedding": {"pooling": "mean", "normalize": True}}
    max_seq = _sentence_transformers_max_len(folder)
    if max_seq is not None:
        meta["max_seq_length"] = max_seq
    encoder = TextEncoder(model, Tokenizer(hf_tok, check_specials=False), special, [], "cpu", meta,
                          max_seq)
    encoder.save(out)
    return encoder


def _sentence_transformers_max_len(folder: Path) -> int | None:
    """sentence-transformers' max_seq_length (sentence_bert_config.json), when the folder has one."""
    path = folder / "sentence_bert_config.json"
    if not path.is_file():
        return None
    try:
        value = json.loads(path.read_text(encoding="utf-8")).get("max_seq_length")
    except (json.JSONDecodeError, UnicodeDecodeError, AttributeError) as e:
        raise UserError(f"{path}: invalid JSON ({e})") from None
    if value is not None and (not isinstance(value, int) or value < 3):
        raise UserError(f"{path}: max_seq_length={value!r} must be an integer >= 3")
    return value


__all__ = ["FAMILY", "TextEncoder", "import_hf_bert", "pad_ids"]
