"""Reduced-precision copies for decoding (aiayn.nn.precision): bf16 weights, int8 Linear layers.

Their numbers differ from fp32 by design; the tolerances below are stated against the fp32 model
with the same weights (measured on 5 seeds: mean |d log p| 0.006 bf16 / 0.021 int8, the largest
0.038 / 0.13; a margin of 2-3x on top). The BLEU of a trained model's decoding in each precision
is checked in tests/tasks/test_translation.py (slow)."""

import pytest
import torch
from torch import nn

from aiayn import Transformer, preset
from aiayn.errors import ConfigError
from aiayn.generation.config import GenerationConfig
from aiayn.generation.search import beam_search, greedy_search, search_hypotheses
from aiayn.nn.precision import bf16_copy, int8_copy, reduced_precision

IDS = dict(bos_id=1, eos_id=2, pad_id=0)
# (mean, largest) |log p - log p_fp32| allowed over every position and token
TOLERANCE = {"bf16": (0.015, 0.1), "int8": (0.05, 0.3)}


def _model(seed: int, vocab: int = 100) -> Transformer:
    torch.manual_seed(seed)
    return Transformer(preset("tiny", vocab_size=vocab, d_model=64, n_heads=4, d_ff=128)).eval()


@pytest.mark.parametrize("precision", ["bf16", "int8"])
@pytest.mark.parametrize("seed", [0, 1])
def test_log_probabilities_are_close_to_fp32(precision, seed):
    model = _model(seed)
    src, tgt = torch.randint(4, 100, (8, 12)), torch.randint(4, 100, (8, 10))
    src[:3, 9:] = 0  # padded rows too
    with torch.no_grad():
        want = torch.log_softmax(model(src, tgt), -1)
        got = torch.log_softmax(reduced_precision(model, precision)(src, tgt).float(), -1)
    diff = (got - want).abs()
    mean, largest = TOLERANCE[precision]
    assert diff.mean() < mean and diff.max() < largest, (diff.mean(), diff.max())
    assert (got.argmax(-1) == want.argmax(-1)).float().mean() >= 0.95


def test_copies_leave_the_model_as_it_was():
    model = _model(0)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    bf16, int8 = bf16_copy(model), int8_copy(model)
    assert reduced_precision(model, "fp32") is model
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())
    assert all(p.dtype == torch.float32 for p in model.parameters())
    assert all(p.dtype == torch.bfloat16 for p in bf16.parameters())
    # int8: no fp32 Linear layer is left, the joined Q/K/V projections of self-attention included
    assert not any(type(m) is nn.Linear for m in int8.modules())
    layer = int8.decoder.layers[0]
    assert layer.self_attn.qkv_proj.out_features == 3 * 64
    assert int8.output.weight().dtype == torch.qint8


@pytest.mark.parametrize("precision", ["bf16", "int8"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_beam_1_is_greedy_and_beam_4_keeps_its_invariants(precision, seed):
    model = reduced_precision(_model(seed, vocab=40), precision)
    g = torch.Generator().manual_seed(100 + seed)
    src = torch.randint(4, 40, (6, 7), generator=g)
    src[torch.arange(7)[None] >= torch.randint(1, 8, (6,), generator=g)[:, None]] = 0
    greedy = greedy_search(model, src, max_extra=5, **IDS)
    assert beam_search(model, src, beam=1, max_extra=5, **IDS) == greedy
    hyps = search_hypotheses(model, src, GenerationConfig(beam=4, max_extra=5, **IDS))
    for row, found in zip(src, hyps, strict=True):
        assert 1 <= len(found) <= 4
        assert [h.score for h in found] == sorted((h.score for h in found), reverse=True)
        limit = int((row != 0).sum()) + 5
        assert all(len(h.tokens) <= limit and not {0, 1} & set(h.tokens) for h in found)


def test_bad_requests_are_one_line_errors():
    model = _model(0)
    with pytest.raises(ConfigError, match="precision='fp16': must be one of fp32, bf16, int8"):
        reduced_precision(model, "fp16")
    with pytest.raises(ConfigError, match="int8 quantizes an fp32 model on the CPU"):
        int8_copy(model.double())
