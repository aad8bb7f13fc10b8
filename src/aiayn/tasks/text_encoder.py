"""The text-classification task's user-facing object (aiayn.tasks.text_classification trains
it): an EncoderModel with its tokenizer, special ids and (for a classifier) label names, that
embeds sentences and labels texts; and the import of a BERT-architecture folder as one.

    from aiayn import load
    enc = load("minilm")                         # a TextEncoder
    enc.embed(["A cat sits.", "A dog sits."])    # (2, 384), mean-pooled, L2-normalised
    clf = load("origin-classifier")
    clf.classify(["Permission denied"])          # [("coreutils", 0.71)]

A text becomes [CLS] tokens [SEP] (truncated to the model's max_len), with the special ids of
the folder's config.json ("special_ids").
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from aiayn.data.batching import pad_ids
from aiayn.data.tokenizer import Tokenizer
from aiayn.errors import UserError
from aiayn.folder import load_model, save_model
from aiayn.folder.families import ENCODER as FAMILY
from aiayn.models.encoder import EncoderModel


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
        model, meta = load_model(folder, device, expect=FAMILY)
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


def import_hf_bert(folder: str | Path, out: str | Path) -> TextEncoder:
    """Convert a BERT-architecture folder (config.json + model.safetensors + tokenizer.json,
    e.g. all-MiniLM-L6-v2) into an aiayn model folder; returns the TextEncoder."""
    from aiayn.convert.hf_bert import (
        load_hf_folder,
        load_hf_tokenizer,
        sentence_transformers_max_len,
    )
    from aiayn.convert.hf_original import KEY, keep
    from aiayn.folder import new_folder, require_new_folder

    folder, out = Path(folder), require_new_folder(out)
    model, hf_config = load_hf_folder(folder)
    hf_tok, special = load_hf_tokenizer(folder, model.config.pad_id)
    meta = {"task": "text-encoder", "source": str(folder.resolve()), "special_ids": special,
            "labels": [], "embedding": {"pooling": "mean", "normalize": True},
            KEY: keep(folder, hf_config, model.config)}  # `aiayn export hf` gives it back
    max_seq = sentence_transformers_max_len(folder)
    if max_seq is not None:
        meta["max_seq_length"] = max_seq
    encoder = TextEncoder(model, Tokenizer(hf_tok, check_specials=False), special, [], "cpu", meta,
                          max_seq)
    with new_folder(out):
        encoder.save(out)
    return encoder



__all__ = ["TextEncoder", "import_hf_bert"]
