"""§5.1 token-budget batches and the padded Batch the trainer consumes."""

import random

import pytest
import torch

from aiayn.data.batching import Batch, PackedPairs, collate, token_batches
from aiayn.data.special import BOS, EOS, PAD
from aiayn.errors import UserError
from aiayn.masks import padding_mask


def random_lengths(n=500, seed=1):
    rng = random.Random(seed)
    return [(rng.randint(1, 40), rng.randint(1, 45)) for _ in range(n)]


def padded_tokens(batch, lengths):
    return (max(lengths[i][0] for i in batch) + max(lengths[i][1] for i in batch)) * len(batch)


@pytest.mark.parametrize("shuffle", [True, False])
@pytest.mark.parametrize("max_tokens", [90, 400, 2500])
def test_budget_respected_and_every_index_once(shuffle, max_tokens):
    lengths = random_lengths()
    batches = token_batches(lengths, max_tokens, shuffle=shuffle, seed=3)
    flat = [i for b in batches for i in b]
    assert sorted(flat) == list(range(len(lengths)))
    for b in batches:
        assert b, "no empty batches"
        assert padded_tokens(b, lengths) <= max_tokens


def test_overlong_example_gets_its_own_batch():
    lengths = [(3, 3), (50, 60), (4, 2), (2, 5)]
    batches = token_batches(lengths, max_tokens=40, shuffle=False)
    assert [1] in batches
    assert sorted(i for b in batches for i in b) == [0, 1, 2, 3]


def test_similar_lengths_are_grouped():
    rng = random.Random(2)
    src = [rng.randint(1, 60) for _ in range(2000)]
    lengths = [(s, max(1, s + rng.randint(-3, 6))) for s in src]  # targets track sources
    batches = token_batches(lengths, max_tokens=1000, seed=0)
    real = sum(s + t for s, t in lengths)
    padded = sum(padded_tokens(b, lengths) for b in batches)
    # the same batch sizes over a random order waste far more
    order = list(range(len(lengths)))
    rng.shuffle(order)
    chunks, at = [], 0
    for b in batches:
        chunks.append(order[at:at + len(b)])
        at += len(b)
    random_padded = sum(padded_tokens(c, lengths) for c in chunks)
    assert real / padded > 0.9
    assert real / random_padded < 0.7


def test_shuffle_is_deterministic_by_seed():
    lengths = random_lengths()
    a = token_batches(lengths, 400, seed=7)
    assert a == token_batches(lengths, 400, seed=7)
    assert a != token_batches(lengths, 400, seed=8)


def test_without_shuffle_batches_go_from_short_to_long():
    lengths = random_lengths()
    batches = token_batches(lengths, 400, shuffle=False)
    firsts = [lengths[b[0]][0] for b in batches]
    assert firsts == sorted(firsts)


def _token_batches_in_lists(lengths, max_tokens, shuffle=True, seed=0):
    """token_batches as it was written over Python lists (the reference: a stream resumed from a
    folder made before the arrays must see the same batches)."""
    rng = random.Random(seed)
    order = list(range(len(lengths)))
    if shuffle:
        rng.shuffle(order)
    order.sort(key=lambda i: (lengths[i][0], lengths[i][1]))
    batches, batch, max_src, max_tgt = [], [], 0, 0
    for i in order:
        src_len, tgt_len = lengths[i]
        new_src, new_tgt = max(max_src, src_len), max(max_tgt, tgt_len)
        if batch and (new_src + new_tgt) * (len(batch) + 1) > max_tokens:
            batches.append(batch)
            batch, new_src, new_tgt = [], src_len, tgt_len
        batch.append(i)
        max_src, max_tgt = new_src, new_tgt
    if batch:
        batches.append(batch)
    if shuffle:
        rng.shuffle(batches)
    return batches


@pytest.mark.parametrize("shuffle", [True, False])
@pytest.mark.parametrize("max_tokens", [1, 7, 60, 1500, 50_000])
def test_token_batches_are_the_list_implementations(shuffle, max_tokens):
    """The same batches, in the same order, as the loop over lists they replace: long and short
    examples mixed (some over the budget alone), ties in length, a budget larger than the data."""
    rng = random.Random(max_tokens)
    lengths = [(rng.randint(0, 50), rng.randint(1, 90)) for _ in range(3000)]
    lengths += [(3, 4)] * 40 + [(200, 1)]
    for seed in (0, 5):
        assert token_batches(lengths, max_tokens, shuffle, seed) == \
            _token_batches_in_lists(lengths, max_tokens, shuffle, seed)
    assert token_batches([], max_tokens, shuffle) == []


def test_bad_budget():
    with pytest.raises(UserError, match="max_tokens"):
        token_batches([(1, 1)], 0)


def test_collate_shapes_bos_eos_and_padding():
    pairs = [([5, 6, 7], [8, 9]), ([10], [11, 12, 13, 14])]
    batch = collate(pairs, pad_id=PAD)
    assert isinstance(batch, Batch) and len(batch) == 2
    assert batch.src.tolist() == [[5, 6, 7], [10, PAD, PAD]]
    assert batch.tgt_in.tolist() == [[BOS, 8, 9, PAD, PAD], [BOS, 11, 12, 13, 14]]
    assert batch.tgt_out.tolist() == [[8, 9, EOS, PAD, PAD], [11, 12, 13, 14, EOS]]
    assert batch.src.dtype == batch.tgt_in.dtype == batch.tgt_out.dtype == torch.long
    assert batch.n_tgt_tokens == 3 + 5
    assert batch.n_src_tokens == 4
    # tgt_out is tgt_in shifted left by one (teacher forcing)
    assert torch.equal(batch.tgt_in[0, 1:3], batch.tgt_out[0, :2])


def test_collate_other_pad_id_and_device():
    batch = collate([([4], [5, 6]), ([4, 4, 4], [5])], pad_id=99).to("cpu")
    assert batch.src.tolist() == [[4, 99, 99], [4, 4, 4]]
    assert batch.tgt_out.tolist() == [[5, 6, EOS], [5, EOS, 99]]
    assert batch.pad_id == 99 and batch.n_tgt_tokens == 5


def test_collate_matches_the_mask_convention():
    batch = collate([([5, 6, 7], [8]), ([10], [11])])
    mask = padding_mask(batch.src, PAD)  # (B, 1, 1, S), True = real token
    assert mask.shape == (2, 1, 1, 3)
    assert mask[1, 0, 0].tolist() == [True, False, False]


def test_collate_empty():
    with pytest.raises(UserError):
        collate([])


def test_batches_feed_collate_within_budget():
    rng = random.Random(0)
    examples = [([7] * rng.randint(1, 20), [8] * rng.randint(1, 20)) for _ in range(200)]
    lengths = [(len(s), len(t) + 1) for s, t in examples]  # + 1: collate adds <s> / </s>
    for b in token_batches(lengths, max_tokens=300, seed=0):
        batch = collate([examples[i] for i in b])
        assert (batch.src.size(1) + batch.tgt_in.size(1)) * len(batch) <= 300


@pytest.mark.parametrize("pad_id", [PAD, 99])
def test_packed_pairs_collate_as_the_lists_do(pad_id):
    """PackedPairs.collate (the training stream's) is collate() tensor for tensor: ids, padding,
    <s>/</s>, dtypes, the host's target count and index; over batches cut as training cuts them,
    with empty sources and targets, a batch of one and a corpus holding no source id at all."""
    rng = random.Random(0)
    pairs = [([rng.randint(4, 50) for _ in range(rng.randint(0, 12))],
              [rng.randint(4, 50) for _ in range(rng.randint(0, 12))]) for _ in range(300)]
    packed = PackedPairs(pairs, pad_id=pad_id, bos_id=BOS, eos_id=EOS)
    lengths = [(len(s), len(t) + 1) for s, t in pairs]
    cuts = [b for budget in (20, 100, 1000) for b in token_batches(lengths, budget, seed=1)]
    cuts += [[i] for i in range(5)] + [[i for i, (s, _) in enumerate(pairs) if not s]]
    no_source = PackedPairs([([], t) for _, t in pairs[:9]], pad_id=pad_id)
    for ids, cut, corpus in [(pairs, c, packed) for c in cuts] + [
            ([([], t) for _, t in pairs[:9]], [0, 4, 8], no_source)]:
        want, got = collate([ids[i] for i in cut], pad_id), corpus.collate(cut)
        for name in ("src", "tgt_in", "tgt_out", "tgt_index"):
            a, b = getattr(want, name), getattr(got, name)
            assert a.dtype == b.dtype and torch.equal(a, b), (name, cut)
        assert got.tgt_count == want.tgt_count and got.pad_id == pad_id
    assert len(packed) == 300
    with pytest.raises(UserError, match="no examples"):
        packed.collate([])
