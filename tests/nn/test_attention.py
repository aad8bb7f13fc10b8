import pytest
import torch

from aiayn.masks import causal_mask, combine, padding_mask
from aiayn.nn import AttentionCache, MultiHeadAttention, scaled_dot_product_attention
from tests.parity import assert_same_function


def test_worked_example_from_the_seed():
    # Seed 004: Q = [1, 0], K = I, V = [[10], [20]] -> weights [0.731, 0.269], output 12.69.
    # d_k = 2 there is ignored by the seed's arithmetic; undo our 1/sqrt(d_k) by scaling Q.
    q = torch.tensor([[1.0, 0.0]]) * 2**0.5
    k = torch.eye(2)
    v = torch.tensor([[10.0], [20.0]])
    out, w = scaled_dot_product_attention(q, k, v)
    assert w[0].tolist() == pytest.approx([0.731, 0.269], abs=5e-4)
    assert round(out.item(), 2) == 12.69


def test_unscaled_example_uses_sqrt_dk():
    q, k = torch.tensor([[1.0, 0.0]]), torch.eye(2)
    _, w = scaled_dot_product_attention(q, k, torch.zeros(2, 1))
    expected = torch.softmax(torch.tensor([1.0, 0.0]) / 2**0.5, dim=0)
    assert torch.allclose(w[0], expected)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_rows_sum_to_one_masked_keys_zero_and_empty_rows_zero(dtype):
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 3, 5, 8).to(dtype) for _ in range(3))
    mask = torch.rand(2, 1, 5, 5) > 0.4
    mask[0, 0, 2] = False  # a query with no allowed key
    out, w = scaled_dot_product_attention(q, k, v, mask)
    assert not torch.isnan(out).any() and not torch.isnan(w).any()
    assert (w.masked_select(~mask.expand_as(w)) == 0).all()
    sums = w.float().sum(-1)
    has_key = mask.any(-1).expand_as(sums)
    assert torch.allclose(sums[has_key], torch.ones_like(sums[has_key]), atol=1e-2)
    assert (out[0, :, 2] == 0).all() and (w[0, :, 2] == 0).all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_module_fast_path_gives_zeros_for_empty_rows(dtype):
    mha = MultiHeadAttention(16, 2).to(dtype).eval()
    x = torch.randn(2, 4, 16).to(dtype)
    mask = torch.ones(2, 1, 4, 4, dtype=torch.bool)
    mask[1, 0, 3] = False
    out = mha(x, x, x, mask)
    assert not torch.isnan(out).any()
    # A row with no key attends to nothing: the output is out_proj(0) = its bias.
    assert torch.allclose(out[1, 3].float(), mha.out_proj.bias.float(), atol=1e-2)


@pytest.mark.parametrize("cross", [False, True])
@pytest.mark.parametrize("masked", [False, True])
def test_reference_path_equals_sdpa_path(cross, masked):
    torch.manual_seed(1)
    mha = MultiHeadAttention(32, 4).eval()
    x = torch.randn(3, 6, 32)
    mem = torch.randn(3, 9, 32) if cross else x
    mask = None
    if masked:
        keys = torch.randint(1, 9, (3, mem.shape[1]))
        keys[0, -3:] = 0
        mask = padding_mask(keys, 0)
        if not cross:
            mask = combine(mask, causal_mask(6))
    fast = mha(x, mem, mem, mask)
    ref, w = mha(x, mem, mem, mask, return_attn=True)
    assert w.shape == (3, 4, 6, mem.shape[1])
    assert (fast - ref).abs().max() <= 1e-5
    assert not any(isinstance(t, torch.Tensor) and t.shape == w.shape for t in vars(mha).values())


def test_is_causal_hint_equals_explicit_causal_mask():
    mha = MultiHeadAttention(16, 4).eval()
    x = torch.randn(2, 5, 16)
    a = mha(x, x, x, is_causal=True)
    b = mha(x, x, x, causal_mask(5))
    c, w = mha(x, x, x, is_causal=True, return_attn=True)
    assert (a - b).abs().max() <= 1e-6 and (a - c).abs().max() <= 1e-5
    assert (w[..., 0, 1:] == 0).all()


def _copy_into_torch_mha(ours: MultiHeadAttention) -> torch.nn.MultiheadAttention:
    ref = torch.nn.MultiheadAttention(ours.d_model, ours.n_heads, batch_first=True).eval()
    with torch.no_grad():
        ref.in_proj_weight.copy_(torch.cat([ours.q_proj.weight, ours.k_proj.weight, ours.v_proj.weight]))
        ref.in_proj_bias.copy_(torch.cat([ours.q_proj.bias, ours.k_proj.bias, ours.v_proj.bias]))
        ref.out_proj.weight.copy_(ours.out_proj.weight)
        ref.out_proj.bias.copy_(ours.out_proj.bias)
    return ref


def test_matches_torch_multihead_attention_with_key_padding():
    """The same function as torch's in float64 (outputs and weights, both paths); in fp32
    within 2x torch's own error against float64 (tests/parity.py)."""
    torch.manual_seed(2)
    ours = MultiHeadAttention(32, 4).eval()
    ref = _copy_into_torch_mha(ours)
    q, kv = torch.randn(3, 5, 32), torch.randn(3, 7, 32)
    keys = torch.randint(1, 9, (3, 7))
    keys[1, 4:] = 0
    mask = padding_mask(keys, 0)

    @torch.no_grad()
    def theirs(dtype):  # torch's convention is the opposite (True = ignore): converted here
        out, w = ref.to(dtype)(q.to(dtype), kv.to(dtype), kv.to(dtype),
                               key_padding_mask=~mask[:, 0, 0], average_attn_weights=False)
        return torch.cat([out.flatten(), out.flatten(), w.flatten()])

    @torch.no_grad()
    def mine(dtype):
        m, x, y = ours.to(dtype), q.to(dtype), kv.to(dtype)
        out, w = m(x, y, y, mask, return_attn=True)
        return torch.cat([m(x, y, y, mask).flatten(), out.flatten(), w.flatten()])

    assert_same_function(mine, theirs)


def test_matches_torch_multihead_attention_with_causal_mask():
    torch.manual_seed(3)
    ours = MultiHeadAttention(24, 3).eval()
    ref = _copy_into_torch_mha(ours)
    x = torch.randn(2, 6, 24)

    @torch.no_grad()
    def theirs(dtype):
        out = ref.to(dtype)(*[x.to(dtype)] * 3, attn_mask=~causal_mask(6)[0, 0])[0]
        return torch.cat([out, out])

    @torch.no_grad()
    def mine(dtype):
        m, y = ours.to(dtype), x.to(dtype)
        return torch.cat([m(y, y, y, causal_mask(6)), m(y, y, y, is_causal=True)])

    assert_same_function(mine, theirs)


def test_self_attention_cache_grows_and_equals_recompute():
    torch.manual_seed(4)
    mha = MultiHeadAttention(16, 2).eval()
    x = torch.randn(2, 6, 16)
    full = mha(x, x, x, is_causal=True)
    cache = AttentionCache()
    steps = [mha(x[:, t:t + 1], x[:, t:t + 1], x[:, t:t + 1], cache=cache, is_causal=True) for t in range(6)]
    assert cache.length == 6
    assert (torch.cat(steps, 1) - full).abs().max() <= 1e-5


def test_static_cache_computes_keys_once():
    mha = MultiHeadAttention(16, 2).eval()
    mem = torch.randn(2, 5, 16)
    cache = AttentionCache(static=True)
    a = mha(torch.randn(2, 1, 16), mem, mem, cache=cache)
    k_first = cache.k
    b = mha(torch.randn(2, 1, 16), torch.zeros_like(mem), torch.zeros_like(mem), cache=cache)
    assert cache.k is k_first and cache.length == 5
    assert a.shape == b.shape == (2, 1, 16)


def test_dropout_only_in_training():
    mha = MultiHeadAttention(16, 2, dropout=0.5)
    x = torch.randn(1, 4, 16)
    mha.eval()
    assert torch.equal(mha(x, x, x), mha(x, x, x))
    mha.train()
    torch.manual_seed(0)
    a = mha(x, x, x)
    torch.manual_seed(1)
    assert not torch.equal(a, mha(x, x, x))


def test_reference_path_dropout_zeroes_and_rescales_weights():
    torch.manual_seed(0)
    q = torch.randn(1, 1, 16, 8)
    _, clean = scaled_dot_product_attention(q, q, q)
    torch.manual_seed(1)
    _, dropped = scaled_dot_product_attention(q, q, q, dropout_p=0.5)
    kept = dropped != 0
    assert 0 < kept.float().mean() < 1  # some probabilities dropped, some kept
    assert torch.allclose(dropped[kept], clean[kept] * 2)  # survivors scaled by 1 / (1 - p)


@pytest.mark.parametrize("t_q", [1, 3])
def test_decoding_matmul_path_equals_the_reference_with_empty_rows_zero(t_q):
    """The CPU decoding path (few queries, no autograd: two bmm) gives the reference's numbers,
    and zeros for a query with no allowed key."""
    from aiayn.nn.attention import SMALL_QUERY, _fast_attention

    assert t_q <= SMALL_QUERY
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(3, 2, t, 8, generator=g) for t in (t_q, 6, 6))
    mask = torch.rand(3, 1, t_q, 6, generator=g) > 0.4
    mask[1, :, 0] = False  # a query with no key
    with torch.no_grad():
        fast = _fast_attention(q, k, v, mask, 0.0, False)
    ref, _ = scaled_dot_product_attention(q, k, v, mask)
    torch.testing.assert_close(fast, ref, atol=1e-6, rtol=1e-5)
    assert fast[1, :, 0].abs().max() == 0


def test_queries_grouped_over_one_key_row_equal_repeated_keys():
    """Beam search: the g beams of a sentence (query rows g*i .. g*i+g-1) read its one encoding
    (key row i); the same numbers, bit for bit, as repeating that encoding g times."""
    torch.manual_seed(0)
    attn = MultiHeadAttention(32, 4).eval()
    query, memory = torch.randn(6, 2, 32), torch.randn(2, 5, 32)
    mask = torch.ones(2, 1, 1, 5, dtype=torch.bool)
    mask[1, ..., 3:] = False
    rep = memory.repeat_interleave(3, 0)
    with torch.no_grad():
        for return_attn in (False, True):
            grouped = attn(query, memory, memory, mask, return_attn=return_attn)
            repeated = attn(query, rep, rep, mask.repeat_interleave(3, 0), return_attn=return_attn)
            for a, b in zip(*(x if return_attn else (x,) for x in (grouped, repeated)),
                            strict=True):
                assert torch.equal(a, b)
        cache = AttentionCache(static=True)  # the cross-attention cache holds one row per key row
        attn(query, memory, memory, mask, cache=cache)
        assert cache.k.shape[0] == 2
        assert torch.equal(attn(query, memory, memory, mask, cache=cache),
                           attn(query, rep, rep, mask.repeat_interleave(3, 0)))


@pytest.mark.parametrize("t", [6, 130])  # the CPU's matmul path (short) and its fused kernel
@pytest.mark.parametrize("kind", ["padding", "causal", "causal_hint"])
def test_training_paths_equal_the_reference_in_output_and_gradients(t, kind):
    """With autograd on (training), both CPU paths of the fast attention give the reference's
    output and the same gradients for every input; a query with no allowed key gets zeros and
    finite gradients."""
    from aiayn.nn.attention import SMALL_SCORES, _fast_attention

    assert (t * t <= SMALL_SCORES) == (t == 6)
    g = torch.Generator().manual_seed(0)
    base = [torch.randn(2, 3, t, 8, generator=g) for _ in range(3)]
    keys = torch.ones(2, t, dtype=torch.long)
    keys[1, t // 2:] = 0
    mask = padding_mask(keys, 0)
    if kind == "padding":
        mask = mask.expand(2, 1, t, t).clone()
        mask[0, 0, 1] = False  # a query with no key
    else:
        mask = causal_mask(t)
    results = []
    for fast in (True, False):
        q, k, v = (x.clone().requires_grad_() for x in base)
        if fast:
            hint = kind == "causal_hint"
            out = _fast_attention(q, k, v, None if hint else mask, 0.0, hint)
        else:
            out, _ = scaled_dot_product_attention(q, k, v, mask)
        out.backward(torch.ones_like(out))
        results.append([out, q.grad, k.grad, v.grad])
    for a, b in zip(*results, strict=True):
        assert torch.isfinite(a).all()
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)
    if kind == "padding":
        assert results[0][0][0, :, 1].abs().max() == 0


@pytest.mark.parametrize("t", [6, 130])
def test_bf16_autocast_attention_follows_fp32(t):
    """Under CPU bf16 autocast the projections run in bf16 and the attention's softmax in fp32
    (fused kernels in fp32 too): the output and gradients follow fp32's to bf16 precision."""
    torch.manual_seed(0)
    mha = MultiHeadAttention(32, 4)
    x = torch.randn(2, t, 32)
    keys = torch.ones(2, t, dtype=torch.long)
    keys[1, t // 3:] = 0
    mask = padding_mask(keys, 0)
    outs, grads = [], []
    for bf16 in (False, True):
        mha.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            out = mha(x, x, x, mask)
        assert out.dtype == (torch.bfloat16 if bf16 else torch.float32)
        out.float().pow(2).sum().backward()
        outs.append(out.float())
        grads.append(mha.q_proj.weight.grad.clone())
    torch.testing.assert_close(outs[1], outs[0], atol=3e-2, rtol=3e-2)
    assert (grads[1] - grads[0]).norm() < 0.05 * grads[0].norm()


def test_decoding_keeps_joined_qkv_weights_only_while_they_are_unchanged():
    """Inside joined_qkv_kept (a decoding loop) self-attention projects with a kept copy of the
    joined q/k/v weights, the same numbers as joining them per call; the copy is gone outside,
    so after any change of the weights (an optimizer step, load_state_dict, a dtype change) the
    next loop joins them as they are."""
    from aiayn.nn.attention import joined_qkv_kept

    torch.manual_seed(0)
    m = MultiHeadAttention(32, 4).eval()
    x = torch.randn(2, 5, 32)

    def check(inp):
        with torch.no_grad(), joined_qkv_kept(m):
            kept = m(inp, inp, inp)
            assert m._qkv_kept is not None  # the premise: the copy exists and is used
            kept_again = m(inp, inp, inp)
        assert m._qkv_kept is None
        with torch.enable_grad():  # the per-call join: the weights as they are now
            now = m(inp, inp, inp).detach()
        torch.testing.assert_close(kept, now, rtol=0, atol=0)
        torch.testing.assert_close(kept_again, now, rtol=0, atol=0)
        return kept

    first = check(x)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    m(x, x, x).square().sum().backward()
    opt.step()
    assert not torch.equal(check(x), first)
    m.load_state_dict({k: v * 0.5 for k, v in m.state_dict().items()})
    check(x)
    m.to(torch.float64)
    check(x.double())


def test_inference_between_fused_optimizer_steps_sees_the_new_weights():
    """torch.optim.Adam(fused=True) (the trainer's optimizer on a GPU; it runs on the CPU too)
    updates the weights in place without moving their version counters. Validation under
    no_grad between its steps used to read a joined q/k/v copy kept from the first validation
    (found on an H200: a classifier validated every 50 steps scored 0.47-0.80 instead of 1.0)."""
    from aiayn.nn.attention import joined_qkv_kept

    torch.manual_seed(0)
    m = MultiHeadAttention(32, 4)
    x = torch.randn(2, 5, 32)
    opt = torch.optim.Adam(m.parameters(), lr=0.1, fused=True)
    version = m.q_proj.weight._version
    for _ in range(3):
        with torch.no_grad():  # validation
            seen = m(x, x, x)
        with torch.no_grad(), joined_qkv_kept(m):  # a decoding loop
            decoded = m(x, x, x)
        now = m(x, x, x)
        torch.testing.assert_close(seen, now.detach(), rtol=0, atol=0)
        torch.testing.assert_close(decoded, now.detach(), rtol=0, atol=0)
        now.square().sum().backward()
        opt.step()
        opt.zero_grad()
    assert m.q_proj.weight._version == version  # the premise: no version counter moved


def test_short_sequence_matmul_path_keeps_float64():
    # the CPU's two-matmul path (short sequences) softmaxes in fp32 only for bf16 / fp16 inputs;
    # a float64 model (the search tests' reference models) keeps float64 throughout
    from aiayn.nn.attention import _matmul_attention

    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4, 5, 8, dtype=torch.float64) for _ in range(3))
    mask = causal_mask(5, 5)
    out = _matmul_attention(q, k, v, mask)
    ref, _ = scaled_dot_product_attention(q, k, v, mask)
    assert out.dtype == torch.float64
    torch.testing.assert_close(out, ref, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("t", [1, 6, 130])  # decoding, the CPU's matmul path, its fused kernel
@pytest.mark.parametrize("kind", ["none", "padding", "causal_hint"])
@pytest.mark.parametrize("scale", [None, 1.0])  # §3.2.1's 1/sqrt(d_k), or T5's none
def test_an_additive_bias_gives_the_references_numbers_on_every_path(t, kind, scale):
    """T5's relative position bias: a float (1, H, T_q, T_k) added to the scores. Every path of
    the fast attention (with autograd on: training) equals the reference, outputs and
    gradients; a query with no allowed key still gets zeros and finite gradients."""
    from aiayn.nn.attention import _fast_attention

    g = torch.Generator().manual_seed(0)
    base = [torch.randn(2, 3, t, 8, generator=g) for _ in range(3)]
    bias = torch.randn(1, 3, t, t, generator=g) * 3
    mask = None
    if kind == "padding":
        keys = torch.ones(2, t, dtype=torch.long)
        keys[1, (t + 1) // 2:] = 0
        mask = padding_mask(keys, 0).expand(2, 1, t, t).clone()
        mask[0, 0, 0] = False  # a query with no key
    results = []
    for fast in (True, False):
        q, k, v = (x.clone().requires_grad_() for x in base)
        b = bias.clone().requires_grad_()
        if fast:
            out = _fast_attention(q, k, v, mask, 0.0, kind == "causal_hint", b, scale)
        else:
            full = causal_mask(t) if kind == "causal_hint" else mask
            out, _ = scaled_dot_product_attention(q, k, v, full, bias=b, scale=scale)
        out.backward(torch.ones_like(out))
        results.append([out, q.grad, k.grad, v.grad, b.grad])
    for a, b in zip(*results, strict=True):
        assert torch.isfinite(a).all()
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)
    if kind == "padding":
        assert results[0][0][0, :, 0].abs().max() == 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_a_bias_with_an_empty_row_gives_zeros_not_nan_in_every_dtype(dtype):
    mha = MultiHeadAttention(16, 2, scale=False).to(dtype).eval()
    x = torch.randn(2, 4, 16).to(dtype)
    mask = torch.ones(2, 1, 4, 4, dtype=torch.bool)
    mask[1, 0, 3] = False
    bias = (torch.randn(1, 2, 4, 4) * 100).to(dtype)  # large: overflow would show here
    for return_attn in (False, True):
        out = mha(x, x, x, mask, return_attn=return_attn, bias=bias)
        out = out[0] if return_attn else out
        assert not torch.isnan(out).any()
        assert torch.allclose(out[1, 3].float(), mha.out_proj.bias.float(), atol=1e-2)


def test_unscaled_attention_leaves_out_sqrt_dk():
    """T5 (scale=False): softmax(Q K^T + bias), no 1/sqrt(d_k)."""
    q, k = torch.tensor([[1.0, 0.0]]), torch.eye(2)
    bias = torch.tensor([[0.5, -0.5]])
    _, w = scaled_dot_product_attention(q, k, torch.zeros(2, 1), bias=bias, scale=1.0)
    assert torch.allclose(w[0], torch.softmax(torch.tensor([1.5, -0.5]), dim=0))


@pytest.mark.parametrize("t", [6, 130])  # the CPU's matmul path (short) and its fused kernel
def test_values_wider_than_keys_give_the_references_numbers(t):
    """Table 3 row (B): d_k narrower than d_v (value_dim). q_proj and k_proj are h x d_k wide,
    v_proj and out_proj h x d_v; self-attention (fused Q, K, V), cross-attention and a cached
    decoding step all give the reference path's numbers, the weights summing to 1 per query."""
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 2, head_dim=3, value_dim=8).eval()
    assert mha.q_proj.weight.shape == mha.k_proj.weight.shape == (6, 16)
    assert mha.v_proj.weight.shape == (16, 16) and mha.out_proj.weight.shape == (16, 16)
    x, memory = torch.randn(2, t, 16), torch.randn(2, 5, 16)
    for key in (x, memory):
        for grad in (True, False):
            with torch.set_grad_enabled(grad):
                fast = mha(x, key, key)
                ref, weights = mha(x, key, key, return_attn=True)
            torch.testing.assert_close(fast, ref, atol=1e-5, rtol=1e-4)
            torch.testing.assert_close(weights.sum(-1), torch.ones(2, 2, t))
    with torch.no_grad():
        cache, full = AttentionCache(), mha(x, x, x, is_causal=True)
        steps = [mha(x[:, i:i + 1], x[:, i:i + 1], x[:, i:i + 1], cache=cache) for i in range(t)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-4)
