"""Translate with a trained encoder-decoder model folder: greedy or §6.1 beam search, batched.

    from aiayn import load
    translator = load("demo-model")
    translator.translate(["March 5, 2024"], beam=4)   # -> ["5. März 2024"]

Sentences are sorted by length and decoded in batches (little padding), then put back in the
caller's order. Padding is masked out everywhere (aiayn.masks), so a sentence's translation does
not depend on the batch it was decoded in.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch
from torch import Tensor

from aiayn.data.special import BOS, EOS, PAD
from aiayn.data.tokenizer import Tokenizer
from aiayn.errors import UserError
from aiayn.folder import load_model
from aiayn.generation.search import LENGTH_PENALTIES, beam_search, greedy_search

FAMILY = "transformer"


def pad_batch(seqs: Sequence[Sequence[int]], pad_id: int = PAD) -> Tensor:
    """Right-padded (B, T_max) LongTensor of token-id lists (T_max >= 1)."""
    width = max(1, max((len(s) for s in seqs), default=1))
    out = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    for i, s in enumerate(seqs):
        out[i, :len(s)] = torch.as_tensor(list(s), dtype=torch.long)
    return out


def decode_ids(model, src_ids: Sequence[Sequence[int]], *, beam: int = 4, alpha: float = 0.6,
               length_penalty: str = "gnmt", batch_size: int = 64, max_extra: int = 50,
               device: str | torch.device = "cpu") -> list[list[int]]:
    """Token ids in -> token ids out (no BOS/EOS), in input order. beam=1 is greedy search.

    The output of each sentence is at most len(src) + max_extra tokens (§6.1: input + 50), and
    never longer than the model's positions allow (max_len - 1, leaving room for BOS). That cap
    is per batch (its longest source), so only a sentence within max_extra tokens of max_len can
    get a different (shorter) limit in another batch.
    """
    if beam < 1:
        raise UserError(f"--beam {beam}: must be a positive integer")
    if length_penalty not in LENGTH_PENALTIES:
        raise UserError(f"--length-penalty {length_penalty}: choose {' or '.join(LENGTH_PENALTIES)}")
    if batch_size < 1:
        raise UserError(f"--batch-size {batch_size}: must be a positive integer")
    max_len = model.config.max_len
    src_ids = [list(s)[:max_len] for s in src_ids]  # longer inputs are truncated
    order = sorted(range(len(src_ids)), key=lambda i: len(src_ids[i]))
    results: list[list[int]] = [[] for _ in src_ids]
    todo = [i for i in order if src_ids[i]]  # an empty sentence translates to nothing
    model.eval()
    for start in range(0, len(todo), batch_size):
        rows = todo[start:start + batch_size]
        src = pad_batch([src_ids[i] for i in rows]).to(device)
        # Positions 0..max_len-1 hold BOS and at most max_len - 1 output tokens.
        extra = max(0, min(max_extra, max_len - 1 - src.shape[1]))
        common = dict(bos_id=BOS, eos_id=EOS, pad_id=PAD, max_extra=extra)
        if beam == 1:
            out = greedy_search(model, src, **common)
        else:
            out = beam_search(model, src, beam=beam, alpha=alpha, length_penalty=length_penalty,
                              **common)
        for i, tokens in zip(rows, out, strict=True):
            results[i] = tokens
    return results


class Translator:
    """A Transformer model and its tokenizer, ready to translate text."""

    def __init__(self, model, tokenizer: Tokenizer, device: str | torch.device = "cpu",
                 meta: dict | None = None):
        self.model = model.to(device).eval()
        self.tokenizer = tokenizer
        self.device = torch.device(device)
        self.meta = dict(meta or {})

    @classmethod
    def load(cls, folder: str | Path, device: str | torch.device = "cpu") -> Translator:
        model, meta = load_model(folder, device, expect=FAMILY, what="a translation model")
        tokenizer = Tokenizer.load(folder)
        if tokenizer.vocab_size > model.config.vocab_size:
            raise UserError(f"{folder}: tokenizer has {tokenizer.vocab_size} tokens but the model "
                            f"only {model.config.vocab_size}")
        return cls(model, tokenizer, device, meta)

    def translate(self, sentences: str | Sequence[str], beam: int = 4, alpha: float = 0.6,
                  length_penalty: str = "gnmt", batch_size: int = 64,
                  max_extra: int = 50) -> list[str]:
        """Translations of `sentences`, in order (§6.1 defaults: beam 4, alpha 0.6, GNMT)."""
        if isinstance(sentences, str):
            sentences = [sentences]
        ids = [self.tokenizer.encode(s.strip()) for s in sentences]
        out = decode_ids(self.model, ids, beam=beam, alpha=alpha, length_penalty=length_penalty,
                         batch_size=batch_size, max_extra=max_extra, device=self.device)
        return [self.tokenizer.decode(t) for t in out]

    @torch.no_grad()
    def cross_attention(self, source: str, translation: str | None = None):
        """Encoder-decoder attention of one sentence pair (teacher-forced on `translation`,
        by default the model's own greedy translation).

        Returns (source tokens, target tokens, weights (n_layers, H, T, S)); the target tokens
        are the decoder's outputs (the translation's subwords, then </s>).
        """
        if translation is None:
            translation = self.translate([source], beam=1)[0]
        tok = self.tokenizer
        src_ids = tok.encode(source.strip())[:self.model.config.max_len]
        tgt_ids = tok.encode(translation)[:self.model.config.max_len - 1]
        src = torch.tensor([src_ids], device=self.device)
        tgt_in = torch.tensor([[BOS] + tgt_ids], device=self.device)
        _, attn = self.model(src, tgt_in, return_attn=True)
        weights = torch.stack([w[0] for w in attn["cross"]]).float().cpu()  # (L, H, T, S)
        src_tokens = [tok.id_to_token(i) for i in src_ids]
        tgt_tokens = [tok.id_to_token(i) for i in tgt_ids] + ["</s>"]
        return src_tokens, tgt_tokens, weights


__all__ = ["Translator", "decode_ids", "pad_batch"]
