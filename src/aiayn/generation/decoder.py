"""The one interface an encoder-decoder's text is decoded and scored through, whichever engine
computes it (STYLE.md: other engines behind the same interface as our own search):

    TorchDecoder(model, device, ...)   aiayn's own search (generation.search) over the PyTorch model
    CT2Decoder                         CTranslate2 (generation.ctranslate2), the same search rules

The Translator holds one (Translator.decoder) and gives it token ids: the sources as the model
reads them (encode_source, fit_source) and, for `score_ids`, the targets (encode_target).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import torch

from aiayn.data.batching import collate
from aiayn.generation.search import decode_ids

ENGINES = ("torch", "ctranslate2")


class Decoder(Protocol):
    """Token ids in, token ids (or their log-likelihood) out, in input order."""

    def decode_ids(self, src_ids: Sequence[Sequence[int]], **options: Any) -> list[list[int]]:
        """Each source's output ids (no <s> / </s>); options: those of
        aiayn.generation.search.decode_ids but the model and device (beam, alpha,
        length_penalty, batch_size, max_extra, early_stopping, workers, the special ids, ...)."""
        ...

    def score_ids(self, pairs: Sequence[tuple[Sequence[int], Sequence[int]]],
                  batch_size: int = 64) -> list[dict[str, float]]:
        """Teacher-forced log-likelihood of each (source ids, target ids) pair: {"logprob":
        summed over the target and </s> (nats), "tokens": how many}."""
        ...


class TorchDecoder:
    """aiayn's own search and scoring over the PyTorch model, a Decoder. pad_id, bos_id (the
    decoder's first input), eos_id and counted_once (ids left out of the softmax: an imported
    T5's or Marian's <pad>, also its <s>) as Translator.search_ids gives them."""

    def __init__(self, model, device: str | torch.device, *, bos_id: int, eos_id: int,
                 pad_id: int, counted_once: Sequence[int] = ()):
        self.model, self.device = model, torch.device(device)
        self.bos_id, self.eos_id, self.pad_id = bos_id, eos_id, pad_id
        self.counted_once = list(counted_once)

    def decode_ids(self, src_ids: Sequence[Sequence[int]], **options: Any) -> list[list[int]]:
        return decode_ids(self.model, src_ids, device=self.device, **options)

    @torch.no_grad()
    def score_ids(self, pairs: Sequence[tuple[Sequence[int], Sequence[int]]],
                  batch_size: int = 64) -> list[dict[str, float]]:
        """The decoder reads each target shifted right after bos_id (§3.1); counted_once ids get
        -inf before the softmax (their row counts once, as the original's softmax counts it).
        Computed in the model's dtype, at least float32."""
        out: list[dict[str, float]] = []
        for start in range(0, len(pairs), batch_size):
            chunk = [(list(s), list(t)) for s, t in pairs[start:start + batch_size]]
            batch = collate(chunk, self.pad_id, self.bos_id, self.eos_id)
            logits = self.model(batch.src.to(self.device), batch.tgt_in.to(self.device))
            logits[..., self.counted_once] = float("-inf")  # T5's <pad> row counted once
            logp = torch.log_softmax(logits, dim=-1,
                                     dtype=torch.promote_types(logits.dtype, torch.float32))
            tgt = batch.tgt_out.to(self.device)
            # the padding collate put past each target's </s> (by length: a target may hold
            # the <pad> token itself)
            lengths = torch.tensor([len(t) + 1 for _, t in chunk], device=self.device)
            pad = torch.arange(tgt.shape[1], device=self.device) >= lengths[:, None]
            token_lp = logp.gather(-1, tgt.unsqueeze(-1)).squeeze(-1).masked_fill(pad, 0)
            for row, n in zip(token_lp.sum(-1).tolist(), (~pad).sum(-1).tolist(),
                              strict=True):
                out.append({"logprob": row, "tokens": n})
        return out


__all__ = ["ENGINES", "Decoder", "TorchDecoder"]
