"""`tiled` against `tiled_pdl` (the public function, native path), interleaved in one process.

Usage: python tools/rope_pdl_ab.py tiled,tiled_pdl   (the order of each round; run both)
Cold-L2 device time, the suite's clock, 9 rounds x 10 replays per variant and shape
(docs/kernels/split_rope.md, "tiled_pdl").
"""

import statistics
import sys

import torch

from ltx2k.measure import device_time
from ltx2k.workload import cases, shapes

order = sys.argv[1].split(",")
rows = {}
for B, S, H, D in [
    (2, 6144, 16, 128),
    (1, 16384, 32, 128),
    (2, 15810, 32, 64),
    (4, 1152, 32, 128),
    (1, 1024, 32, 128),
]:
    shape = shapes.RopeShape(B, S, H, D)
    nbytes = cases.KERNELS["split_rope"].bytes_moved(shape)
    clocks = {
        v: device_time.build_clock(
            cases.variant_fn("split_rope", v),
            lambda n, shape=shape: cases.input_sets("split_rope", shape, "cuda", n),
            nbytes,
            cold=True,
        )
        for v in order
    }
    samples = {v: [] for v in order}
    for _ in range(9):
        for v in order:
            samples[v] += device_time.device_times(clocks[v], samples=10)
    med = {v: statistics.median(x) * 1e6 for v, x in samples.items()}
    rows[shape.label] = med
    print(
        shape.label,
        " ".join(f"{v} {m:.2f}" for v, m in med.items()),
        f"pdl/tiled {med['tiled_pdl'] / med['tiled']:.4f}",
        flush=True,
    )
    del clocks
    torch.cuda.empty_cache()
