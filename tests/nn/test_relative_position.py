"""T5's relative position bias (nn/relative_position.py) and RMSNorm (nn/norm.py), cross-checked
against transformers' T5 code and torch's own RMSNorm."""

import pytest
import torch

from aiayn.nn.norm import RMSNorm
from aiayn.nn.relative_position import RelativePositionBias, relative_position_bucket


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("buckets, distance", [(32, 128), (8, 20), (6, 7)])
def test_buckets_are_transformers_t5_buckets_at_every_offset(bidirectional, buckets, distance):
    t5 = pytest.importorskip("transformers.models.t5.modeling_t5")
    offsets = torch.arange(-300, 301)[None, :]
    ours = relative_position_bucket(offsets, bidirectional, buckets, distance)
    theirs = t5.T5Attention._relative_position_bucket(offsets, bidirectional, buckets, distance)
    assert torch.equal(ours, theirs)
    assert ours.min() >= 0 and ours.max() < buckets


def test_buckets_are_exact_near_and_shared_far():
    """Encoder (bidirectional, 32 buckets): offsets 0..7 each their own bucket, keys after the
    query in the upper half; past max_distance one bucket per direction. Decoder (causal): keys
    after the query share bucket 0 with offset 0 (the mask hides them anyway)."""
    offsets = torch.tensor([0, 1, 7, -1, -7, 128, 500, -128, -500])
    enc = relative_position_bucket(offsets, True, 32, 128).tolist()
    assert enc[:5] == [0, 17, 23, 1, 7] and enc[5] == enc[6] == 31 and enc[7] == enc[8] == 15
    dec = relative_position_bucket(offsets, False, 32, 128).tolist()
    assert dec[:3] == [0, 0, 0] and dec[3:5] == [1, 7] and dec[7] == dec[8] == 31


def test_bias_of_new_positions_after_a_cache_equals_the_rows_of_the_whole_sequence():
    torch.manual_seed(0)
    bias = RelativePositionBias(n_heads=3, num_buckets=8, max_distance=20, bidirectional=False)
    whole = bias(9, 9)  # (1, H, 9, 9)
    assert whole.shape == (1, 3, 9, 9)
    for offset in range(9):
        assert torch.equal(bias(1, offset + 1, offset), whole[:, :, offset:offset + 1, :offset + 1])
    assert torch.equal(bias(3, 9, 6), whole[:, :, 6:])


def test_bias_equals_transformers_compute_bias():
    t5 = pytest.importorskip("transformers.models.t5.modeling_t5")
    config = pytest.importorskip("transformers").T5Config(
        d_model=16, d_kv=4, num_heads=4, relative_attention_num_buckets=8,
        relative_attention_max_distance=20)
    for decoder in (False, True):
        config.is_decoder = decoder
        theirs = t5.T5Attention(config, has_relative_attention_bias=True, layer_idx=0)
        ours = RelativePositionBias(4, 8, 20, bidirectional=not decoder)
        with torch.no_grad():
            ours.weight.copy_(theirs.relative_attention_bias.weight)
            assert torch.equal(ours(5, 12, 7), theirs.compute_bias(5, 12, past_seen_tokens=7))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rms_norm_equals_t5_layer_norm_and_torch_rms_norm(dtype):
    t5 = pytest.importorskip("transformers.models.t5.modeling_t5")
    torch.manual_seed(0)
    x = (torch.randn(2, 5, 16) * 3).to(dtype)
    ours, theirs = RMSNorm(16, eps=1e-6).to(dtype), t5.T5LayerNorm(16, eps=1e-6).to(dtype)
    with torch.no_grad():
        ours.weight.copy_(torch.rand(16) + 0.5)
        theirs.weight.copy_(ours.weight)
        assert torch.equal(ours(x), theirs(x))
        reference = torch.nn.RMSNorm(16, eps=1e-6)
        reference.weight.copy_(ours.weight.float())
        torch.testing.assert_close(ours(x).float(), reference(x.float()),
                                   atol=1e-6 if dtype == torch.float32 else 3e-2, rtol=1e-5)
    assert ours(x).dtype == dtype and not hasattr(ours, "bias")
