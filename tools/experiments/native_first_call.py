"""The first call of the default (native) launch path, with and without a built extension.

The native call path's C++ extension can be built when the package is installed (as
flash-attn and other extension packages do) or at first use with a cache (what
``ltx2k.kernels._native`` does). This measures, each in a fresh process with Triton's
cache already warm (so only the extension differs):

- ``empty``: first public call with an empty extension cache: the first-use build;
- ``built``: the same with the extension already built: what an install-time build
  leaves the first call;
- ``triton``: ``launch="triton"``, for the cost with no extension at all.

Usage (GPU): python tools/experiments/native_first_call.py [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import torch
import ltx2k
from ltx2k import cases, shapes
t_import = time.perf_counter() - t0
launch = sys.argv[1]
x, cos, sin = cases.rope_inputs(shapes.ROPE_SHAPES[0], torch.device("cuda"))
torch.cuda.synchronize()
times = []
for _ in range(3):
    t = time.perf_counter()
    ltx2k.apply_ltx2_split_rotary_emb(x, cos, sin, launch=launch)
    torch.cuda.synchronize()
    times.append(time.perf_counter() - t)
print(json.dumps({"import_s": t_import, "calls_s": times}))
"""


def child(launch: str, native_dir: str) -> dict:
    env = dict(os.environ, LTX2K_NATIVE_DIR=native_dir)
    p = subprocess.run(
        [sys.executable, "-c", CHILD, launch], env=env, capture_output=True, text=True, timeout=600
    )
    if p.returncode != 0:
        return {"error": p.stderr[-2000:]}
    return json.loads(p.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as d:
        child("triton", d)  # warms Triton's cache for the kernel; builds nothing
        report = {
            "triton": child("triton", d),
            "empty": child("auto", d),  # builds the extension into d
            "built": child("auto", d),  # finds it there
        }
    for k, v in report.items():
        if "error" in v:
            print(f"{k:7s} failed: {v['error']}")
        else:
            calls = ", ".join(f"{c * 1e3:.1f}" for c in v["calls_s"])
            print(f"{k:7s} import {v['import_s']:.2f} s; calls 1-3: {calls} ms")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
