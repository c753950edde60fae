#!/usr/bin/env bash
# THE test command (README; .ci/run runs exactly this). On a fresh machine it
# installs everything first (scripts/bootstrap.sh, the browser), then:
# ruff, workflow lint, asv check, and pytest (kernels in Triton's CPU
# interpreter when there is no GPU; GPU-marked tests run where CUDA exists).
# Each step prints its name and, when it ends, how long it took.
#
# Environment:
#   LTX2K_NO_SYSTEM_PACKAGES=1   never apt-get install chromium (the browser test
#                                then skips, or fails where CI=true)
#   LTX2K_NO_BROWSER=1           skip the browser set-up altogether
#   LTX2K_TEST_WORKERS=N         pytest worker processes (default 2; 0: one process)
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
current="" t0=$SECONDS
done_step() {
  [[ -n "$current" ]] && echo "=== test.sh: $current: done in $((SECONDS - t0)) s" >&2
  return 0
}
step() {
  done_step
  current=$1 t0=$SECONDS
  echo >&2
  echo "=== test.sh: $1" >&2
}
on_exit() {
  local rc=$?
  if ((rc)) && [[ -n "$current" ]]; then
    echo "=== test.sh: $current: failed (exit $rc) after $((SECONDS - t0)) s" >&2
  fi
}
trap on_exit EXIT

step "set-up: ltx2k and its dev tools (scripts/bootstrap.sh)"
PY=$(bash scripts/bootstrap.sh | tail -n 1)
PATH="$(dirname "$PY"):$PATH" # ltx2k and asv of that python first
export PATH
if [[ -n "${LTX2K_NO_BROWSER:-}" ]]; then
  echo "test.sh: LTX2K_NO_BROWSER set: no chromium/playwright set-up" >&2
else
  step "set-up: the browser test's chromium and playwright (scripts/install_browser.sh)"
  PYTHON="$PY" bash scripts/install_browser.sh
fi
step "ruff"
"$PY" -m ruff check .
"$PY" -m ruff format --check .
step "workflow lint (actionlint, zizmor, shellcheck)"
PYTHON="$PY" bash scripts/lint_workflows.sh
step "asv check"
"$PY" -m asv check --python=same
step "pytest (the longest step; --durations=10 lists the slowest tests at the end)"
# --benchmark-disable: the pytest-benchmark cases run once, as tests.
# Two worker processes (pytest-xdist; LTX2K_TEST_WORKERS to change, 0 for none), each
# running whole files (--dist loadfile), so a module's fixtures stay in one process.
workers=${LTX2K_TEST_WORKERS:-2}
xdist=()
((workers > 0)) && xdist=(-n "$workers" --dist loadfile)
"$PY" -m pytest -q -p no:cacheprovider --benchmark-disable --durations=10 "${xdist[@]}" "$@"
done_step
current=""
echo "=== test.sh: all passed in $((SECONDS - start)) s" >&2
