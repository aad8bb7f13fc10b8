"""Sampling filters: exact top-k on ties, the smallest nucleus reaching p, seeded draws."""

import math

import pytest
import torch

from aiayn.errors import UserError
from aiayn.generation.sampling import filter_logits, sample, temperature, top_k, top_p


def _kept(logits):
    return torch.isfinite(logits)


def test_temperature_divides_and_rejects_non_positive():
    logits = torch.tensor([[1.0, -2.0, 4.0]])
    assert torch.equal(temperature(logits, 0.5), logits * 2)
    with pytest.raises(UserError, match="temperature=0"):
        temperature(logits, 0)


def test_top_k_matches_torch_topk():
    torch.manual_seed(0)
    logits = torch.randn(5, 30)
    out = top_k(logits, 4)
    assert torch.equal(_kept(out).sum(-1), torch.full((5,), 4))
    values = torch.topk(logits, 4).values
    assert torch.equal(torch.sort(out[_kept(out)].view(5, 4), descending=True).values, values)


def test_top_k_keeps_exactly_k_on_ties():
    logits = torch.tensor([[1.0, 3.0, 3.0, 3.0, 3.0, 0.0], [2.0] * 6])
    out = top_k(logits, 2)
    assert _kept(out).sum(-1).tolist() == [2, 2]
    assert (out[0][_kept(out[0])] == 3.0).all()
    assert torch.equal(top_k(logits, 6), logits) and torch.equal(top_k(logits, 99), logits)


@pytest.mark.parametrize("p, n", [(0.5, 1), (0.75, 2), (0.81, 3), (0.96, 4), (1.0, 4)])
def test_top_p_keeps_smallest_set_reaching_p(p, n):
    probs = torch.tensor([[0.15, 0.5, 0.05, 0.3]])
    out = top_p(probs.log(), p)
    kept = _kept(out)[0]
    assert kept.sum().item() == n
    order = torch.argsort(probs[0], descending=True)
    assert kept[order[:n]].all()  # the n most probable tokens


def test_top_p_invariants_on_random_rows():
    torch.manual_seed(1)
    logits = torch.randn(200, 20) * 2
    for p in (0.1, 0.5, 0.9, 0.99):
        kept = _kept(top_p(logits, p))
        probs = torch.softmax(logits, -1)
        for row, mask in zip(probs, kept, strict=True):
            mass = row[mask].sum().item()
            assert mass >= p - 1e-6  # reaches p ...
            assert mass - row[mask].min().item() < p  # ... and no smaller set does
            if not mask.all():
                assert row[mask].min() >= row[~mask].max()  # the most probable ones


def test_filters_are_pure_and_compose():
    logits = torch.randn(3, 10)
    before = logits.clone()
    out = filter_logits(logits, 0.7, 5, 0.8)
    assert torch.equal(logits, before)
    assert (_kept(out).sum(-1) <= 5).all() and (_kept(out).sum(-1) >= 1).all()
    assert torch.allclose(out[_kept(out)], (logits / 0.7)[_kept(out)])


def test_sample_greedy_and_seeded():
    torch.manual_seed(2)
    logits = torch.randn(8, 50)
    assert torch.equal(sample(logits, 0), logits.argmax(-1))

    def draws(seed):
        g = torch.Generator().manual_seed(seed)
        return torch.stack([sample(logits, 1.0, generator=g) for _ in range(20)])

    assert torch.equal(draws(7), draws(7))
    assert not torch.equal(draws(7), draws(8))


def test_sample_draws_only_kept_tokens_with_the_right_frequencies():
    logits = torch.log(torch.tensor([[0.4, 0.3, 0.2, 0.1]])).expand(4000, 4)
    g = torch.Generator().manual_seed(0)
    tokens = sample(logits, 1.0, k=2, generator=g)
    assert set(tokens.tolist()) == {0, 1}
    freq = (tokens == 0).float().mean().item()  # 0.4 / 0.7 after renormalising
    assert math.isclose(freq, 4 / 7, abs_tol=0.03)


def test_bad_filter_arguments_are_user_errors():
    logits = torch.randn(1, 5)
    with pytest.raises(UserError, match="top_k=0"):
        top_k(logits, 0)
    with pytest.raises(UserError, match="top_p=1.5"):
        top_p(logits, 1.5)
