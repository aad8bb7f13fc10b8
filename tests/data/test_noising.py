"""T5 span corruption and BART text infilling / sentence permutation: rates and span lengths on a
large sample, sentinel numbering, exact reconstruction, determinism, tiny documents."""

import math
from collections import Counter

import numpy as np
import pytest

from aiayn.data.noising import (
    bart_noise,
    fill_spans,
    infilling_spans,
    permute_sentences,
    random_spans_noise_mask,
    span_corruption,
    split_sentences,
    t5_sentinels,
    text_infilling,
)

V = 1000
SENTINELS = t5_sentinels(V)  # 999, 998, ...
MASK, STOP = 4, 5  # BART's <mask>; a full stop


def _doc(rng, n):
    return rng.integers(10, 900, size=n).tolist()  # no sentinel, mask or stop id


def _spans(mask):
    """Lengths of the runs of True."""
    runs, n = [], 0
    for m in [*mask, False]:
        if m:
            n += 1
        elif n:
            runs.append(n)
            n = 0
    return runs


# -- T5 ------------------------------------------------------------------------------------------

def test_t5_sentinels_count_down_from_the_last_id():
    assert t5_sentinels(32100)[:3] == [32099, 32098, 32097] and len(t5_sentinels(32100)) == 100
    with pytest.raises(ValueError):
        t5_sentinels(5, 6)


def test_noise_density_and_mean_span_length_on_a_large_sample():
    rng = np.random.default_rng(0)
    noise = total = 0
    spans = []
    for length in rng.integers(50, 600, size=400).tolist():
        mask = random_spans_noise_mask(length, rng)
        assert len(mask) == length and not mask[0]  # T5: the sequence starts with kept tokens
        noise, total = noise + sum(mask), total + length
        spans += _spans(mask)
    assert abs(noise / total - 0.15) < 0.002  # round(length * 0.15) in every sequence
    assert abs(np.mean(spans) - 3.0) < 0.05
    assert min(spans) >= 1 and max(spans) > 6  # lengths vary around the mean


def test_t5_counts_are_fixed_by_the_length():
    """T5: round(L * density) noise tokens in round(noise / mean) spans, whatever the seed."""
    for seed in range(20):
        mask = random_spans_noise_mask(100, seed)
        assert sum(mask) == 15 and len(_spans(mask)) == 5


def test_span_corruption_paper_example_shape_and_exact_reconstruction():
    rng = np.random.default_rng(1)
    for _ in range(300):
        ids = _doc(rng, int(rng.integers(0, 300)))
        inputs, targets = span_corruption(ids, SENTINELS, rng)
        used_in = [t for t in inputs if t in SENTINELS]
        used_out = [t for t in targets if t in SENTINELS]
        assert used_in == SENTINELS[:len(used_in)]  # <extra_id_0>, <extra_id_1>, ... in order
        # the targets name the same sentinels, plus one closing the kept tail when there is one
        assert used_out[:len(used_in)] == used_in and len(used_out) - len(used_in) in (0, 1)
        if ids:
            assert targets[0] == SENTINELS[0]
        assert fill_spans(inputs, targets, SENTINELS) == ids
        assert len(inputs) + len(targets) == len(ids) + len(used_in) + len(used_out)


def test_span_corruption_worked_example():
    mask = random_spans_noise_mask(20, 3)
    ids = list(range(100, 120))
    inputs, targets = span_corruption(ids, SENTINELS, 3)
    kept = [t for t, m in zip(ids, mask, strict=True) if not m]
    assert [t for t in inputs if t not in SENTINELS] == kept
    assert [t for t in targets if t not in SENTINELS] == [t for t, m in zip(ids, mask, strict=True) if m]


def test_span_corruption_tiny_documents_and_too_few_sentinels():
    assert span_corruption([], SENTINELS, 0) == ([], [])
    assert span_corruption([7], SENTINELS, 0) == ([7], [SENTINELS[0]])  # no noise, as T5
    for n in (2, 3, 4, 5):
        inputs, targets = span_corruption(list(range(10, 10 + n)), SENTINELS, n)
        assert fill_spans(inputs, targets, SENTINELS) == list(range(10, 10 + n))
        assert SENTINELS[0] in inputs  # one noise token at least from two tokens on
    with pytest.raises(ValueError, match="sentinels"):
        span_corruption(list(range(10, 210)), [999, 998], 0)


def test_determinism_under_a_seed():
    ids = list(range(10, 210))
    assert span_corruption(ids, SENTINELS, 5) == span_corruption(ids, SENTINELS, 5)
    assert span_corruption(ids, SENTINELS, 5) != span_corruption(ids, SENTINELS, 6)
    assert bart_noise(ids, MASK, {STOP}, 5) == bart_noise(ids, MASK, {STOP}, 5)
    assert text_infilling(ids, MASK, 5) != text_infilling(ids, MASK, 6)


def test_bad_rates_rejected():
    with pytest.raises(ValueError, match="noise_density"):
        random_spans_noise_mask(10, 0, noise_density=1.5)
    with pytest.raises(ValueError, match="mask_ratio"):
        infilling_spans(10, 0, mask_ratio=-0.1)


# -- BART ----------------------------------------------------------------------------------------

def test_infilling_masks_30_percent_in_poisson_spans():
    rng = np.random.default_rng(2)
    lengths = Counter()
    masked = total = 0
    for _ in range(300):
        n = 2000
        spans = infilling_spans(n, rng)
        assert [s for s, _ in spans] == sorted(s for s, _ in spans)
        for (s0, l0), (s1, _) in zip(spans, spans[1:], strict=False):
            assert s0 + l0 < s1 or (l0 == 0 and s0 < s1)  # spans never overlap or touch
        masked, total = masked + sum(k for _, k in spans), total + n
        lengths.update(k for _, k in spans[:-1])  # the last one drawn may be cut: leave it out
    assert masked == sum(math.ceil(0.3 * 2000) for _ in range(300))  # exactly 30%
    count = sum(lengths.values())
    for k in range(9):  # Poisson(3): P(0) = 0.050, P(3) = 0.224, ...
        pmf = math.exp(-3) * 3**k / math.factorial(k)
        assert abs(lengths[k] / count - pmf) < 0.01, k
    assert abs(sum(k * c for k, c in lengths.items()) / count - 3.0) < 0.05


def test_text_infilling_one_mask_per_span_and_the_rest_in_order():
    rng = np.random.default_rng(3)
    for _ in range(200):
        ids = _doc(rng, int(rng.integers(0, 200)))
        state = rng.bit_generator.state
        spans = infilling_spans(len(ids), rng)
        rng.bit_generator.state = state
        inputs = text_infilling(ids, MASK, rng)
        assert inputs.count(MASK) == len(spans)  # zero-length spans included: insertions
        assert len(inputs) == len(ids) - math.ceil(0.3 * len(ids)) + len(spans)
        hidden = {i for s, k in spans for i in range(s, s + k)}
        assert [t for t in inputs if t != MASK] == [t for i, t in enumerate(ids) if i not in hidden]


def test_infilling_tiny_documents():
    assert text_infilling([], MASK, 0) == []
    for n in range(1, 6):
        for seed in range(30):
            inputs = text_infilling(list(range(10, 10 + n)), MASK, seed)
            assert MASK in inputs and len(inputs) <= n + 1
    # a mask ratio too high for the gaps: spans merge, nothing fails
    assert text_infilling([10, 11, 12], MASK, 0, mask_ratio=1.0) == [MASK]


def test_sentence_permutation_keeps_the_multiset_of_sentences():
    rng = np.random.default_rng(4)
    changed = 0
    for _ in range(200):
        sentences = [_doc(rng, int(rng.integers(1, 12))) + [STOP] for _ in range(rng.integers(0, 8))]
        ids = [t for s in sentences for t in s]
        permuted = permute_sentences(ids, {STOP}, rng)
        assert sorted(map(tuple, split_sentences(permuted, {STOP}))) == sorted(map(tuple, sentences))
        changed += permuted != ids
    assert changed > 100  # 0- and 1-sentence documents cannot change


def test_a_last_sentence_without_a_stop_moves_as_one():
    ids = [11, 12, STOP, 13, STOP, 14, 15]
    seen = {tuple(permute_sentences(ids, {STOP}, seed)) for seed in range(40)}
    assert len(seen) == 6  # 3! orders of [11 12 .] [13 .] [14 15]
    assert all(len(p) == len(ids) and (14, 15) == p[p.index(14):p.index(14) + 2] for p in seen)


def test_split_sentences_cuts_after_each_stop():
    assert split_sentences([1, STOP, 2, 3, STOP, 4], {STOP}) == [[1, STOP], [2, 3, STOP], [4]]
    assert split_sentences([], {STOP}) == [] and permute_sentences([], {STOP}, 0) == []
    assert permute_sentences([7], {STOP}, 0) == [7]


def test_with_word_starts_a_stop_ends_a_sentence_only_before_a_new_word():
    WORD = {21, 22}  # ids that start a word ("▁..."): a space before them
    ids = [11, STOP, 12, STOP, 21, 13, STOP, 22, STOP]  # "a.b. Xc. Y."
    assert split_sentences(ids, {STOP}, WORD) == [[11, STOP, 12, STOP], [21, 13, STOP], [22, STOP]]
    orders = {tuple(permute_sentences(ids, {STOP}, seed, WORD)) for seed in range(40)}
    assert len(orders) == 6 and all(p[p.index(11):p.index(11) + 4] == (11, STOP, 12, STOP)
                                    for p in orders)
    inputs, targets = bart_noise(ids, MASK, {STOP}, 0, word_starts=WORD)
    assert targets == ids and MASK in inputs


def test_bart_noise_targets_are_the_original():
    ids = [11, 12, STOP, 13, 14, 15, STOP, 16, STOP]
    inputs, targets = bart_noise(ids, MASK, {STOP}, 0)
    assert targets == ids and MASK in inputs
    assert bart_noise([], MASK, {STOP}, 0) == ([], [])
