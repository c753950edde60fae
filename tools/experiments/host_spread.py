"""Why host latency differs between benchmark processes, and where a lean call's time goes.

1. Spread: fork N processes (as asv's forkserver does) for the same host-latency
   case; each reports its median per-call latency and the CPU it ran on. Once
   unpinned, once pinned to one CPU (``os.sched_setaffinity``, what asv's
   ``--cpu-affinity`` does). A process-to-process spread much larger than the
   spread within a process means a per-process cause (placement, frequency).
2. Breakdown: per-call host cost of each piece of the AdaLN slab_lean and
   RoPE blocked_lean calls (validation, allocation, views, launch), timed
   in-process over many calls with one sync at the end.

Usage: python tools/experiments/host_spread.py [--procs 10] [--json OUT]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import sys
import time

os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")

import torch  # noqa: E402

import ltx2k.kernels.adaln  # noqa: E402,F401
import ltx2k.kernels.rope  # noqa: E402,F401
from ltx2k import runtime, shapes  # noqa: E402
from ltx2k.measure import suite  # noqa: E402
from ltx2k.measure.forked import run_forked  # noqa: E402

CASES = [
    ("ada_values9", "slab_lean", shapes.ADA_SHAPES[0]),
    ("ada_values9", "eager", shapes.ADA_SHAPES[0]),
    ("split_rope", "blocked_lean", shapes.ROPE_SHAPES[3]),
    ("ada_values9", "slab_native", shapes.ADA_SHAPES[0]),
    ("split_rope", "blocked_native", shapes.ROPE_SHAPES[3]),
]


def _cpu() -> int:
    with open("/proc/self/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[36])


def child(case, pin) -> dict:
    if pin is not None:
        os.sched_setaffinity(0, {pin})
    kernel, variant, shape = case
    timed = suite.prepare(kernel, variant, shape, "host")
    for _ in range(20):  # warm-up, as asv's warmup_time
        timed.run()
    vals = []
    for _ in range(20):
        t0 = timed.timer()
        timed.run()
        vals.append(timed.timer() - t0)
    return dict(median_us=statistics.median(vals) * 1e6, min_us=min(vals) * 1e6, cpu=_cpu())


def spread(procs: int) -> list[dict]:
    rows = []
    pin_cpu = sorted(os.sched_getaffinity(0))[-1]
    for case in CASES:
        for pin in (None, pin_cpu):
            got = [run_forked(functools.partial(child, case, pin))[0] for _ in range(procs)]
            meds = [g["median_us"] for g in got if "median_us" in g]
            row = dict(
                kernel=case[0],
                variant=case[1],
                shape=case[2].label,
                pinned=pin,
                medians_us=meds,
                cpus=[g.get("cpu") for g in got],
            )
            rows.append(row)
            print(
                f"{case[1]:12s} {case[2].label:18s} pin={pin!s:4s} per-process medians "
                f"min {min(meds):6.1f} median {statistics.median(meds):6.1f} "
                f"max {max(meds):6.1f} us  cpus {sorted(set(row['cpus']))}",
                flush=True,
            )
    return rows


def _per_call(fn, n=2000) -> float:
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / n * 1e6


def breakdown() -> dict:
    from ltx2k import cases
    from ltx2k.kernels import _launch, adaln, rope

    out = {}
    table, ts = cases.KERNELS["ada_values9"].make_inputs(shapes.ADA_SHAPES[0], "cuda", seed=0)
    B, S, D = adaln._validate(table, ts, "slab_lean")
    slab = torch.empty((9, B, S, D), dtype=torch.bfloat16, device="cuda")
    bd, nw = adaln._grid_config(D)
    grid = (B * S * 9 * -(-D // bd),)
    scalars = (D, table.stride(0), slab.stride(0))

    def ada(variant):
        return lambda: adaln.ltx2_ada_values9(table, ts, variant=variant)

    out["ada"] = {
        "public slab_lean": _per_call(
            lambda: adaln.ltx2_ada_values9(table, ts, variant="slab_lean")
        ),
        "public slab_native": _per_call(
            lambda: adaln.ltx2_ada_values9(table, ts, variant="slab_native")
        ),
        "public slab_dconst": _per_call(
            lambda: adaln.ltx2_ada_values9(table, ts, variant="slab_dconst")
        ),
        "public slab_grid": _per_call(
            lambda: adaln.ltx2_ada_values9(table, ts, variant="slab_grid")
        ),
        "eager reference": _per_call(lambda: cases.KERNELS["ada_values9"].reference(table, ts)),
        "validate": _per_call(lambda: adaln._validate(table, ts, "slab_lean")),
        "torch.empty slab": _per_call(
            lambda: torch.empty((9, B, S, D), dtype=torch.bfloat16, device=ts.device)
        ),
        "slab.unbind(0)": _per_call(lambda: slab.unbind(0)),
        "lean launch": _per_call(
            lambda: _launch.launch(
                adaln._ada_values9_grid_kernel,
                grid,
                (table, ts, slab),
                scalars,
                (("BLOCK_D", bd), ("D_CONST", 0)),
                nw,
            )
        ),
        "kernel[grid]": _per_call(
            lambda: adaln._ada_values9_grid_kernel[grid](
                table, ts, slab, *scalars, BLOCK_D=bd, D_CONST=0, num_warps=nw
            )
        ),
        "torch.add(out=) one op": _per_call(lambda: torch.add(ts, ts, out=ts)),
    }
    x, cos, sin = cases.KERNELS["split_rope"].make_inputs(shapes.ROPE_SHAPES[3], "cuda", seed=0)
    out["rope"] = {
        "public blocked_lean": _per_call(
            lambda: rope.apply_ltx2_split_rotary_emb(x, cos, sin, variant="blocked_lean")
        ),
        "public blocked": _per_call(
            lambda: rope.apply_ltx2_split_rotary_emb(x, cos, sin, variant="blocked")
        ),
        "public blocked_native": _per_call(
            lambda: rope.apply_ltx2_split_rotary_emb(x, cos, sin, variant="blocked_native")
        ),
        "eager reference": _per_call(lambda: cases.KERNELS["split_rope"].reference(x, cos, sin)),
        "torch.empty_like x": _per_call(lambda: torch.empty_like(x)),
    }
    for k, d in out.items():
        for name, us in d.items():
            print(f"{k:4s} {name:26s} {us:7.2f} us/call", flush=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--procs", type=int, default=10)
    ap.add_argument("--json")
    args = ap.parse_args()
    if runtime.select_backend() != "cuda":
        print("host_spread.py needs a CUDA device", file=sys.stderr)
        return 1
    rows = spread(args.procs)
    torch.empty(1, device="cuda")  # the parent's own context only after the forks
    parts = breakdown()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(spread=rows, breakdown=parts), f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
