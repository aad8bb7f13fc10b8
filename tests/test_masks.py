import torch

from aiayn.masks import causal_mask, combine, padding_mask


def test_padding_mask_marks_real_tokens_true():
    tokens = torch.tensor([[5, 6, 0, 0], [7, 0, 0, 0]])
    m = padding_mask(tokens, pad_id=0)
    assert m.shape == (2, 1, 1, 4) and m.dtype == torch.bool
    assert m[0, 0, 0].tolist() == [True, True, False, False]
    assert m[1, 0, 0].tolist() == [True, False, False, False]


def test_causal_mask_is_lower_triangular():
    m = causal_mask(4)
    assert m.shape == (1, 1, 4, 4)
    assert torch.equal(m[0, 0], torch.tril(torch.ones(4, 4, dtype=torch.bool)))


def test_causal_mask_with_cached_prefix_is_the_last_rows():
    full = causal_mask(6)[0, 0]
    assert torch.equal(causal_mask(2, 6)[0, 0], full[4:])
    assert causal_mask(1, 6).all()  # the newest position sees everything before it


def test_combine_is_logical_and_and_ignores_none():
    pad = padding_mask(torch.tensor([[3, 4, 0]]), 0)
    both = combine(pad, None, causal_mask(3))
    assert both.shape == (1, 1, 3, 3)
    assert both[0, 0].tolist() == [[True, False, False], [True, True, False], [True, True, False]]
    assert combine(None, None) is None
