"""Mid-size split RoPE on a GPU: `tiled`, the same tile with programmatic dependent launch
(early trigger / no trigger), and a same-bytes clone, under the suite's cold-L2 clock.

Usage: python tools/rope_pdl_sweep.py OUT.json (docs/kernels/split_rope.md, "tiled_pdl").

Expected (written before it ran): the early trigger lets launch i+1's CTAs become resident
while launch i drains, hiding part of the 0.7-1.8 us gap between kernels: -0.3 to -0.8 us
per launch at every shape (3-7% at 11 us, 1-3% at 29 us); no trigger: -0.1 to -0.4 us
(the sweep of 2026-12-01). The clone: within 1% of the product tile.
"""

import functools
import json
import statistics
import sys

import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait

from ltx2k.kernels import rope
from ltx2k.measure import device_time
from ltx2k.workload import cases, reference, shapes


# The product kernel's tile path with the trigger and the wait as separate switches: the
# product has both or neither (ltx2k/kernels/rope.py, PDL); "wait only" is a candidate here.
# HINTS: streaming cache hints on every load and store (loads evict_first, stores .cs), a
# candidate of tools/rope_launch_floor.py; the product has no hint parameter.
@triton.jit
def _k(
    x_ptr,
    cos_ptr,
    sin_ptr,
    out_ptr,
    S,
    H,
    HALF,
    stride_x_tok,
    scb,
    sch,
    scs,
    ssb,
    ssh,
    sss,
    BLOCK_HEADS: tl.constexpr,
    BLOCK_HALF: tl.constexpr,
    BLOCK_TOKENS: tl.constexpr,
    TRIGGER: tl.constexpr,
    WAIT: tl.constexpr,
    HINTS: tl.constexpr = False,
):
    if TRIGGER:
        gdc_launch_dependents()
    if WAIT:
        gdc_wait()
    heads = tl.program_id(1) * BLOCK_HEADS + tl.arange(0, BLOCK_HEADS)
    cols = tl.arange(0, BLOCK_HALF)
    toks = (tl.program_id(0) * BLOCK_TOKENS + tl.arange(0, BLOCK_TOKENS)).to(tl.int64)
    b = toks // S
    s = toks % S
    mask = (heads[None, :, None] < H) & (cols[None, None, :] < HALF)
    first = (
        toks[:, None, None] * stride_x_tok + heads[None, :, None] * (2 * HALF) + cols[None, None, :]
    )
    cos_at = (b * scb + s * scs)[:, None, None] + heads[None, :, None] * sch + cols[None, None, :]
    sin_at = (b * ssb + s * sss)[:, None, None] + heads[None, :, None] * ssh + cols[None, None, :]
    if HINTS:
        # rope._rotate's arithmetic, with the hints
        x1 = tl.load(x_ptr + first, mask=mask, eviction_policy="evict_first").to(tl.float32)
        x2 = tl.load(x_ptr + first + HALF, mask=mask, eviction_policy="evict_first")
        c = tl.load(cos_ptr + cos_at, mask=mask, eviction_policy="evict_first").to(tl.float32)
        sn = tl.load(sin_ptr + sin_at, mask=mask, eviction_policy="evict_first").to(tl.float32)
        x2 = x2.to(tl.float32)
        c1 = (x1 * c).to(tl.bfloat16).to(tl.float32)
        c2 = (x2 * c).to(tl.bfloat16).to(tl.float32)
        out1 = (c1 - x2 * sn).to(tl.bfloat16)
        out2 = (c2 + x1 * sn).to(tl.bfloat16)
        tl.store(out_ptr + first, out1, mask=mask, cache_modifier=".cs")
        tl.store(out_ptr + first + HALF, out2, mask=mask, cache_modifier=".cs")
    else:
        rope._rotate(x_ptr + first, cos_ptr + cos_at, sin_ptr + sin_at, out_ptr + first, HALF, mask)


def make(trigger, wait, pdl):
    def fn(x, cos, sin):
        B, S, HD = x.shape
        H, half = cos.shape[1], cos.shape[3]
        cfg = rope._tiled(
            H, 2 * half, B * S, torch.cuda.get_device_properties(0).multi_processor_count
        )
        out = torch.empty_like(x)
        _k[(B * S // cfg.block_tokens, cfg.head_blocks)](
            x,
            cos,
            sin,
            out,
            S,
            H,
            half,
            HD,
            *cos.stride()[:3],
            *sin.stride()[:3],
            BLOCK_HEADS=cfg.block_heads,
            BLOCK_HALF=triton.next_power_of_2(half),
            BLOCK_TOKENS=cfg.block_tokens,
            TRIGGER=trigger,
            WAIT=wait,
            num_warps=cfg.num_warps,
            launch_pdl=pdl,
        )
        return out

    return fn


SHAPES = [
    (2, 1536, 32, 64),
    (1, 4096, 16, 128),
    (2, 1536, 32, 128),
    (4, 1152, 32, 128),
    (1, 6144, 32, 64),
    (1, 16384, 32, 128),
]


def _flat_sets(elems, n):
    return [(torch.randn(elems, device="cuda").to(torch.bfloat16),) for _ in range(n)]


def main(out_path):
    rows = {}
    for B, S, H, D in SHAPES:
        shape = shapes.RopeShape(B, S, H, D)
        nbytes = cases.KERNELS["split_rope"].bytes_moved(shape)
        make_sets = functools.partial(cases.input_sets, "split_rope", shape, "cuda")
        cands = {
            # "product": the default when this ran
            "product": functools.partial(rope.apply_ltx2_split_rotary_emb, variant="tiled"),
            "pdl_trigger": make(True, True, True),
            "pdl_wait_only": make(False, True, True),
            "same_kernel_no_pdl": make(False, False, False),
        }
        x, c, s = cases.rope_inputs(shape, "cuda", seed=7)
        ref = reference.split_rotary_reference(x, c, s)
        for name, fn in cands.items():
            assert torch.equal(fn(x, c, s), ref), (name, shape.label)
        clocks = {
            n: device_time.build_clock(f, make_sets, nbytes, cold=True) for n, f in cands.items()
        }
        # same-bytes clone: one flat bf16 buffer of bytes/4 elements read + written
        elems = nbytes // 4
        clocks["clone_same_bytes"] = device_time.build_clock(
            lambda t: t.clone(),
            functools.partial(_flat_sets, elems),
            nbytes,
            cold=True,
        )
        samples = {n: [] for n in clocks}
        for _ in range(7):  # interleaved rounds
            for n, clk in clocks.items():
                samples[n] += device_time.device_times(clk, samples=10)
        med = {n: statistics.median(v) * 1e6 for n, v in samples.items()}
        rows[shape.label] = med
        base = med["product"]
        print(
            shape.label,
            "  ".join(f"{n} {v:.2f} ({v / base:.3f})" for n, v in med.items()),
            flush=True,
        )
        del clocks
        torch.cuda.empty_cache()
    with open(out_path, "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
