#!/usr/bin/env bash
# THE main job (README): set up, then gate -> asv run -> store -> regress ->
# publish, on the GPU if there is one, else in Triton's CPU interpreter.
# Extra arguments go to `ltx2k all` (e.g. --commits main~3..main, --store URL).
set -euo pipefail
cd "$(dirname "$0")/.."
# Where the runner writes no bytecode, keep it in ltx2k's cache folder instead, so
# that each of the job's interpreters does not compile torch again (ltx2k/runner/bytecode.py).
eval "$("${LTX2K_PYTHON:-python3}" ltx2k/runner/bytecode.py)"
PY=$(bash scripts/bootstrap.sh ${LTX2K_WHEELHOUSE:+--wheelhouse "$LTX2K_WHEELHOUSE"} | tail -n 1)
PATH="$(dirname "$PY"):$PATH"
export PATH
# The full regression report goes to html/regress.md; the terminal gets a summary.
exec ltx2k all "$@"
