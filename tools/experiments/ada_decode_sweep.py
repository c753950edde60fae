"""AdaLN grid-kernel launch configs at one shape, cold-L2 device time, side by side in one process.

The target at the decode shape B1_S1_D4096 is <= 1.5 us, about what eager
PyTorch takes (docs/kernels/ada_values9.md). The grid kernel's config is one
rule (``adaln._grid_config``); this sweeps (BLOCK_D, num_warps) around it
with the harness's own device clock (CUDA-graph replays over rotating input
sets, ltx2k.measure.device_time), next to eager PyTorch and the current
``slab_grid``, rounds interleaved so drift hits every config alike.

Usage: python tools/experiments/ada_decode_sweep.py [--shape B1_S1_D4096_bf16] [--rounds 5]
                                                    [--json OUT]
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import statistics
import sys

import torch
import triton

from ltx2k import cases, reference
from ltx2k.kernels import adaln
from ltx2k.measure import device_time

BLOCKS = (128, 256, 512, 1024, 2048, 4096)
WARPS = (1, 2, 4, 8)


def launch_config(table, ts, *, block_d: int, num_warps: int):
    """The grid kernel with an explicit (BLOCK_D, num_warps); otherwise as adaln._values9_grid."""
    B, S, _ = ts.shape
    D = table.shape[1]
    slab = torch.empty((9, B, S, D), dtype=torch.bfloat16, device=ts.device)
    grid = (B * S * 9 * triton.cdiv(D, block_d),)
    adaln._ada_values9_grid_kernel[grid](
        table,
        ts,
        slab,
        D,
        table.stride(0),
        slab.stride(0),
        BLOCK_D=block_d,
        D_CONST=0,
        num_warps=num_warps,
    )
    return slab.unbind(0)


def candidates(D: int) -> dict:
    out = {
        "eager": reference.ada_values9_reference,
        "slab_grid": functools.partial(adaln.ltx2_ada_values9, variant="slab_grid"),
        "slab_dconst": functools.partial(adaln.ltx2_ada_values9, variant="slab_dconst"),
    }
    for block in BLOCKS:
        if block > triton.next_power_of_2(D):
            continue
        for warps in WARPS:
            if 32 * warps > block:  # fewer than one bf16 per thread
                continue
            out[f"grid_b{block}_w{warps}"] = functools.partial(
                launch_config, block_d=block, num_warps=warps
            )
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", default="B1_S1_D4096_bf16")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--samples", type=int, default=10)
    ap.add_argument("--only", help="comma-separated config names (default: all)")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 2
    shape = cases.find_shape("ada_values9", args.shape)
    spec = cases.KERNELS["ada_values9"]
    fns = candidates(shape.D)
    if args.only:
        wanted = args.only.split(",")
        unknown = sorted(set(wanted) - set(fns))
        if unknown:
            ap.error(f"--only: unknown config(s) {unknown}; known: {sorted(fns)}")
        fns = {name: fns[name] for name in wanted}
    clocks = {}
    for name, fn in fns.items():
        table, ts = cases.ada_inputs(shape, "cuda", seed=0)
        if not cases.outputs_equal(fn(table, ts), reference.ada_values9_reference(table, ts)):
            raise SystemExit(f"{name} is not bit-exact at {shape.label}: not timed")
        clocks[name] = device_time.build_clock(
            fn,
            lambda n: cases.input_sets("ada_values9", shape, "cuda", n),
            spec.bytes_moved(shape),
            cold=True,
        )
    samples = {name: [] for name in fns}
    for r in range(args.rounds):
        for name, clock in clocks.items():
            samples[name] += device_time.device_times(clock, samples=args.samples)
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
    rows = sorted(
        ((statistics.median(v) * 1e6, name) for name, v in samples.items()), key=lambda t: t[0]
    )
    eager = statistics.median(samples["eager"]) * 1e6 if "eager" in samples else math.nan
    print(f"{shape.label}: cold-L2 device time per launch, median of {args.rounds}x{args.samples}")
    print(f"{'config':<22}{'median us':>10}{'vs eager':>10}")
    for us, name in rows:
        print(f"{name:<22}{us:>10.3f}{us / eager:>10.3f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {"shape": shape.label, "median_us": {n: u for u, n in rows}, "samples_s": samples},
                f,
                indent=1,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
