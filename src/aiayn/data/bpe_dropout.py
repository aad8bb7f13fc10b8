"""BPE-dropout (Provilkov, Emelianenko and Voita 2020, "BPE-Dropout: Simple and Effective Subword
Regularization", ACL): training text segmented anew every epoch, with each merge of the BPE
vocabulary skipped, where it would apply, with probability p. The model then sees a word in many
segmentations built from the same vocabulary, which regularises it and teaches it how words are
composed; translation keeps plain BPE (p = 0). The paper used p = 0.1 and found its gains largest
on small corpora.

The algorithm is the paper's (and HF `tokenizers`' BPE with `dropout`): repeatedly take the
merges that could apply to the word's current symbols, in the vocabulary's order (leftmost
first among equals); skip each with probability p; apply the first one kept; stop when every
candidate was skipped or none is left. With p = 0 this is plain BPE and gives the tokenizer's own
ids (tested over a whole corpus). It departs from HF's in one way: its draws come from a seeded
generator, (seed, epoch), so an epoch's segmentations, and so `--resume`, are reproducible.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence

from aiayn.data.tokenizer import Tokenizer
from aiayn.errors import UserError


class BpeDropout:
    """Segments texts with a BPE tokenizer's vocabulary and merges, dropping merges with
    probability p. The texts' pre-tokenization (the tokenizer's own) is done once and kept."""

    def __init__(self, tok: Tokenizer):
        spec = json.loads(tok.hf.to_str())
        model = spec["model"]
        if model.get("type") != "BPE" or spec.get("normalizer") is not None or any(
                model.get(k) for k in ("continuing_subword_prefix", "end_of_word_suffix",
                                       "byte_fallback", "fuse_unk", "ignore_merges")):
            raise UserError("data.bpe_dropout needs aiayn's own BPE tokenizer (data.tokenizer=bpe)"
                            f"; this one is {model.get('type', 'unknown')}: set "
                            "data.bpe_dropout=0")
        self.vocab: dict[str, int] = model["vocab"]
        self.unk = self.vocab[model["unk_token"]]
        merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model["merges"]]
        self.ranks = {pair: rank for rank, pair in enumerate(merges)}
        self._pre = tok.hf.pre_tokenizer
        self._plain: dict[str, list[int]] = {}  # a word's plain BPE ids

    def words(self, text: str) -> list[str]:
        """The text's pre-tokens (words), as the tokenizer splits it before BPE."""
        return [w for w, _ in self._pre.pre_tokenize_str(text)]

    def segment(self, word: str, p: float, rng: random.Random) -> list[str]:
        """The word's subwords, each applicable merge skipped with probability p."""
        symbols = list(word)
        ranks = self.ranks
        while len(symbols) > 1:
            candidates = sorted((rank, i) for i in range(len(symbols) - 1)
                                if (rank := ranks.get((symbols[i], symbols[i + 1]))) is not None)
            for _, i in candidates:
                if not p or rng.random() >= p:
                    symbols[i:i + 2] = [symbols[i] + symbols[i + 1]]
                    break
            else:
                break
        return symbols

    def word_ids(self, word: str, p: float, rng: random.Random) -> list[int]:
        if len(word) == 1 or not p:
            if word not in self._plain:
                self._plain[word] = [self.vocab.get(s, self.unk) for s in self.segment(word, 0, rng)]
            return self._plain[word]
        return [self.vocab.get(s, self.unk) for s in self.segment(word, p, rng)]

    def encode(self, words: Sequence[Sequence[str]], p: float, rng: random.Random
               ) -> list[list[int]]:
        """Ids of texts given as their words (`words(text)` of each)."""
        out = []
        for text in words:
            ids: list[int] = []
            for word in text:
                ids += self.word_ids(word, p, rng)
            out.append(ids)
        return out


__all__ = ["BpeDropout"]
