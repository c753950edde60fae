"""Cross-check ltx2k's cold-L2 device time against an independent measure: torch.profiler
(CUPTI) kernel durations of the same launches over the same rotating inputs.

CUPTI times each kernel from its start to its end on the GPU. Two views:
- in-graph: the kernels of the very graph replays our events bracket; the
  ratio isolates the event clock (what it adds: inter-kernel gaps);
- eager-launched: the same calls launched one by one from Python, with host
  gaps between them (idle time in which L2 drains dirty lines, so each kernel
  starts clean: expect it slightly faster than back-to-back).
Usage: python tools/experiments/crosscheck_profiler.py [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch
from torch.profiler import ProfilerActivity, profile

from ltx2k import cases
from ltx2k.measure import device_time, suite

CHECKS = [
    ("split_rope", "blocked", "B1_S4096_H16_D128", "_split_rope_kernel"),
    ("split_rope", "blocked", "B2_S6144_H16_D128", "_split_rope_kernel"),
    ("split_rope", "blocked", "B1_S16384_H32_D128", "_split_rope_kernel"),
    ("ada_values9", "slab", "B1_S1024_D4096_bf16", "_ada_values9_kernel"),
    ("ada_values9", "slab", "B2_S6144_D4096_bf16", "_ada_values9_kernel"),
]


def profiler_kernel_us(kernel, variant, shape, name, reps=40):
    spec = cases.KERNELS[kernel]
    n = device_time.rotation_sets(spec.bytes_moved(shape), True, device_time.l2_bytes())
    sets = [spec.make_inputs(shape, "cuda", seed=i) for i in range(n)]
    fn = cases.variant_fn(kernel, variant)
    outs = [fn(*s) for s in sets]  # warm-up, and keep outputs rotating like the graph does
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for i in range(max(reps, n)):
            outs[i % n] = fn(*sets[i % n])
        torch.cuda.synchronize()
    durs = [e.device_time for e in prof.events() if name in e.name and e.device_time > 0]
    return statistics.median(durs), len(durs)


def profiler_graph_us(kernel, variant, shape, name, replays=10):
    """CUPTI durations of the kernels inside the very graph replays ltx2k's events time."""
    clock = suite.prepare(kernel, variant, shape, "device_cold").timer
    clock.run()
    clock()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(replays):
            clock.run()
        clock()
    durs = [e.device_time for e in prof.events() if name in e.name and e.device_time > 0]
    return (statistics.median(durs) if durs else float("nan")), len(durs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    args = ap.parse_args()
    rows = []
    for kernel, variant, label, name in CHECKS:
        shape = cases.find_shape(kernel, label)
        ours = suite.device_seconds(kernel, variant, shape, cold=True, samples=30) * 1e6
        prof, count = profiler_kernel_us(kernel, variant, shape, name)
        gprof, gcount = profiler_graph_us(kernel, variant, shape, name)
        rows.append(
            dict(
                kernel=kernel,
                variant=variant,
                shape=label,
                ltx2k_us=ours,
                profiler_eager_us=prof,
                profiler_eager_kernels=count,
                profiler_graph_us=gprof,
                profiler_graph_kernels=gcount,
                ratio_eager=ours / prof,
                ratio_graph=ours / gprof,
            )
        )
        print(
            f"{kernel:11s} {variant:7s} {label:20s} ltx2k {ours:8.2f} us | CUPTI in-graph "
            f"{gprof:8.2f} us (x{ours / gprof:.3f}, n={gcount}) | CUPTI eager-launched "
            f"{prof:8.2f} us (x{ours / prof:.3f})"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
