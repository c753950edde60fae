"""Split RoPE tile sweep: (tokens, heads) per program x warps, through the product kernel.

The question: which tile brings split RoPE to the copy floor at LTX-2's shapes, head dim
64 (the audio-video cross attention) and 128 (video self attention), and how close does a
same-bytes copy itself get there? Every configuration launches
``ltx2k.kernels.rope._split_rope_kernel`` through the public function (a temporary
algorithm entry), is checked bit-exact against the eager reference, and is timed with
the suite's cold-L2 clock (CUDA-graph replays over input sets rotated past L2). Next to
it: ``blocked``, ``blocked_wide`` and ``tiled`` as shipped, and ``Tensor.clone`` of half
the kernel's bytes (the same traffic, read and written once) under the same clock.

Usage (GPU): python tools/experiments/rope_tile_sweep.py [--samples 15] [--json out.json]
             [--shapes B1_S6144_H32_D64,...]
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics

import torch
import triton

from ltx2k import cases, reference, shapes
from ltx2k.kernels import rope
from ltx2k.measure import bandwidth, device_time

# LTX-2's shapes (docs/shapes.md) and the suite's older hand-picked ones.
SHAPES = [
    (1, 1536, 32, 64),
    (2, 1536, 32, 64),
    (1, 6144, 32, 64),
    (2, 15810, 32, 64),
    (1, 1536, 32, 128),
    (2, 1536, 32, 128),
    (1, 4096, 16, 128),
    (4, 1152, 32, 128),
    (1, 6144, 32, 128),
    (2, 6144, 16, 128),
    (1, 16384, 32, 128),
    (4, 25, 32, 64),
    (1, 1024, 32, 128),
]
SWEEP = "_sweep"


def _configs(shape: shapes.RopeShape):
    half = triton.next_power_of_2(shape.D // 2)
    tokens = shape.B * shape.S
    for bt in (1, 2, 4, 8):
        for bh in (16, 32):
            bh = min(bh, triton.next_power_of_2(shape.H))
            for warps in (2, 4, 8, 16):
                per_thread = bt * bh * half / (32 * warps)
                if tokens % bt or not 2 <= per_thread <= 32:
                    continue
                yield rope.LaunchConfig(bh, triton.cdiv(shape.H, bh), warps, bt)


def _with_config(cfg: rope.LaunchConfig):
    # The graph is captured while this entry holds cfg, so later entries do not change it.
    rope.ALGORITHMS[SWEEP] = lambda *problem: cfg
    rope.CALLS[(SWEEP, "triton")] = (SWEEP, "triton")
    return functools.partial(rope.apply_ltx2_split_rotary_emb, variant=SWEEP, launch="triton")


class _Sets:
    """One shape's rotation of input sets, drawn once and shared by every candidate."""

    def __init__(self, shape):
        self.shape, self.sets = shape, []

    def __call__(self, n):
        while len(self.sets) < n:
            self.sets.append(cases.rope_inputs(self.shape, "cuda", seed=100 + len(self.sets)))
        return self.sets[:n]


def _cold_us(fn, make_sets, nbytes: int, samples: int) -> float:
    clock = device_time.build_clock(fn, make_sets, nbytes, cold=True)
    return statistics.median(device_time.device_times(clock, samples)) * 1e6


def _copy_us(nbytes: int, samples: int) -> float:
    n = nbytes // 4  # bf16 elements read (and as many written): nbytes of traffic

    def make_sets(k):
        return [(torch.randn(n, device="cuda").to(torch.bfloat16),) for _ in range(k)]

    return _cold_us(torch.clone, make_sets, nbytes, samples)


def sweep_shape(shape: shapes.RopeShape, bw: float, samples: int) -> dict:
    nbytes = cases.rope_bytes(shape)
    sets = _Sets(shape)
    x, cos, sin = cases.rope_inputs(shape, "cuda", seed=1)
    expected = reference.split_rotary_reference(x, cos, sin)
    row = {
        "shape": shape.label,
        "floor_us": nbytes / bw * 1e6,
        "copy_us": _copy_us(nbytes, samples),
    }
    for variant in ("blocked", "blocked_wide", "tiled"):
        row[variant] = _cold_us(cases.variant_fn("split_rope", variant), sets, nbytes, samples)
    row["tiled_config"] = list(
        rope.ALGORITHMS["tiled"](shape.H, shape.D, shape.B * shape.S, rope._num_sms(x.device))
    )
    row["candidates"] = {}
    for cfg in _configs(shape):
        fn = _with_config(cfg)
        if not torch.equal(fn(x, cos, sin), expected):
            row["candidates"][str(tuple(cfg))] = None  # never timed
            continue
        row["candidates"][str(tuple(cfg))] = _cold_us(fn, sets, nbytes, samples)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=15)
    ap.add_argument("--json", help="write the rows here")
    ap.add_argument("--shapes", help="comma-separated labels (default: all)")
    args = ap.parse_args()
    bw = bandwidth.copy_bandwidth(True)
    print(f"copy bandwidth {bw / 1e12:.3f} TB/s")
    wanted = set(args.shapes.split(",")) if args.shapes else None
    rows = []
    for dims in SHAPES:
        shape = shapes.RopeShape(*dims)
        if wanted and shape.label not in wanted:
            continue
        row = sweep_shape(shape, bw, args.samples)
        rows.append(row)

        def pct(t, floor=row["floor_us"]):
            return f"{t:.2f} ({100 * floor / t:.1f}%)"

        timed = sorted((t, c) for c, t in row["candidates"].items() if t is not None)
        print(
            f"{shape.label}: floor {row['floor_us']:.2f} us; copy {pct(row['copy_us'])}; "
            + "; ".join(f"{v} {pct(row[v])}" for v in ("blocked", "blocked_wide", "tiled"))
            + f" (config {row['tiled_config']}); best "
            + ", ".join(f"{c} {pct(t)}" for t, c in timed[:3])
            + f"; inexact: {[c for c, t in row['candidates'].items() if t is None]}",
            flush=True,
        )
        torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"copy_bandwidth": bw, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
