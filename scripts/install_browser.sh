#!/usr/bin/env bash
# Install what tests/test_dashboard_browser.py needs: Debian's chromium and the
# playwright Python driver. Idempotent and a fast no-op when both are present.
#
# We drive the distribution's /usr/bin/chromium instead of `playwright install`
# because the distro package brings its own shared-library dependencies and
# security updates through apt, and CI runners cannot fetch playwright's CDN.
set -euo pipefail

# Pinned so a playwright release that needs a newer CDP than Debian's chromium
# cannot break CI overnight; bump together with the chromium in bookworm.
PLAYWRIGHT_VERSION="${PLAYWRIGHT_VERSION:-1.65.2}"
PYTHON="${PYTHON:-python3}"

if [[ -x /usr/bin/chromium ]]; then
    echo "chromium: present ($(/usr/bin/chromium --version 2>/dev/null || echo unknown version))"
else
    SUDO=""
    if [[ "$(id -u)" != 0 ]]; then SUDO="sudo"; fi
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update
    $SUDO apt-get install -y --no-install-recommends chromium
fi

have="$("$PYTHON" -c 'import importlib.metadata as m; print(m.version("playwright"))' 2>/dev/null || true)"
if [[ "$have" == "$PLAYWRIGHT_VERSION" ]]; then
    echo "playwright: $have present"
else
    "$PYTHON" -m pip install --quiet "playwright==$PLAYWRIGHT_VERSION"
fi
