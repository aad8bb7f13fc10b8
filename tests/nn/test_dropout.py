import pytest
import torch
import torch.nn.functional as F

from aiayn.nn.dropout import LEVELS, Dropout, dropout, keep_mask


@pytest.mark.parametrize("p", [0.1, 0.3, 0.5])
def test_mask_drops_the_rounded_p_and_scaling_keeps_the_expectation(p):
    torch.manual_seed(0)
    n = 400_000
    keep, scale = keep_mask(torch.Size([n]), p)
    rounded = round(p * LEVELS) / LEVELS
    assert abs(rounded - p) <= 0.5 / LEVELS
    assert scale == pytest.approx(1 / (1 - rounded), rel=1e-12)
    # 5 standard deviations of a binomial count
    assert abs((~keep).float().mean().item() - rounded) < 5 * (p * (1 - p) / n) ** 0.5
    y = dropout(torch.ones(n), p)
    assert set(y.unique().tolist()) <= {0.0, torch.tensor(scale).item()}  # scale in fp32
    assert y.mean().item() == pytest.approx(1.0, abs=5 * (p / (1 - p) / n) ** 0.5)


def test_mask_levels_are_uniform_over_all_15_bits():
    # every 16-bit part of the int64 draws is used: a stuck bit or a constant part would show
    # as a level count far from uniform
    torch.manual_seed(1)
    n = 1 << 20
    for p_levels in (1, 2, 4, 8, 16, 1024, 16384):  # thresholds that read single bits
        keep, _ = keep_mask(torch.Size([n]), p_levels / LEVELS)
        dropped = (~keep).float().mean().item()
        assert dropped == pytest.approx(p_levels / LEVELS, abs=6 * (p_levels / LEVELS / n) ** 0.5 + 1e-7)
    # positions 0..3 of each int64 drop alike (no part is stuck)
    keep, _ = keep_mask(torch.Size([n]), 0.5)
    rates = [(~keep[i::4]).float().mean().item() for i in range(4)]
    assert max(rates) - min(rates) < 0.01


def test_dropout_gradient_is_the_mask_times_the_scale():
    torch.manual_seed(2)
    x = torch.randn(64, 32, requires_grad=True)
    torch.manual_seed(3)
    y = dropout(x, 0.25)
    g = torch.randn_like(y)
    y.backward(g)
    kept = y != 0
    scale = LEVELS / (LEVELS - round(0.25 * LEVELS))
    torch.testing.assert_close(y[kept], x.detach()[kept] * scale)
    torch.testing.assert_close(x.grad, torch.where(kept, g * scale, 0.0))
    torch.manual_seed(3)  # the same seed gives the same mask (the trainer's RNG state resumes it)
    assert torch.equal(dropout(x.detach(), 0.25), y.detach())


def test_dropout_module_is_the_identity_in_eval_and_at_p0_and_zero_at_p1():
    x = torch.randn(8, 16)
    module = Dropout(0.1).eval()
    assert module(x) is x
    assert dropout(x, 0.0) is x
    assert torch.equal(dropout(x, 1.0), torch.zeros_like(x))
    assert str(Dropout(0.1)) == "Dropout(p=0.1)" and not list(Dropout(0.1).state_dict())
    with pytest.raises(ValueError, match="between 0 and 1"):
        Dropout(1.5)


def test_dropout_keeps_the_dtype_under_bf16():
    x = torch.randn(32, 8).bfloat16()
    torch.manual_seed(4)
    y = dropout(x, 0.1)
    assert y.dtype == torch.bfloat16
    torch.manual_seed(4)
    assert torch.equal(y, dropout(x.float(), 0.1).bfloat16())


def test_training_step_matches_nn_dropout_in_distribution_not_in_masks():
    # the point of the module: a different (cheaper) draw of the same distribution, so a seed
    # gives other masks than torch's
    torch.manual_seed(5)
    ours = dropout(torch.ones(10_000), 0.1)
    torch.manual_seed(5)
    theirs = F.dropout(torch.ones(10_000), 0.1)
    assert not torch.equal(ours, theirs)
    assert abs((ours == 0).float().mean() - (theirs == 0).float().mean()) < 0.02


def test_attention_probability_dropout_uses_the_same_masks():
    # the short-sequence CPU attention path drops attention weights with aiayn's dropout: the
    # same seed gives exactly the weights that dropout() gives the undropped ones
    from aiayn.nn.attention import _matmul_attention

    torch.manual_seed(6)
    q, k, v = (torch.randn(2, 3, 5, 4) for _ in range(3))
    v_eye = torch.eye(5).expand(2, 3, 5, 5)  # with identity values the output is the weights
    weights = _matmul_attention(q, k, v_eye, None)
    torch.manual_seed(7)
    dropped = _matmul_attention(q, k, v_eye, None, dropout_p=0.3)
    torch.manual_seed(7)
    torch.testing.assert_close(dropped, dropout(weights, 0.3))
    assert (dropped == 0).any()


def test_word_dropout_zeroes_whole_token_embeddings_in_training_only():
    from aiayn.nn.positions import InputEmbedding, TokenEmbedding

    torch.manual_seed(3)
    p = 0.3
    emb = InputEmbedding(TokenEmbedding(50, 16, 0, False), None, 0.0, word_dropout=p)
    ids = torch.randint(1, 50, (64, 100))
    plain = emb.tokens(ids)
    y = emb(ids)  # training: each token's vector kept whole (scaled) or zeroed whole
    zeroed = (y == 0).all(-1)
    assert torch.allclose(y[~zeroed], plain[~zeroed] / (1 - p))
    n = zeroed.numel()
    assert abs(zeroed.float().mean().item() - p) < 5 * (p * (1 - p) / n) ** 0.5
    assert not torch.equal(zeroed[0], zeroed[1])  # drawn per token, not per batch
    emb.eval()
    assert torch.equal(emb(ids), plain)


def test_word_dropout_reaches_both_stacks_and_is_refused_out_of_range():
    from aiayn.config.models import TransformerConfig
    from aiayn.errors import ConfigError
    from aiayn.models.transformer import Transformer

    cfg = dict(d_model=16, n_heads=2, d_ff=32, n_layers=1, vocab_size=30, dropout=0.0)
    model = Transformer(TransformerConfig(**cfg, word_dropout=0.25))
    assert (model.src_embed.word_dropout, model.tgt_embed.word_dropout) == (0.25, 0.25)
    with pytest.raises(ConfigError, match="word_dropout"):
        TransformerConfig(**cfg, word_dropout=1.0)
