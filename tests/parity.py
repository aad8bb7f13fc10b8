"""How close "the same function" has to be, on any CPU.

A parity claim is proven in float64, where two correct implementations agree to ~1e-12 whatever
the kernels. In fp32 and bf16 the last bits depend on the summation order, which differs between
kernels and machines (an AMD EPYC without AVX512-BF16, an Intel Xeon with AMX), so a constant
bound that held once on one CPU is no proof. Low precision is bounded instead by the reference's
own error against the float64 truth, measured in the same run: ours may be at most `factor` times
as far from the truth as the reference is (plus a few units in the last place of the largest
value, for the case where the reference happens to land on the truth)."""

from collections.abc import Callable

import torch

Run = Callable[[torch.dtype], torch.Tensor]


def max_error(got: torch.Tensor, truth: torch.Tensor) -> float:
    return float((got.double() - truth.double()).abs().max())


def assert_same_function(ours: Run, reference: Run, dtypes=(torch.float32,), exact: float = 1e-10,
                         factor: float = 2.0, ulps: float = 4.0) -> dict:
    """`ours(dtype)` and `reference(dtype)` compute the same tensor in that dtype. Asserts they
    agree in float64 within `exact` (relative to the largest value, at least 1), and that in each
    of `dtypes` ours is within `factor` x the reference's own error against float64. Returns the
    errors measured, {dtype: (ours, reference)}, for a message or a further check."""
    truth = reference(torch.float64).double()
    scale = max(1.0, float(truth.abs().max()))
    got = max_error(ours(torch.float64), truth)
    assert got <= exact * scale, f"float64: {got:.3g} from the reference (bound {exact * scale:.3g})"
    errors = {}
    for dtype in dtypes:
        theirs, mine = max_error(reference(dtype), truth), max_error(ours(dtype), truth)
        bound = factor * theirs + ulps * torch.finfo(dtype).eps * scale
        assert mine <= bound, (f"{dtype}: {mine:.3g} from float64, the reference's own error "
                               f"{theirs:.3g} (bound {bound:.3g})")
        errors[dtype] = (mine, theirs)
    return errors
