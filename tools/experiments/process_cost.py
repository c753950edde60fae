"""Where one asv benchmark process's time goes, on a GPU runner (the suite-cost question).

asv's forkserver imports the suite once and forks one process per benchmark x
params. This script does the same for a sample of cases and times each phase
inside the child: CUDA context creation, ``suite.prepare`` (inputs, gate,
graph capture) and 20 samples, plus the whole fork-to-reap wall time (which
includes tearing the context down). It does so twice: without and with
``ltx2k.runtime.ContextKeeper`` holding a context open.

Usage: python tools/experiments/process_cost.py [--json OUT]
asv's own per-benchmark overhead is not in here; compare the sum with an
``asv run`` wall time to see it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")

import torch  # noqa: E402

import ltx2k.kernels.adaln  # noqa: E402,F401  (preimported, as bench_kernels does)
import ltx2k.kernels.rope  # noqa: E402,F401
from ltx2k import cases, runtime, shapes  # noqa: E402
from ltx2k.measure import suite  # noqa: E402
from ltx2k.measure.forked import run_forked  # noqa: E402

CASES = [
    ("split_rope", "blocked", shapes.ROPE_SHAPES[0], "device_cold"),
    ("split_rope", "blocked", shapes.ROPE_SHAPES[0], "host"),
    ("split_rope", "per_head", shapes.ROPE_SHAPES[5], "device_cold"),
    ("split_rope", "eager", shapes.ROPE_SHAPES[3], "device_warm"),
    ("split_rope", "compiled", shapes.ROPE_SHAPES[0], "device_cold"),
    ("ada_values9", "slab", shapes.ADA_SHAPES[0], "device_cold"),
    ("ada_values9", "separate", shapes.ADA_SHAPES[0], "host"),
    ("ada_values9", "slab", shapes.ADA_SHAPES[5], "device_cold"),
    ("ada_values9", "compiled", shapes.ADA_SHAPES[0], "host"),
]


def child(case, compile_threads) -> dict:
    kernel, variant, shape, metric = case
    if compile_threads is not None:
        import torch._inductor.config as inductor_config

        inductor_config.compile_threads = compile_threads
    t = [time.perf_counter()]
    torch.empty(1, device="cuda")
    torch.cuda.synchronize()
    t.append(time.perf_counter())
    # the first call alone: kernel load (Triton) or trace + compile (torch.compile)
    spec = cases.KERNELS[kernel]
    args = spec.make_inputs(shape, "cuda", seed=0)
    cases.variant_fn(kernel, variant)(*args)
    torch.cuda.synchronize()
    t.append(time.perf_counter())
    timed = suite.prepare(kernel, variant, shape, metric)
    torch.cuda.synchronize()
    t.append(time.perf_counter())
    for _ in range(20):
        t0 = timed.timer()
        timed.run()
        timed.timer() - t0
    t.append(time.perf_counter())
    return dict(
        cuda_init=t[1] - t[0], first_call=t[2] - t[1], prepare=t[3] - t[2], samples20=t[4] - t[3]
    )


def run_case(case, compile_threads=None) -> dict:
    out, wall = run_forked(lambda: child(case, compile_threads))
    kernel, variant, shape, metric = case
    return dict(kernel=kernel, variant=variant, shape=shape.label, metric=metric, wall=wall, **out)


def sweep(label: str, cases_=CASES, compile_threads=None) -> list[dict]:
    rows = []
    for case in cases_:
        row = dict(mode=label, **run_case(case, compile_threads))
        rows.append(row)
        print(
            f"{label:9s} {row['kernel']:11s} {row['variant']:9s} {row['shape']:20s} "
            f"{row['metric']:11s} wall {row['wall']:.2f}s  init {row.get('cuda_init', 0):.2f}  "
            f"1st call {row.get('first_call', 0):.2f}  prepare {row.get('prepare', 0):.2f}  "
            f"samples {row.get('samples20', 0):.2f}",
            flush=True,
        )
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", help="write the rows here")
    args = ap.parse_args()
    if runtime.select_backend() != "cuda":
        print("process_cost.py measures GPU processes; no CUDA device here", file=sys.stderr)
        return 1
    rows = sweep("alone")
    with runtime.ContextKeeper():
        rows += sweep("keeper")
    # inductor's compile worker pool vs compiling in the benchmark process itself
    compiled = [c for c in CASES if c[1] == "compiled"]
    rows += sweep("threads1", compiled, compile_threads=1)
    for mode in ("alone", "keeper"):
        walls = [r["wall"] for r in rows if r["mode"] == mode]
        print(f"{mode}: median process wall {statistics.median(walls):.2f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
