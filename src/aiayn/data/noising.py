"""Denoising objectives for pretraining an encoder-decoder: T5's span corruption and BART's
text infilling and sentence permutation.

Pure functions over lists of token ids (no <s> or </s>: the caller adds them around the result,
as it does for any pair). Randomness comes from a numpy Generator (or a seed, turned into one by
``np.random.default_rng``), so one seed gives one corruption on every machine.

T5 (Raffel et al. 2020, §3.1.4 "Unsupervised objective", §3.3.4 "Corrupting spans"): ``noise_density`` = 15% of the
tokens, in spans of mean length 3, are dropped from the input; each span becomes one sentinel
(<extra_id_0>, <extra_id_1>, ... in order), and the target lists each sentinel followed by the
tokens it stands for ("Thank you <X> me to your party <Y> week." -> "<X> for inviting <Y> last
<Z>"). Span placement is the T5 codebase's ``random_spans_noise_mask``: the number of noise tokens
and spans is fixed by the length; the noise tokens and the kept tokens are each cut into that many
non-empty segments at random, and the segments alternate, kept first, so the sequence ends with a
noise span (the paper's Figure 2 ends with kept text, hence its closing <Z>).
T5's sentinels are the last ids of its vocabulary, <extra_id_0> the very last: ``t5_sentinels``.

BART (Lewis et al. 2020, §2.2 "Pre-training BART"): the decoder reproduces the original document
from a corrupted one. Text infilling: span lengths are drawn from Poisson(λ=3) until they cover
30% of the tokens; each span becomes ONE <mask>, so the model also learns how many tokens are
missing; a zero-length span inserts a <mask>. Sentence permutation: "a document is divided into
sentences based on full stops, and these sentences are shuffled". BART-large's recipe uses both
(§5.1), infilling's <mask>s drawn over the permuted document.

Departures from fairseq's ``DenoisingDataset`` (BART's code), which the paper does not specify:
spans are of tokens, not of whole words; spans never overlap or touch, so the masked share is
exactly ``ceil(30% of the length)`` tokens and every <mask> stands for one span (fairseq starts
spans at random word starts and lets them overlap); no <mask> is swapped for a random token
(fairseq's ``--mask-random 0.1``).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence

import numpy as np

Rng = np.random.Generator | int | None


def t5_sentinels(vocab_size: int, n: int = 100) -> list[int]:
    """The ids of T5's <extra_id_0>, <extra_id_1>, ...: numbered from the last id downwards
    (T5's vocabulary of 32,000 pieces + 100 extra ids puts <extra_id_0> at 32,099)."""
    if not 0 < n <= vocab_size:
        raise ValueError(f"{n} sentinels do not fit a vocabulary of {vocab_size}")
    return [vocab_size - 1 - i for i in range(n)]


# -- T5 span corruption -----------------------------------------------------------------------

def random_spans_noise_mask(length: int, rng: Rng = None, noise_density: float = 0.15,
                            mean_noise_span_length: float = 3.0) -> list[bool]:
    """True at the noise tokens of a sequence of ``length``: T5's ``random_spans_noise_mask``.

    round(length * noise_density) noise tokens (at least 1, at most length - 1) in
    round(noise tokens / mean span length) spans (at least 1); the sequence starts with kept tokens.
    Departure: the number of spans is also capped by the number of kept tokens, where T5's would
    fail (only at noise densities near or above 50%).
    """
    if not 0.0 < noise_density < 1.0 or mean_noise_span_length < 1.0:
        raise ValueError(f"noise_density={noise_density} must be in (0, 1) and "
                         f"mean_noise_span_length={mean_noise_span_length} at least 1")
    rng = np.random.default_rng(rng)
    if length == 0:
        return []
    n = max(length, 2)  # T5: "increase length to avoid degeneracy"
    num_noise = min(max(round(n * noise_density), 1), n - 1)
    num_spans = max(round(num_noise / mean_noise_span_length), 1)
    num_spans = min(num_spans, num_noise, n - num_noise)
    noise_lengths = _random_segmentation(num_noise, num_spans, rng)
    kept_lengths = _random_segmentation(n - num_noise, num_spans, rng)
    mask: list[bool] = []
    for kept, noise in zip(kept_lengths, noise_lengths, strict=True):
        mask += [False] * kept + [True] * noise
    return mask[:length]


def _random_segmentation(num_items: int, num_segments: int, rng: np.random.Generator) -> np.ndarray:
    """Cut num_items into num_segments non-empty runs at random: shuffle num_segments - 1 cut
    marks among the num_items - 1 places between items (T5's ``_random_segmentation``)."""
    first_in_segment = np.zeros(num_items, dtype=np.int64)
    cuts = np.arange(num_items - 1) < num_segments - 1
    rng.shuffle(cuts)
    first_in_segment[1:] = cuts
    return np.bincount(np.cumsum(first_in_segment), minlength=num_segments)


def span_corruption(ids: Sequence[int], sentinels: Sequence[int], rng: Rng = None,
                    noise_density: float = 0.15,
                    mean_noise_span_length: float = 3.0) -> tuple[list[int], list[int]]:
    """T5's objective: ids -> (inputs, targets). Each noise span of the input becomes the next
    sentinel; the targets give each sentinel and its span, and would end with one more sentinel
    were kept tokens after the last span (T5's ``noise_span_to_unique_sentinel`` on both sides).
    ``fill_spans(inputs, targets, sentinels)`` gives ``ids`` back."""
    mask = random_spans_noise_mask(len(ids), rng, noise_density, mean_noise_span_length)
    inputs = _spans_to_sentinels(ids, mask, sentinels)
    targets = _spans_to_sentinels(ids, [not m for m in mask], sentinels)
    return inputs, targets


def _spans_to_sentinels(ids: Sequence[int], mask: Sequence[bool], sentinels: Sequence[int]) -> list[int]:
    out: list[int] = []
    used = 0
    for i, (token, masked) in enumerate(zip(ids, mask, strict=True)):
        if not masked:
            out.append(token)
        elif i == 0 or not mask[i - 1]:  # the first token of a span
            if used == len(sentinels):
                raise ValueError(f"{len(ids)} tokens need more than the {len(sentinels)} sentinels given")
            out.append(sentinels[used])
            used += 1
    return out


def fill_spans(inputs: Sequence[int], targets: Sequence[int], sentinels: Sequence[int]) -> list[int]:
    """The original sequence from span corruption's (inputs, targets): each sentinel of the
    inputs is replaced by what follows the same sentinel in the targets, up to the next one.
    A sentinel the targets lack stands for nothing (a model's output may be short of one)."""
    is_sentinel = set(sentinels)
    spans: dict[int, list[int]] = {}
    current: list[int] | None = None
    for token in targets:
        if token in is_sentinel:
            current = spans.setdefault(token, [])
        elif current is not None:
            current.append(token)
    out: list[int] = []
    for token in inputs:
        out += spans.get(token, []) if token in is_sentinel else [token]
    return out


# -- BART text infilling and sentence permutation ----------------------------------------------

def infilling_spans(length: int, rng: Rng = None, mask_ratio: float = 0.3,
                    poisson_lambda: float = 3.0) -> list[tuple[int, int]]:
    """(start, length) of the spans text infilling masks, sorted by start; length 0 = an insertion
    before ``start``. Lengths are drawn from Poisson(λ) until they add up to ceil(mask_ratio *
    length), the last one cut to fit (as fairseq does); the spans are then placed in distinct gaps
    between the kept tokens, at random. When there are more spans than gaps (only for a
    mask_ratio near or above 50% on short documents), insertions are dropped, then the last
    spans merged."""
    if not 0.0 <= mask_ratio <= 1.0 or poisson_lambda <= 0:
        raise ValueError(f"mask_ratio={mask_ratio} must be in [0, 1] and "
                         f"poisson_lambda={poisson_lambda} positive")
    rng = np.random.default_rng(rng)
    num_to_mask = math.ceil(length * mask_ratio)
    if num_to_mask == 0:
        return []
    lengths: list[int] = []
    while sum(lengths) < num_to_mask:
        lengths += rng.poisson(poisson_lambda, size=num_to_mask).tolist()
    total = 0
    for i, n in enumerate(lengths):
        if total + n >= num_to_mask:
            lengths = lengths[:i] + [num_to_mask - total]
            break
        total += n
    num_gaps = length - num_to_mask + 1  # before, between and after the kept tokens
    if len(lengths) > num_gaps:
        lengths = [n for n in lengths if n > 0]
    if len(lengths) > num_gaps:
        lengths = lengths[:num_gaps - 1] + [sum(lengths[num_gaps - 1:])]
    order = rng.permutation(len(lengths))  # which span goes to which chosen gap
    gaps = np.sort(rng.choice(num_gaps, size=len(lengths), replace=False))
    spans, masked_before = [], 0
    for gap, k in zip(gaps.tolist(), order.tolist(), strict=True):
        spans.append((gap + masked_before, lengths[k]))  # gap g lies after g kept tokens
        masked_before += lengths[k]
    return spans


def text_infilling(ids: Sequence[int], mask_id: int, rng: Rng = None, mask_ratio: float = 0.3,
                   poisson_lambda: float = 3.0) -> list[int]:
    """BART's text infilling: each span of ``infilling_spans`` becomes one ``mask_id``."""
    out: list[int] = []
    at = 0
    for start, n in infilling_spans(len(ids), rng, mask_ratio, poisson_lambda):
        out += list(ids[at:start]) + [mask_id]
        at = start + n
    return out + list(ids[at:])


def split_sentences(ids: Sequence[int], end_ids: Collection[int],
                    word_starts: Collection[int] | None = None) -> list[list[int]]:
    """Cut after every token in ``end_ids`` (full stops); trailing tokens without one form the
    last sentence. With ``word_starts``, only where the next token is one of them (a space
    follows, as after a sentence, not in "os.path" or "3.14"); the last token always ends one."""
    sentences: list[list[int]] = [[]]
    for i, token in enumerate(ids):
        sentences[-1].append(token)
        if token in end_ids and (word_starts is None or i + 1 == len(ids)
                                 or ids[i + 1] in word_starts):
            sentences.append([])
    return [s for s in sentences if s]


def permute_sentences(ids: Sequence[int], end_ids: Collection[int], rng: Rng = None,
                      word_starts: Collection[int] | None = None) -> list[int]:
    """BART's sentence permutation: the sentences of ``split_sentences`` in a random order."""
    rng = np.random.default_rng(rng)
    sentences = split_sentences(ids, end_ids, word_starts)
    return [token for i in rng.permutation(len(sentences)).tolist() for token in sentences[i]]


def bart_noise(ids: Sequence[int], mask_id: int, end_ids: Collection[int], rng: Rng = None,
               mask_ratio: float = 0.3, poisson_lambda: float = 3.0,
               word_starts: Collection[int] | None = None) -> tuple[list[int], list[int]]:
    """BART-large's objective (§5.1): sentence permutation, then text infilling -> (inputs,
    targets); the targets are the original document."""
    rng = np.random.default_rng(rng)
    permuted = permute_sentences(ids, end_ids, rng, word_starts)
    return text_infilling(permuted, mask_id, rng, mask_ratio, poisson_lambda), list(ids)


__all__ = ["bart_noise", "fill_spans", "infilling_spans", "permute_sentences",
           "random_spans_noise_mask", "span_corruption", "split_sentences", "t5_sentinels",
           "text_infilling"]
