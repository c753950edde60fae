"""How close split RoPE is to what one launch of its traffic can reach, at 10-30 us.

Usage: python tools/rope_launch_floor.py OUT.json      (on a GPU; docs/kernels/split_rope.md,
       python tools/rope_launch_floor.py --plot OUT.json PNG     "The launch floor")

Three questions, on the suite's cold-L2 clock (7 interleaved rounds x 10 replays, each
RoPE candidate bit-exact against the reference first):

1. The floor of a launch of this traffic: ``add_pdl``, ``out = x + y`` over flat bf16
   buffers with RoPE's bytes (x and out of its x's size, y of cos + sin), contiguous
   16-byte accesses, launched with the same PDL trigger and wait as ``tiled_pdl``. No
   indexing, no rounding, the simplest streaming kernel there is. ``tiled_pdl`` at or
   within ~1% of it means nothing inside the kernel is left to gain.
2. The fixed cost per launch: ``tiled_pdl`` and ``add_pdl`` timed at 6 token counts of
   two production head layouts, and a least-squares line (scipy.stats.linregress)
   t = a + bytes / bw. ``a`` is what a launch costs whatever its size; with it, the best
   % of copy bandwidth a launch of N bytes can read is (N / copy bw) / (a + N / bw).
3. The tile, with PDL: the product kernel (``rope._split_rope_kernel``, ``PDL=True``) at
   tiles of 1024-4096 elements and 4-16 warps, and the product tile with streaming cache
   hints (loads evict_first, stores ``.cs``; ``tools/rope_pdl_sweep.py``'s copy of the tile
   path, since the product has no hint parameter).

Expected (written before it ran): ``tiled_pdl`` within 1% of ``add_pdl`` at every shape;
a fixed cost of 1.0-1.6 us per launch; no tile or hint more than 1% faster than the
product tile at any shape.
"""

import functools
import json
import statistics
import sys

import rope_pdl_sweep  # tools/, next to this file (a script's folder is on sys.path)
import scipy.stats
import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait

from ltx2k.kernels import rope
from ltx2k.measure import bandwidth, device_time
from ltx2k.workload import cases, reference, shapes

ROUNDS, REPLAYS = 7, 10
# The PDL sweep's mid-size shapes: those below their % of copy bandwidth target after
# tiled_pdl, and two that meet it (its last, B1_S16384, is on the fitted lines below).
SHAPES = rope_pdl_sweep.SHAPES[:5]
# Two head layouts at 6 token counts each, for the fixed cost per launch.
LINES = {
    "H32_D64": [(2, s, 32, 64) for s in (384, 768, 1536, 3072, 6144, 12288)],
    "H16_D128": [(1, s, 16, 128) for s in (1024, 2048, 4096, 8192, 16384, 32768)],
}


@triton.jit
def _add_pdl(x_ptr, y_ptr, out_ptr, N, BLOCK: tl.constexpr):
    gdc_launch_dependents()
    gdc_wait()
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = i < N
    tl.store(out_ptr + i, tl.load(x_ptr + i, mask=m) + tl.load(y_ptr + i, mask=m), mask=m)


def add_pdl(block, warps):
    def fn(x, y):
        out = torch.empty_like(x)
        n = x.numel()
        _add_pdl[(triton.cdiv(n, block),)](
            x, y, out, n, BLOCK=block, num_warps=warps, launch_pdl=True
        )
        return out

    return fn


def _flat_sets(shape, n):
    # x and out: B*S*H*D bf16; y: cos + sin, the same count
    elems = shape.B * shape.S * shape.H * shape.D
    return [
        (
            torch.randn(elems, device="cuda").to(torch.bfloat16),
            torch.randn(elems, device="cuda").to(torch.bfloat16),
        )
        for _ in range(n)
    ]


def tile(bt, bh, warps, hinted=False):
    def fn(x, cos, sin):
        B, S, HD = x.shape
        H, half = cos.shape[1], cos.shape[3]
        out = torch.empty_like(x)
        grid = (B * S // bt, triton.cdiv(H, bh))
        args = (x, cos, sin, out, S, H, half, HD, *cos.stride()[:3], *sin.stride()[:3])
        meta = dict(BLOCK_HEADS=bh, BLOCK_HALF=triton.next_power_of_2(half), BLOCK_TOKENS=bt)
        if hinted:
            # the PDL sweep's copy of the tile path, with its hint switch
            rope_pdl_sweep._k[grid](
                *args, **meta, TRIGGER=True, WAIT=True, HINTS=True, num_warps=warps, launch_pdl=True
            )
        else:
            rope._split_rope_kernel[grid](*args, **meta, PDL=True, num_warps=warps, launch_pdl=True)
        return out

    return fn


def product_config(shape):
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    return rope._tiled_pdl(shape.H, shape.D, shape.B * shape.S, sms)


def tile_candidates(shape):
    cfg = product_config(shape)
    bh, half = cfg.block_heads, shape.D // 2
    out = {}
    for elems in (1024, 2048, 4096):
        bt = max(1, elems // (bh * half))
        if (shape.B * shape.S) % bt or bt * bh * half != elems:
            continue
        for warps in (4, 8, 16):
            if (bt, warps) != (cfg.block_tokens, cfg.num_warps):
                out[f"tile_{bt}x{bh}_w{warps}"] = tile(bt, bh, warps)
    out["hinted"] = tile(cfg.block_tokens, bh, cfg.num_warps, hinted=True)
    return out


def timed(cands, make_sets, nbytes):
    clocks = {
        n: device_time.build_clock(f, make_sets[n], nbytes, cold=True) for n, f in cands.items()
    }
    samples = {n: [] for n in clocks}
    for _ in range(ROUNDS):
        for n, clk in clocks.items():
            samples[n] += device_time.device_times(clk, samples=REPLAYS)
    del clocks
    torch.cuda.empty_cache()
    return {n: statistics.median(v) * 1e6 for n, v in samples.items()}


def rope_sets(shape):
    return functools.partial(cases.input_sets, "split_rope", shape, "cuda")


def gate(cands, shape):
    """The candidates that are bit-exact against the reference; the others are reported."""
    x, c, s = cases.rope_inputs(shape, "cuda", seed=7)
    ref = reference.split_rotary_reference(x, c, s)
    kept = {}
    for name, fn in cands.items():
        try:
            ok = torch.equal(fn(x, c, s), ref)
        except Exception as e:  # noqa: BLE001 - one candidate that does not compile
            print(f"    {name}: {e!r:.300}", flush=True)
            continue
        if ok:
            kept[name] = fn
        else:
            print(f"    {name}: not bit-exact, dropped", flush=True)
    assert "tiled_pdl" in kept, shape.label
    return kept


def main(out_path):
    copy_bw = bandwidth.copy_bandwidth(True)
    print(f"copy bandwidth {copy_bw / 1e12:.3f} TB/s", flush=True)
    result = {"copy_bandwidth": copy_bw, "shapes": {}, "lines": {}}
    default = functools.partial(rope.apply_ltx2_split_rotary_emb, variant="tiled_pdl")
    for B, S, H, D in SHAPES:
        shape = shapes.RopeShape(B, S, H, D)
        nbytes = cases.KERNELS["split_rope"].bytes_moved(shape)
        rope_cands = {
            "tiled_pdl": default,
            "tiled": functools.partial(rope.apply_ltx2_split_rotary_emb, variant="tiled"),
            **tile_candidates(shape),
        }
        rope_cands = gate(rope_cands, shape)
        flat = {f"add_pdl_{b}_w{w}": add_pdl(b, w) for b in (2048, 4096) for w in (4, 8)}
        sets = {n: rope_sets(shape) for n in rope_cands}
        sets.update({n: functools.partial(_flat_sets, shape) for n in flat})
        med = timed({**rope_cands, **flat}, sets, nbytes)
        floor_us = nbytes / copy_bw * 1e6
        result["shapes"][shape.label] = {"bytes": nbytes, "us": med}
        base = med["tiled_pdl"]
        best_add = min(v for n, v in med.items() if n.startswith("add_pdl"))
        print(
            f"{shape.label}: byte floor {floor_us:.2f} us; tiled_pdl {base:.2f} "
            f"({100 * floor_us / base:.1f}% of copy bw); best add_pdl {best_add:.2f} "
            f"({100 * floor_us / best_add:.1f}%); tiled_pdl/add_pdl {base / best_add:.3f}",
            flush=True,
        )
        for n, v in sorted(med.items(), key=lambda kv: kv[1]):
            print(f"    {n:22s} {v:7.2f} us  {v / base:.3f}", flush=True)
    for name, line in LINES.items():
        rows = []
        for B, S, H, D in line:
            shape = shapes.RopeShape(B, S, H, D)
            nbytes = cases.KERNELS["split_rope"].bytes_moved(shape)
            med = timed(
                {"tiled_pdl": default, "add_pdl": add_pdl(2048, 4)},
                {"tiled_pdl": rope_sets(shape), "add_pdl": functools.partial(_flat_sets, shape)},
                nbytes,
            )
            rows.append({"label": shape.label, "bytes": nbytes, **med})
            print(f"  {shape.label}: {nbytes / 1e6:.1f} MB  {med}", flush=True)
        fits = {}
        for k in ("tiled_pdl", "add_pdl"):
            fit = scipy.stats.linregress([r["bytes"] for r in rows], [r[k] for r in rows])
            fits[k] = {
                "fixed_us": fit.intercept,
                "bw": 1e6 / fit.slope,
                "r2": fit.rvalue**2,
                "fixed_us_stderr": fit.intercept_stderr,
            }
            print(
                f"{name} {k}: t = {fit.intercept:.2f} (+-{fit.intercept_stderr:.2f}) us + bytes / "
                f"{1e-6 / fit.slope:.3f} TB/s (r2 {fit.rvalue**2:.5f}); "
                f"bw / copy bw {1e6 / fit.slope / copy_bw:.3f}",
                flush=True,
            )
        result["lines"][name] = {"rows": rows, "fits": fits}
    with open(out_path, "w") as f:
        json.dump(result, f, indent=1)


def plot(json_path, png_path):
    """Time against bytes for each head layout, with its fitted line, and the % of copy
    bandwidth a launch reaches against the bound that line sets."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    with open(json_path) as f:
        data = json.load(f)
    bw = data["copy_bandwidth"]
    fig, (ax_t, ax_p) = plt.subplots(1, 2, figsize=(12, 4.6))
    colors = {"H32_D64": "tab:blue", "H16_D128": "tab:orange"}
    for name, line in data["lines"].items():
        mb = np.array([r["bytes"] for r in line["rows"]]) / 1e6
        fit = line["fits"]["tiled_pdl"]
        grid = np.geomspace(mb.min(), mb.max(), 100)
        c = colors.get(name)
        for kind, marker in (("tiled_pdl", "o"), ("add_pdl", "x")):
            us = np.array([r[kind] for r in line["rows"]])
            ax_t.plot(mb, us, marker, color=c, label=f"{name} {kind}")
            ax_p.plot(mb, 100 * (mb * 1e6 / bw) / (us * 1e-6), marker, color=c,
                      label=f"{name} {kind}")  # fmt: skip
        model = fit["fixed_us"] + grid * 1e12 / fit["bw"]  # us: MB x 1e6 bytes / (bytes/s) x 1e6
        fitted = f"{fit['fixed_us']:.2f} us + bytes / {fit['bw'] / 1e12:.2f} TB/s"
        ax_t.plot(grid, model, "-", color=c, lw=0.8, label=f"{name}: {fitted}")
        ax_p.plot(grid, 100 * (grid * 1e6 / bw) / (model * 1e-6), "-", color=c, lw=0.8)
    for target, which in ((90, "D=64 target"), (95, "D=128 target")):
        ax_p.axhline(target, color="grey", ls=":", lw=0.8)
        ax_p.text(
            0.01,
            target + 0.5,
            which,
            fontsize=7,
            color="grey",
            transform=ax_p.get_yaxis_transform(),
        )
    suite = [
        (row["bytes"] / 1e6, 100 * row["bytes"] / bw / (row["us"]["tiled_pdl"] * 1e-6))
        for row in data["shapes"].values()
    ]
    ax_p.plot(*zip(*suite, strict=True), "ks", ms=4, mfc="none", label="tiled_pdl, suite shapes")
    ax_t.set(xscale="log", yscale="log", xlabel="bytes moved per launch (MB)",
             ylabel="cold-L2 device time (us)", title="one launch: time against bytes")  # fmt: skip
    ax_p.set(xscale="log", xlabel="bytes moved per launch (MB)", ylabel="% of 1 GiB copy bandwidth",
             title="% of copy bandwidth; lines: the bound of the fitted fixed cost")  # fmt: skip
    ax_t.legend(fontsize=7)
    ax_p.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(png_path, dpi=110)


if __name__ == "__main__":
    if sys.argv[1] == "--plot":
        plot(sys.argv[2], sys.argv[3])
    else:
        main(sys.argv[1])
