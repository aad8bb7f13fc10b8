"""Test-wide settings."""

import os

import torch

# Tests use tiny models, for which one intra-op thread is fastest; more threads only add OpenMP
# synchronisation (and stall badly when other processes share the cores). Benchmarks and the demo
# are unaffected: they run outside pytest. AIAYN_TEST_THREADS overrides.
torch.set_num_threads(int(os.environ.get("AIAYN_TEST_THREADS", "1")))
