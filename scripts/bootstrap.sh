#!/usr/bin/env bash
# Set up ltx2k on this machine; idempotent, and the only install step anywhere.
# - A runner whose python already has torch+triton (e.g. /opt/torch/.venv, offline):
#   install ltx2k --no-deps into it, and asv & co from --wheelhouse (no index).
# - Otherwise (fresh CPU machine): a .venv with the CPU torch wheel, then `.[dev]`.
# Prints the python to use on the last line.
set -euo pipefail
cd "$(dirname "$0")/.."
wheelhouse=""
[ "${1:-}" = "--wheelhouse" ] && wheelhouse=${2:?--wheelhouse needs a directory}
PY=${LTX2K_PYTHON:-python3}
pipq() { "$PY" -m pip install -q --disable-pip-version-check "$@"; }
if "$PY" -c "import torch, triton" 2>/dev/null && [ -z "${LTX2K_FORCE_VENV:-}" ]; then
  echo "bootstrap: using $("$PY" -c 'import sys;print(sys.executable)') with its own torch/triton" >&2
  if [ -n "$wheelhouse" ]; then
    # --no-deps: asv's metadata asks for virtualenv, which only its virtualenv
    # plugin imports; our env plugin (ltx2k/asv_env.py) does not need it.
    # The exact wheels, not names: names are "already satisfied" by whatever
    # version the runner happens to have (e.g. an importlib-metadata that asv
    # cannot import without yet another package).
    pipq --no-deps --no-index "$wheelhouse"/*.whl
    pipq --no-deps --no-index --no-build-isolation -e .
  else
    # The runner's torch and triton as they are: a range of ours must never make
    # pip replace them. Outside ltx2k's tested Triton range the resolver refuses;
    # then ltx2k goes in without dependencies and warns at run time instead.
    cons=$(mktemp)
    trap 'rm -f "$cons"' EXIT
    "$PY" -c "import torch, triton; print(f'torch=={torch.__version__}'); print(f'triton=={triton.__version__}')" >"$cons"
    if ! pipq --no-build-isolation -c "$cons" -e ".[dev]"; then
      echo "bootstrap: this python's $(tr '\n' ' ' <"$cons")is outside ltx2k's tested range;" \
        "installing ltx2k without dependencies (add the dev tools, or pass --wheelhouse)" >&2
      pipq --no-build-isolation --no-deps -e .
    fi
  fi
else
  [ -x .venv/bin/python ] || python3 -m venv .venv
  PY=.venv/bin/python
  # The CPU wheel first: a bare `torch` requirement would pull a multi-GB CUDA build.
  "$PY" -c "import torch" 2>/dev/null || pipq ${LTX2K_TORCH_INDEX:+--index-url "$LTX2K_TORCH_INDEX"} "torch==${LTX2K_TORCH_VERSION:-2.13.0}"
  # Triton pinned to the GPU runners' version: the CPU tests run its interpreter.
  pipq -e ".[dev]" "triton==${LTX2K_TRITON_VERSION:-3.6.0}"
fi
"$PY" -c "import ltx2k, torch, triton, asv; print('bootstrap: ltx2k', ltx2k.__version__, 'torch', torch.__version__, 'triton', triton.__version__)" >&2
"$PY" -c "import sys; print(sys.executable)"
