"""Test-wide settings."""

import os

import pytest
import torch

# Tests use tiny models, for which one intra-op thread is fastest; more threads only add OpenMP
# synchronisation (and stall badly when other processes share the cores). Benchmarks and the demo
# are unaffected: they run outside pytest. AIAYN_TEST_THREADS overrides.
THREADS = int(os.environ.get("AIAYN_TEST_THREADS", "1"))
torch.set_num_threads(THREADS)


@pytest.fixture(autouse=True)
def test_threads():
    """Every test starts with the test-wide thread count, whatever a test before it set (a
    training run sets train.threads); the setting is restored afterwards."""
    before = torch.get_num_threads()
    torch.set_num_threads(THREADS)
    yield
    torch.set_num_threads(before)
