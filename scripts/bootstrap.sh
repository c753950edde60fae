#!/usr/bin/env bash
# Set up ltx2k on this machine; idempotent, and the only install step anywhere.
# - A runner whose python already has torch+triton (e.g. /opt/torch/.venv, offline):
#   install ltx2k --no-deps into it, and asv & co from --wheelhouse (no index).
# - Otherwise (fresh CPU machine): a .venv with the CPU torch wheel, then `.[dev]`.
# Each stage says what it installs and how long it took (on stderr).
# Prints the python to use on the last line of stdout.
#
# Environment:
#   LTX2K_PYTHON         the python to check for torch+triton first (default python3)
#   LTX2K_FORCE_VENV=1   make a .venv even where that python has torch+triton
#   LTX2K_VENV=dir       a per-job virtual environment on top of that python: its
#                        packages (torch, triton) stay importable, but everything this
#                        job installs lands in dir, never in that python
#   LTX2K_TORCH_VERSION, LTX2K_TORCH_INDEX, LTX2K_TRITON_VERSION   the CPU .venv's torch
set -euo pipefail
cd "$(dirname "$0")/.."
wheelhouse=""
[ "${1:-}" = "--wheelhouse" ] && wheelhouse=${2:?--wheelhouse needs a directory}
PY=${LTX2K_PYTHON:-python3}
say() { echo "bootstrap: $*" >&2; }
# stage WHAT CMD...: CMD's output goes to stderr; stdout is kept for the python's path.
stage() {
  local what=$1 t=$SECONDS
  shift
  say "$what ..."
  "$@" >&2 || {
    local rc=$?
    say "$what: failed (exit $rc) after $((SECONDS - t)) s"
    return $rc
  }
  say "$what: done in $((SECONDS - t)) s"
}
pipq() { "$PY" -m pip install -q --disable-pip-version-check "$@"; }
start=$SECONDS

if [ -n "${LTX2K_VENV:-}" ]; then
  # Isolation for untrusted code (PR jobs): the runner's python only lends its
  # packages; everything this job installs lands in its own directory.
  if [ ! -x "$LTX2K_VENV/bin/python" ]; then
    stage "per-job venv $LTX2K_VENV on $("$PY" -c 'import sys;print(sys.executable)')" \
      "$PY" -m venv "$LTX2K_VENV"
    # A .pth line per site-packages dir of that python puts its packages on the new
    # venv's path, after the venv's own (--system-site-packages would reach only the
    # base interpreter's, not those of a venv such as /opt/torch/.venv). pip sees them
    # as installed and never writes outside the new venv.
    purelib=$("$LTX2K_VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
    "$PY" -c 'import site; print("\n".join(site.getsitepackages()))' >"$purelib/ltx2k-base-packages.pth"
  fi
  PY=$LTX2K_VENV/bin/python
fi

if "$PY" -c "import torch, triton" 2>/dev/null && [ -z "${LTX2K_FORCE_VENV:-}" ]; then
  say "using $("$PY" -c 'import sys;print(sys.executable)') with its own torch/triton"
  if [ -n "$wheelhouse" ]; then
    # --no-deps: asv's metadata asks for virtualenv, which only its virtualenv
    # plugin imports; our env plugin (ltx2k/asv_env.py) does not need it.
    # The exact wheels, not names: names are "already satisfied" by whatever
    # version the runner happens to have (e.g. an importlib-metadata that asv
    # cannot import without yet another package).
    stage "asv and its dependencies from the wheelhouse $wheelhouse (offline)" \
      pipq --no-deps --no-index "$wheelhouse"/*.whl
    stage "ltx2k (editable, no dependencies)" \
      pipq --no-deps --no-index --no-build-isolation -e .
  else
    # The runner's torch and triton as they are: a range of ours must never make
    # pip replace them. Outside ltx2k's tested Triton range the resolver refuses;
    # then ltx2k goes in without dependencies and warns at run time instead.
    cons=$(mktemp)
    trap 'rm -f "$cons"' EXIT
    "$PY" -c "import torch, triton; print(f'torch=={torch.__version__}'); print(f'triton=={triton.__version__}')" >"$cons"
    if ! stage "ltx2k with the dev tools (asv, pytest, ruff), torch/triton kept as they are" \
      pipq --no-build-isolation -c "$cons" -e ".[dev]"; then
      say "this python's $(tr '\n' ' ' <"$cons")is outside ltx2k's tested range;" \
        "installing ltx2k without dependencies (add the dev tools, or pass --wheelhouse)"
      stage "ltx2k (editable, no dependencies)" pipq --no-build-isolation --no-deps -e .
    fi
  fi
else
  if [ ! -x .venv/bin/python ]; then
    stage "virtual environment .venv" python3 -m venv .venv
  fi
  PY=.venv/bin/python
  # The CPU wheel first: a bare `torch` requirement would pull a multi-GB CUDA build.
  if ! "$PY" -c "import torch" 2>/dev/null; then
    # Not quiet: the torch wheel is a few hundred MB, pip's lines show the download.
    stage "torch ${LTX2K_TORCH_VERSION:-2.13.0} (CPU wheel, a few hundred MB)" \
      "$PY" -m pip install --disable-pip-version-check \
      ${LTX2K_TORCH_INDEX:+--index-url "$LTX2K_TORCH_INDEX"} "torch==${LTX2K_TORCH_VERSION:-2.13.0}"
  fi
  # Triton pinned to the GPU runners' version: the CPU tests run its interpreter.
  stage "ltx2k with the dev tools (asv, pytest, ruff, ...) and triton ${LTX2K_TRITON_VERSION:-3.6.0}" \
    pipq -e ".[dev]" "triton==${LTX2K_TRITON_VERSION:-3.6.0}"
fi
"$PY" -c "import ltx2k, torch, triton, asv; print('bootstrap: ltx2k', ltx2k.__version__, 'torch', torch.__version__, 'triton', triton.__version__)" >&2
exe=$("$PY" -c "import sys; print(sys.executable)")
# scripts/ltx2k and scripts/python run this python from any shell, no activation.
mkdir -p .asv && echo "$exe" >.asv/bootstrap-python
say "ready in $((SECONDS - start)) s; from any shell: scripts/ltx2k ..., scripts/python -m asv ..."
echo "$exe"
