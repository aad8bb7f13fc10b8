import math

import torch

from aiayn.nn import LearnedPositions, SinusoidalPositions, sinusoidal_positions


def test_matches_the_closed_form_interleaved():
    pe = sinusoidal_positions(50, 16)
    for pos in (0, 1, 7, 49):
        for i in range(8):
            angle = pos / 10000 ** (2 * i / 16)
            assert math.isclose(pe[pos, 2 * i].item(), math.sin(angle), abs_tol=1e-6)
            assert math.isclose(pe[pos, 2 * i + 1].item(), math.cos(angle), abs_tol=1e-6)


def test_odd_d_model_is_supported():
    pe = sinusoidal_positions(10, 7)
    assert pe.shape == (10, 7)
    assert math.isclose(pe[3, 6].item(), math.sin(3 / 10000 ** (6 / 7)), abs_tol=1e-6)


def test_fixed_offset_is_one_linear_map():
    # §3.5 / seed 001 section 13.5: for each offset k there is one matrix M_k with
    # PE(pos + k) = M_k PE(pos) for every pos. Fit M_k by least squares on some positions and check
    # it predicts others exactly; it is block-diagonal rotations, built here from the closed form.
    d, k = 16, 5
    pe = sinusoidal_positions(200, d).double()
    m = torch.zeros(d, d, dtype=torch.float64)
    for i in range(d // 2):
        w = 1 / 10000 ** (2 * i / d)
        c, s = math.cos(w * k), math.sin(w * k)
        m[2 * i:2 * i + 2, 2 * i:2 * i + 2] = torch.tensor([[c, s], [-s, c]], dtype=torch.float64)
    predicted = pe[: 200 - k] @ m.T
    assert (predicted - pe[k:]).abs().max() < 1e-5
    fitted = torch.linalg.lstsq(pe[:100], pe[k:100 + k]).solution.T
    # Fitted from data (fp32 table, ill-conditioned low frequencies): still one map, to ~1e-3.
    assert (pe[100:200 - k] @ fitted.T - pe[100 + k:]).abs().max() < 2e-3


def test_module_extends_past_max_len_and_offsets():
    mod = SinusoidalPositions(8, 12)
    assert torch.equal(mod(4, offset=10), sinusoidal_positions(14, 12)[10:14])


def test_learned_positions_are_parameters():
    mod = LearnedPositions(10, 6)
    assert mod(3, offset=2).shape == (3, 6)
    assert sum(p.numel() for p in mod.parameters()) == 60
