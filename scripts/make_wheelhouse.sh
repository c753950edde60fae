#!/usr/bin/env bash
# Prepare, on a machine WITH network, the wheels an offline GPU runner needs
# beyond its preinstalled torch/triton: asv and its small pure-Python deps.
# Usage: scripts/make_wheelhouse.sh [DEST=wheelhouse] [PYTHON_VERSION=3.12]
# Then on the runner: scripts/bootstrap.sh --wheelhouse DEST   (pip --no-index --find-links)
set -euo pipefail
dest=${1:-wheelhouse}
pyver=${2:-3.12}
mkdir -p "$dest"
# importlib-metadata<9: 9+ imports lazy_importer, one more wheel for nothing.
# Pinned: the suite relies on asv_runner's timer/setup semantics (benchmarks/bench_kernels.py).
pkgs=(asv==0.6.6 asv_runner==0.3.2 json5==0.17.3 tabulate==0.10.0
      importlib-metadata==8.7.0 zipp==3.23.0)
plat=()
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux1_x86_64; do
  plat+=(--platform "$p")
done
echo "ltx2k: downloading ${#pkgs[@]} wheels for CPython $pyver into $dest" >&2
python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version "$pyver" \
  --implementation cp "${plat[@]}" -d "$dest" "${pkgs[@]}"
ls -1 "$dest" >&2
