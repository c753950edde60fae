"""Candidate launch configurations of both kernels, timed side by side on one GPU.

The question: which change brings AdaLN's large shapes to torch.compile's device time,
RoPE B1_S1024_H32_D128 cold to 7 us, and AdaLN's decode-shape kernel duration to eager's
and compile's (docs/kernels/*.md hold the predictions written before this ran). Every
candidate is checked bit-exact against the eager reference first; then all candidates of
one shape are timed in interleaved rounds (cold-L2 graph replays, and CUPTI kernel
durations at decode shapes), so they share the machine's drift.

Candidates are experimental copies of the grid kernels here, not product code:
- AdaLN: program order (timestep order, as the product; or slab order, value slowest, as
  Inductor's flat index runs) x (BLOCK_D, num_warps).
- RoPE: heads per program x warps, and programmatic dependent launch (``launch_pdl``
  with ``gdc_wait`` before the first load), which overlaps a launch with the tail of the
  kernel before it in the stream.

Usage (GPU): python tools/experiments/kernel_sweep.py [--rounds 5] [--json out.json]
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics

import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_wait

from ltx2k import cases
from ltx2k.kernels import adaln, rope
from ltx2k.measure import bandwidth, device_time, kernel_time


@triton.jit
def _ada_exp_kernel(
    table_ptr, ts_ptr, out_ptr, stride_table, stride_value, R,
    BLOCK_D: tl.constexpr, D: tl.constexpr, SLAB_ORDER: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(0)
    n_col_blocks: tl.constexpr = (D + BLOCK_D - 1) // BLOCK_D
    col_block = pid % n_col_blocks
    rest = pid // n_col_blocks
    if SLAB_ORDER:  # value slowest: the slab's own order (writes stream, reads stride 9D)
        row = rest % R
        value = rest // R
    else:  # row slowest: timestep's order (the product kernel's)
        value = rest % 9
        row = rest // 9
    row = row.to(tl.int64)
    cols = col_block * BLOCK_D + tl.arange(0, BLOCK_D)
    mask = cols < D
    adaln._add_one(
        table_ptr + value * stride_table,
        ts_ptr + (row * 9 + value) * D,
        out_ptr + value.to(tl.int64) * stride_value + row * D,
        cols,
        mask,
    )


def ada_candidate(block_d: int, warps: int, slab_order: bool):
    def fn(table, ts):
        B, S, D9 = ts.shape
        D = D9 // 9
        slab = torch.empty((9, B, S, D), dtype=torch.bfloat16, device=ts.device)
        grid = (B * S * 9 * triton.cdiv(D, block_d),)
        _ada_exp_kernel[grid](
            table, ts, slab, table.stride(0), slab.stride(0), B * S,
            BLOCK_D=block_d, D=D, SLAB_ORDER=slab_order, num_warps=warps,
        )  # fmt: skip
        return slab.unbind(0)

    return fn


@triton.jit
def _rope_pdl_kernel(
    x_ptr, cos_ptr, sin_ptr, out_ptr, S, H, HALF, stride_x_tok,
    stride_cos_b, stride_cos_h, stride_cos_s, stride_sin_b, stride_sin_h, stride_sin_s,
    BLOCK_HEADS: tl.constexpr, BLOCK_HALF: tl.constexpr, PDL: tl.constexpr,
):  # fmt: skip
    if PDL:
        gdc_wait()  # the stream's previous kernel has finished and its writes are visible
    rope._split_rope_kernel(
        x_ptr, cos_ptr, sin_ptr, out_ptr, S, H, HALF, stride_x_tok,
        stride_cos_b, stride_cos_h, stride_cos_s, stride_sin_b, stride_sin_h, stride_sin_s,
        BLOCK_HEADS, BLOCK_HALF,
    )  # fmt: skip


def rope_candidate(block_heads: int, warps: int, pdl: bool):
    def fn(x, cos, sin):
        B, S, HD = x.shape
        H, half = cos.shape[1], cos.shape[3]
        out = torch.empty_like(x)
        grid = (B * S, triton.cdiv(H, block_heads))
        _rope_pdl_kernel[grid](
            x, cos, sin, out, S, H, half, x.stride(1),
            *cos.stride()[:3], *sin.stride()[:3],
            BLOCK_HEADS=block_heads, BLOCK_HALF=triton.next_power_of_2(half), PDL=pdl,
            num_warps=warps, launch_pdl=pdl,
        )  # fmt: skip
        return out

    return fn


def _equal(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return torch.equal(a, b)
    return len(a) == len(b) and all(torch.equal(x, y) for x, y in zip(a, b, strict=True))


def candidates(kernel: str) -> dict:
    peers = {p: cases.variant_fn(kernel, p) for p in cases.PEERS}
    if kernel == "ada_values9":
        product = {"slab_dconst": cases.variant_fn(kernel, "slab_dconst", "triton")}
        exp = {
            f"{'slab' if so else 'ts'}-order {bd}/{w}w": ada_candidate(bd, w, so)
            for so in (False, True)
            for bd, w in ((256, 1), (512, 2), (1024, 4), (2048, 4), (2048, 8), (4096, 8))
        }
    else:
        product = {v: cases.variant_fn(kernel, v, "triton") for v in ("blocked", "blocked_wide")}
        exp = {
            f"{bh} heads/{w}w{' pdl' if pdl else ''}": rope_candidate(bh, w, pdl)
            for pdl in (False, True)
            for bh, w in ((16, 8), (16, 4), (8, 4), (32, 8))
        }
    return {**product, **exp, **peers}


def sweep(kernel: str, shape, metric: str, rounds: int, samples: int) -> dict:
    spec = cases.KERNELS[kernel]
    dev = torch.device("cuda")
    args = spec.make_inputs(shape, dev, seed=0)
    want = spec.reference(*args)
    clocks, wrong = {}, []
    for name, fn in candidates(kernel).items():
        try:
            ok = _equal(fn(*args), want)
        except Exception as e:  # noqa: BLE001 - a candidate that cannot run is reported, not fatal
            ok = False
            name = f"{name} ({type(e).__name__}: {str(e).splitlines()[0][:120] if str(e) else ''})"
        if not ok:
            wrong.append(name)  # never timed: a number needs a correct kernel
            continue
        make = functools.partial(cases.input_sets, kernel, shape, dev)
        if metric == "kernel":
            clocks[name] = kernel_time.build_clock(fn, make, spec.bytes_moved(shape))
        else:
            clocks[name] = device_time.build_clock(fn, make, spec.bytes_moved(shape), cold=True)
    times: dict[str, list[float]] = {n: [] for n in clocks}
    for _ in range(rounds):  # interleaved: every candidate sees the same drift
        for name, clock in clocks.items():
            times[name] += device_time.device_times(clock, samples=samples)
    bw = bandwidth.copy_bandwidth(True)
    out = {}
    for name, ts in times.items():
        med = statistics.median(ts)
        out[name] = {
            "median_us": med * 1e6,
            "pct_copy": 100.0 * spec.bytes_moved(shape) / med / bw,
        }
    return {"results": out, "wrong": wrong, "copy_bw": bw}


CASES = [
    ("ada_values9", "B1_S1024_D4096_bf16", "device_cold"),
    ("ada_values9", "B2_S6144_D4096_bf16", "device_cold"),
    ("ada_values9", "B1_S1_D4096_bf16", "kernel"),
    ("ada_values9", "B1_S1_D2048_bf16", "kernel"),
    ("split_rope", "B1_S1024_H32_D128", "device_cold"),
    ("split_rope", "B1_S4096_H16_D128", "device_cold"),
]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--samples", type=int, default=6, help="replays per candidate per round")
    ap.add_argument("--json", help="write the results here")
    a = ap.parse_args(argv)
    report = {"gpu": torch.cuda.get_device_name(), "triton": triton.__version__}
    for kernel, label, metric in CASES:
        shape = cases.find_shape(kernel, label)
        got = sweep(kernel, shape, metric, a.rounds, a.samples)
        report[f"{kernel} {label} {metric}"] = got
        print(f"\n{kernel} {label} {metric} (copy {got['copy_bw'] / 1e12:.2f} TB/s)", flush=True)
        for name, r in sorted(got["results"].items(), key=lambda kv: kv[1]["median_us"]):
            print(f"  {name:24s} {r['median_us']:9.2f} us  {r['pct_copy']:6.1f}% of copy")
        if got["wrong"]:
            print("  NOT bit-exact (not timed):", ", ".join(got["wrong"]))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
