#!/usr/bin/env bash
# Set up ltx2k on this machine; idempotent, and the only install step anywhere.
# - A runner whose python already has torch+triton (e.g. /opt/torch/.venv, offline):
#   install ltx2k --no-deps into it, and asv & co from --wheelhouse (no index).
# - Otherwise (fresh CPU machine): a .venv with torch (a CPU build where one is
#   found), triton and `.[dev]`, resolved by pip in one call.
# Each stage says what it installs and how long it took (on stderr).
# Prints the python to use on the last line of stdout.
#
# Environment:
#   LTX2K_PYTHON         the python to check for torch+triton first (default python3)
#   LTX2K_FORCE_VENV=1   make a .venv even where that python has torch+triton
#   LTX2K_VENV=dir       a per-job virtual environment on top of that python: its
#                        packages (torch, triton) stay importable, but everything this
#                        job installs lands in dir, never in that python
#   LTX2K_TORCH_INDEX    a PyTorch CPU index (or mirror) for the .venv's torch
#   LTX2K_TORCH_VERSION, LTX2K_TRITON_VERSION   the .venv's torch and triton
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

# The triton of the GPU runners: the CPU tests run its interpreter, and ltx2k's
# launch paths are tested against it (pyproject.toml's range).
TRITON_VERSION=${LTX2K_TRITON_VERSION:-3.6.0}
# A CPU build of torch has no triton pin, so any recent one goes with that triton.
CPU_TORCH_VERSION=${LTX2K_TORCH_VERSION:-2.13.0}
# PyPI's torch is the CUDA build, and each one pins its own triton: 2.11 is the one
# that pins triton 3.6.0 (the runners' pair), so pip resolves both without a swap.
CUDA_TORCH_VERSION=${LTX2K_TORCH_VERSION:-2.11.0}
PYTORCH_CPU_INDEX=https://download.pytorch.org/whl/cpu

# torch_source: where the CPU .venv's torch comes from, in torch_req, torch_index
# (pip arguments) and torch_what (words for the stage line). In order: the index
# LTX2K_TORCH_INDEX names; a CPU wheel pip finds without an index (find-links,
# e.g. a wheel cache); the PyTorch CPU index if it answers within a few seconds;
# else PyPI's CUDA build, said so before its download starts.
torch_source() {
  torch_index=()
  if [ -n "${LTX2K_TORCH_INDEX:-}" ]; then
    torch_req="torch==$CPU_TORCH_VERSION+cpu"
    torch_index=(--extra-index-url "$LTX2K_TORCH_INDEX")
    torch_what="CPU build from $LTX2K_TORCH_INDEX"
  elif "$PY" -m pip install -q --disable-pip-version-check --dry-run --no-index --no-deps \
    "torch==$CPU_TORCH_VERSION+cpu" >/dev/null 2>&1; then
    torch_req="torch==$CPU_TORCH_VERSION+cpu"
    torch_what="CPU build, a local wheel"
  elif "$PY" -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=5)' \
    "$PYTORCH_CPU_INDEX/torch/" >/dev/null 2>&1; then
    torch_req="torch==$CPU_TORCH_VERSION+cpu"
    torch_index=(--extra-index-url "$PYTORCH_CPU_INDEX")
    torch_what="CPU build from $PYTORCH_CPU_INDEX, a few hundred MB"
  else
    torch_req="torch==$CUDA_TORCH_VERSION"
    torch_what="CUDA build from PyPI, about 3 GB"
    say "no CPU build of torch here: $PYTORCH_CPU_INDEX did not answer and LTX2K_TORCH_INDEX is" \
      "not set, so pip downloads PyPI's CUDA build of torch, about 3 GB with its CUDA libraries" \
      "(for the CPU build, set LTX2K_TORCH_INDEX to a PyTorch CPU index or a mirror of it)"
  fi
}
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
    # plugin imports; our env plugin (ltx2k/runner/asv_env.py) does not need it.
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
  if "$PY" -c "import torch, triton" 2>/dev/null; then
    stage "ltx2k with the dev tools (asv, pytest, ruff, ...), torch/triton already installed" \
      pipq -e ".[dev]"
  else
    # torch, triton and ltx2k's own requirements go to pip in ONE call: pinned in two
    # calls, the second one's triton pin made pip replace the first one's torch.
    torch_source
    stage "torch ${torch_req#torch==}, triton $TRITON_VERSION and ltx2k with the dev tools ($torch_what)" \
      "$PY" -m pip install --disable-pip-version-check --progress-bar on \
      "${torch_index[@]}" "$torch_req" "triton==$TRITON_VERSION" -e ".[dev]"
  fi
fi
"$PY" -c "import ltx2k, torch, triton, asv; print('bootstrap: ltx2k', ltx2k.__version__, 'torch', torch.__version__, 'triton', triton.__version__)" >&2
exe=$("$PY" -c "import sys; print(sys.executable)")
# scripts/ltx2k and scripts/python run this python from any shell, no activation.
mkdir -p .asv && echo "$exe" >.asv/bootstrap-python
say "ready in $((SECONDS - start)) s; from any shell: scripts/ltx2k ..., scripts/python -m asv ..."
echo "$exe"
