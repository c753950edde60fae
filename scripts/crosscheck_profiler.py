"""Cross-check ltx2k's cold-L2 device time against an independent measure: torch.profiler
(CUPTI) kernel durations of the same launches over the same rotating inputs.

CUPTI times each kernel from its start to its end on the GPU, with no events,
no graph and no launch gaps, so agreement within a few percent says the
graph+event clock measures the kernel and not the harness.
Usage: python scripts/crosscheck_profiler.py [--json OUT]
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    args = ap.parse_args()
    rows = []
    for kernel, variant, label, name in CHECKS:
        shape = cases.find_shape(kernel, label)
        ours = suite.device_seconds(kernel, variant, shape, cold=True, samples=30) * 1e6
        prof, count = profiler_kernel_us(kernel, variant, shape, name)
        rows.append(dict(kernel=kernel, variant=variant, shape=label, ltx2k_us=ours,
                         profiler_us=prof, profiler_kernels=count, ratio=ours / prof))
        print(f"{kernel:12s} {variant:8s} {label:22s} ltx2k {ours:9.2f} us  profiler "
              f"{prof:9.2f} us  ratio {ours / prof:.3f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
