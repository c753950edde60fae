#!/usr/bin/env bash
# Install what tests/test_dashboard_browser.py needs: Debian's chromium and the
# playwright Python driver (ltx2k's `browser` extra). Idempotent and a fast no-op
# when both are present. Says what it installs and how long it took.
#
# We drive the distribution's /usr/bin/chromium instead of `playwright install`
# because the distro package brings its own shared-library dependencies and
# security updates through apt, and CI runners cannot fetch playwright's CDN.
#
# Environment:
#   LTX2K_NO_SYSTEM_PACKAGES=1   never run apt-get; without chromium the browser
#                                test then skips (or fails where CI=true)
#   PYTHON                       the python to install playwright into (python3)
set -euo pipefail

# Pinned so a playwright release that needs a newer CDP than Debian's chromium
# cannot break CI overnight; bump together with the chromium in bookworm, and
# with the `browser` extra in pyproject.toml (a test keeps the two equal).
PLAYWRIGHT_VERSION="${PLAYWRIGHT_VERSION:-1.65.2}"
PYTHON="${PYTHON:-python3}"
say() { echo "install_browser: $*" >&2; }

if [[ -x /usr/bin/chromium ]]; then
    say "chromium: present ($(/usr/bin/chromium --version 2>/dev/null || echo unknown version))"
elif [[ -n "${LTX2K_NO_SYSTEM_PACKAGES:-}" ]]; then
    say "chromium: missing, and LTX2K_NO_SYSTEM_PACKAGES is set: not installing it" \
        "(the browser test will skip, or fail where CI=true)"
else
    SUDO=""
    if [[ "$(id -u)" != 0 ]]; then SUDO="sudo"; fi
    say "chromium: installing the system package with ${SUDO:+sudo }apt-get" \
        "(a few minutes; set LTX2K_NO_SYSTEM_PACKAGES=1 to skip it)"
    t=$SECONDS
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -q >&2
    $SUDO apt-get install -y -q --no-install-recommends chromium >&2
    say "chromium: installed in $((SECONDS - t)) s"
fi

have="$("$PYTHON" -c 'import importlib.metadata as m; print(m.version("playwright"))' 2>/dev/null || true)"
if [[ "$have" == "$PLAYWRIGHT_VERSION" ]]; then
    say "playwright: $have present"
else
    say "playwright: installing playwright==$PLAYWRIGHT_VERSION into $PYTHON (pip)"
    t=$SECONDS
    "$PYTHON" -m pip install --quiet --disable-pip-version-check "playwright==$PLAYWRIGHT_VERSION"
    say "playwright: installed in $((SECONDS - t)) s"
fi
