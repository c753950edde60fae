#!/usr/bin/env bash
# THE test command (README; .ci/run runs exactly this). On a fresh machine it
# installs everything first (scripts/bootstrap.sh, the browser), then:
# ruff, workflow lint, asv check, and pytest (kernels in Triton's CPU
# interpreter when there is no GPU; GPU-marked tests run where CUDA exists).
set -euo pipefail
cd "$(dirname "$0")/.."
step() { echo; echo "=== test.sh: $*" >&2; }
step "set-up"
PY=$(bash scripts/bootstrap.sh | tail -n 1)
export PATH="$(dirname "$PY"):$PATH"   # ltx2k and asv of that python first
PYTHON="$PY" bash scripts/install_browser.sh
step "ruff"
"$PY" -m ruff check .
"$PY" -m ruff format --check .
step "workflow lint (actionlint, zizmor, shellcheck)"
PYTHON="$PY" bash scripts/lint_workflows.sh
step "asv check"
"$PY" -m asv check --python=same
step "pytest"
# --benchmark-disable: the pytest-benchmark cases run once, as tests.
"$PY" -m pytest -q -p no:cacheprovider --benchmark-disable "$@"
