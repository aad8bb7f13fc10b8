#!/usr/bin/env bash
# Install the system packages the test suite needs: headless Chromium + its WebDriver for the
# explorer's browser tests (tests/viz/test_server_browser.py). Idempotent: does nothing when present.
set -euo pipefail

if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then
    echo "setup-test-deps: chromium and chromedriver already installed"
    exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null
echo "setup-test-deps: installed $(chromium --version 2>/dev/null || echo chromium)"
