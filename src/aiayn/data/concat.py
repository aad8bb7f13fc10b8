"""Concatenation augmentation (Nguyen, Murray and Chiang 2021, "Data Augmentation by
Concatenation for Low-Resource Translation: A Mystery and a Solution", IWSLT): beside the
training pairs, pairs made by joining two of them, source after source and target after target.
It reports about +1 BLEU on four low-resource language pairs and traces the gain to context
diversity, length diversity and (less) position shifting, not to discourse context: so the pairs
joined here are drawn at random. Not in "Attention Is All You Need".

The joins are of ids: the tokenizer's Metaspace marks every text's first word as a word's
start (data/tokenizer.py), so ids(a) + ids(b) are the ids of "a b". They are drawn afresh every
epoch from a seeded generator, (seed, epoch), so an epoch's examples, and so `--resume`, are
reproducible; a join longer than the model's positions is dropped (filter_long's rule).
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from aiayn.data.special import EOS

Ids = tuple[list[int], list[int]]


def concatenated(ids: Sequence[Ids], share: float, rng: random.Random, max_len: int,
                 source_eos: bool = False) -> list[Ids]:
    """About share x len(ids) pairs, each two different pairs of `ids` joined (the first's
    source then the second's, the same for the targets), those that fit max_len positions.
    With `source_eos` each source ends with </s>: the first one's is dropped in the join."""
    if len(ids) < 2 or share <= 0:
        return []
    out = []
    for _ in range(round(share * len(ids))):
        i = rng.randrange(len(ids))
        j = rng.randrange(len(ids) - 1)
        j += j >= i  # another pair than i
        (src_a, tgt_a), (src_b, tgt_b) = ids[i], ids[j]
        if source_eos and src_a and src_a[-1] == EOS:
            src_a = src_a[:-1]
        src, tgt = [*src_a, *src_b], [*tgt_a, *tgt_b]
        if len(src) <= max_len and len(tgt) + 1 <= max_len:  # as filter_long keeps a pair
            out.append((src, tgt))
    return out


__all__ = ["concatenated"]
