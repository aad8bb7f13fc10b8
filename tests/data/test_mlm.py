"""BERT masked-LM corruption: rates on a large sample, special tokens untouched, determinism."""

import pytest
import torch

from aiayn.data.mlm import mask_tokens
from aiayn.models.encoder import IGNORE_INDEX

PAD, CLS, SEP, MASK, V = 0, 1, 2, 3, 1000
SPECIAL = (PAD, CLS, SEP)


def _sample(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(4, V, (400, 64), generator=g)  # 25,600 positions
    ids[:, 0], ids[:, 40] = CLS, SEP
    ids[:, 41:] = PAD
    inputs, labels = mask_tokens(ids, MASK, V, SPECIAL, torch.Generator().manual_seed(seed + 1))
    return ids, inputs, labels


def test_masking_rates_on_a_large_sample():
    ids, inputs, labels = _sample()
    ordinary = ~torch.isin(ids, torch.tensor(SPECIAL))
    chosen = labels != IGNORE_INDEX
    n = chosen.sum().item()
    assert abs(n / ordinary.sum().item() - 0.15) < 0.01  # 15% of ordinary tokens
    as_mask = (inputs == MASK) & chosen
    kept = (inputs == ids) & chosen
    replaced = chosen & ~as_mask & ~kept
    assert abs(as_mask.sum().item() / n - 0.8) < 0.02  # 80% -> [MASK]
    assert abs(replaced.sum().item() / n - 0.1) < 0.015  # 10% -> a random token
    assert abs(kept.sum().item() / n - 0.1) < 0.015  # 10% unchanged


def test_labels_and_untouched_positions():
    ids, inputs, labels = _sample(3)
    chosen = labels != IGNORE_INDEX
    assert torch.equal(labels[chosen], ids[chosen])  # the label is the original token
    assert torch.equal(inputs[~chosen], ids[~chosen])  # nothing else changes
    special = torch.isin(ids, torch.tensor(SPECIAL))
    assert not chosen[special].any()  # specials are never chosen
    replaced = chosen & (inputs != MASK)
    assert not torch.isin(inputs[replaced], torch.tensor((*SPECIAL, MASK))).any()
    assert ((inputs[replaced] >= 4) & (inputs[replaced] < V)).all()


def test_deterministic_with_a_generator_and_input_not_modified():
    ids = torch.randint(4, V, (8, 16))
    before = ids.clone()
    a = mask_tokens(ids, MASK, V, SPECIAL, torch.Generator().manual_seed(7))
    b = mask_tokens(ids, MASK, V, SPECIAL, torch.Generator().manual_seed(7))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert torch.equal(ids, before)


def test_bad_rates_rejected():
    with pytest.raises(ValueError, match="mask_frac"):
        mask_tokens(torch.ones(1, 3, dtype=torch.long), MASK, V, SPECIAL, mask_frac=0.95, random_frac=0.1)
