"""The fused attention prologue at a hidden size of 4096: where its time goes, and tiles that
keep more bytes in flight, under the suite's cold-L2 clock, side by side in one process.

Usage: python tools/fused_norm_occupancy.py [--product] OUT.json
(docs/kernels/attention_prologue.md, "Offsets and occupancy"). ``--product`` times only the
product's two designs (``tiled_pdl``, ``row``) and the pair without the norm: the
comparison to repeat on a GPU after a change to the product's kernel.

Why: at B1_S6144_H32_D128 the fused kernel ran at 82.6% of copy bandwidth where the pair,
moving the same bytes without the norm, ran at 98.6% (H200, 2026-12-05). ptxas gives the
fused kernel's one-token, 8-warp program 153 registers: one program per SM, so each SM
loads a token (24 KiB of q, k and angles), waits, sums, and stores before it loads the
next. Expected (written before it ran): a tile whose offsets are a scalar token base plus
int32 offsets inside the token needs ~125 registers at 8 warps, two programs per SM, and
should run near the pair, ~62-65 us at B1_S6144 (1.1-1.2x over the product's ~73.5);
the same with k loaded only after q is stored (fewer registers, fewer bytes in flight)
somewhat slower; a persistent program per SM that loads token t+1 while it normalizes
token t and holds both weights in registers, level with the two-program tile. 16 warps at
one token: 64-77 registers, one or two programs per SM.

Every candidate is checked bit-exact against the fused reference first; a candidate that
is not is reported and left out.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys

import rope_launch_floor  # tools/, next to this file: its interleaved cold-L2 rounds
import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait

from ltx2k.kernels import qknorm_rope, rope_pair
from ltx2k.measure import bandwidth
from ltx2k.workload import cases, reference, shapes


@triton.jit
def _norm(x1, x2, w1, w2, hidden, EPS: tl.constexpr, N: tl.constexpr, LOG2N: tl.constexpr):
    # the reference's tree (ltx2k/kernels/_tiles.py pairwise_sum) over one token
    v = tl.reshape(x1 * x1 + x2 * x2, [N])
    for i in tl.static_range(LOG2N):
        v = tl.sum(tl.reshape(v, [N >> (i + 1), 2]), axis=1)
    ss = tl.sum(v, axis=0)
    var = tl.div_rn(ss, hidden.to(tl.float32))
    rstd = tl.div_rn(1.0, tl.sqrt_rn(var + EPS))
    y1 = ((x1 * rstd) * w1).to(tl.bfloat16).to(tl.float32)
    y2 = ((x2 * rstd) * w2).to(tl.bfloat16).to(tl.float32)
    return y1, y2


@triton.jit
def _token_frame(H, HALF, BLOCK_HEADS: tl.constexpr, BLOCK_HALF: tl.constexpr):
    # one token's hidden size, head and column indices, int32 offsets inside it, and mask
    heads = tl.arange(0, BLOCK_HEADS)
    cols = tl.arange(0, BLOCK_HALF)
    inner = (heads * (2 * HALF))[:, None] + cols[None, :]
    mask = (heads[:, None] < H) & (cols[None, :] < HALF)
    return H * 2 * HALF, heads, cols, inner, mask


@triton.jit
def _rot_store(out_ptr, at, y1, y2, c, sn, HALF, mask):
    c1 = (y1 * c).to(tl.bfloat16).to(tl.float32)
    c2 = (y2 * c).to(tl.bfloat16).to(tl.float32)
    tl.store(out_ptr + at, (c1 - y2 * sn).to(tl.bfloat16), mask=mask)
    tl.store(out_ptr + at + HALF, (c2 + y1 * sn).to(tl.bfloat16), mask=mask)


@triton.jit
def _token(q_ptr, k_ptr, q_w_ptr, k_w_ptr, cos_ptr, sin_ptr, q_out_ptr, k_out_ptr,
           S, H, HALF, scb, sch, scs, ssb, ssh, sss,
           EPS: tl.constexpr, BLOCK_HEADS: tl.constexpr, BLOCK_HALF: tl.constexpr,
           LOG2N: tl.constexpr, PDL: tl.constexpr, K_AFTER_Q: tl.constexpr):  # fmt: skip
    # One token of q and of k per program, shared cos/sin: the token's base is a scalar
    # (int64), the offsets inside it int32.
    if PDL:
        gdc_launch_dependents()
        gdc_wait()
    tok = tl.program_id(0).to(tl.int64)
    N: tl.constexpr = BLOCK_HEADS * BLOCK_HALF
    hidden, heads, cols, inner, mask = _token_frame(H, HALF, BLOCK_HEADS, BLOCK_HALF)
    base = tok * hidden
    b, s = tok // S, tok % S
    c_at = b * scb + s * scs + (heads * sch)[:, None] + cols[None, :]
    s_at = b * ssb + s * sss + (heads * ssh)[:, None] + cols[None, :]
    q1 = tl.load(q_ptr + base + inner, mask=mask, other=0.0).to(tl.float32)
    q2 = tl.load(q_ptr + base + inner + HALF, mask=mask, other=0.0).to(tl.float32)
    if not K_AFTER_Q:
        k1 = tl.load(k_ptr + base + inner, mask=mask, other=0.0).to(tl.float32)
        k2 = tl.load(k_ptr + base + inner + HALF, mask=mask, other=0.0).to(tl.float32)
    c = tl.load(cos_ptr + c_at, mask=mask, other=0.0).to(tl.float32)
    sn = tl.load(sin_ptr + s_at, mask=mask, other=0.0).to(tl.float32)
    w1 = tl.load(q_w_ptr + inner, mask=mask, other=0.0).to(tl.float32)
    w2 = tl.load(q_w_ptr + inner + HALF, mask=mask, other=0.0).to(tl.float32)
    y1, y2 = _norm(q1, q2, w1, w2, hidden, EPS, BLOCK_HEADS * BLOCK_HALF, LOG2N)
    _rot_store(q_out_ptr, base + inner, y1, y2, c, sn, HALF, mask)
    if K_AFTER_Q:
        k1 = tl.load(k_ptr + base + inner, mask=mask, other=0.0).to(tl.float32)
        k2 = tl.load(k_ptr + base + inner + HALF, mask=mask, other=0.0).to(tl.float32)
    w1 = tl.load(k_w_ptr + inner, mask=mask, other=0.0).to(tl.float32)
    w2 = tl.load(k_w_ptr + inner + HALF, mask=mask, other=0.0).to(tl.float32)
    y1, y2 = _norm(k1, k2, w1, w2, hidden, EPS, N, LOG2N)
    _rot_store(k_out_ptr, base + inner, y1, y2, c, sn, HALF, mask)


@triton.jit
def _persistent(q_ptr, k_ptr, q_w_ptr, k_w_ptr, cos_ptr, sin_ptr, q_out_ptr, k_out_ptr,
                S, H, HALF, n_tokens, step, scb, sch, scs, ssb, ssh, sss,
                EPS: tl.constexpr, BLOCK_HEADS: tl.constexpr, BLOCK_HALF: tl.constexpr,
                LOG2N: tl.constexpr, PDL: tl.constexpr, ITERS: tl.constexpr):  # fmt: skip
    # A program per SM over tokens pid, pid + programs, ...; token t+1's q and k are loaded
    # before token t is normalized, and the weights are loaded once.
    if PDL:
        gdc_launch_dependents()
        gdc_wait()
    pid = tl.program_id(0)  # step: the number of programs
    N: tl.constexpr = BLOCK_HEADS * BLOCK_HALF
    hidden, heads, cols, inner, mask = _token_frame(H, HALF, BLOCK_HEADS, BLOCK_HALF)
    c_in = (heads * sch)[:, None] + cols[None, :]
    s_in = (heads * ssh)[:, None] + cols[None, :]
    qw1 = tl.load(q_w_ptr + inner, mask=mask, other=0.0).to(tl.float32)
    qw2 = tl.load(q_w_ptr + inner + HALF, mask=mask, other=0.0).to(tl.float32)
    kw1 = tl.load(k_w_ptr + inner, mask=mask, other=0.0).to(tl.float32)
    kw2 = tl.load(k_w_ptr + inner + HALF, mask=mask, other=0.0).to(tl.float32)
    base = pid.to(tl.int64) * hidden
    m = mask & (pid < n_tokens)
    q1 = tl.load(q_ptr + base + inner, mask=m, other=0.0)
    q2 = tl.load(q_ptr + base + inner + HALF, mask=m, other=0.0)
    k1 = tl.load(k_ptr + base + inner, mask=m, other=0.0)
    k2 = tl.load(k_ptr + base + inner + HALF, mask=m, other=0.0)
    for i in range(0, ITERS):  # cdiv(n_tokens, programs)
        t = pid + i * step
        tok = t.to(tl.int64)
        base = tok * hidden
        nbase = base + step.to(tl.int64) * hidden
        nm = mask & (t + step < n_tokens)
        nq1 = tl.load(q_ptr + nbase + inner, mask=nm, other=0.0)
        nq2 = tl.load(q_ptr + nbase + inner + HALF, mask=nm, other=0.0)
        nk1 = tl.load(k_ptr + nbase + inner, mask=nm, other=0.0)
        nk2 = tl.load(k_ptr + nbase + inner + HALF, mask=nm, other=0.0)
        b, s = tok // S, tok % S
        here = mask & (t < n_tokens)
        c = tl.load(cos_ptr + b * scb + s * scs + c_in, mask=here, other=0.0).to(tl.float32)
        sn = tl.load(sin_ptr + b * ssb + s * sss + s_in, mask=here, other=0.0).to(tl.float32)
        y1, y2 = _norm(q1.to(tl.float32), q2.to(tl.float32), qw1, qw2, hidden, EPS, N, LOG2N)
        _rot_store(q_out_ptr, base + inner, y1, y2, c, sn, HALF, here)
        y1, y2 = _norm(k1.to(tl.float32), k2.to(tl.float32), kw1, kw2, hidden, EPS, N, LOG2N)
        _rot_store(k_out_ptr, base + inner, y1, y2, c, sn, HALF, here)
        q1, q2, k1, k2 = nq1, nq2, nk1, nk2


REGS: dict[str, int] = {}


def candidate(name, kind, warps, k_after_q=False, programs_per_sm=1, maxnreg=None):
    """A launcher with the fused prologue's signature (shared cos/sin only); ``maxnreg``
    caps the registers a thread may use (ptxas spills past it)."""

    def fn(q, k, qw, kw, qc, qs, kc, ks, eps):
        assert qc is kc and qs is ks
        B, S, hidden = q.shape
        H, half = qc.shape[1], qc.shape[3]
        n = B * S
        q_out, k_out = torch.empty_like(q), torch.empty_like(k)
        common = dict(
            EPS=eps,
            BLOCK_HEADS=triton.next_power_of_2(H),
            BLOCK_HALF=triton.next_power_of_2(half),
            LOG2N=(triton.next_power_of_2(H) * triton.next_power_of_2(half)).bit_length() - 1,
            PDL=q.is_cuda,
            num_warps=warps,
        )
        if q.is_cuda:
            common["launch_pdl"] = True
        if maxnreg:
            common["maxnreg"] = maxnreg
        strides = (*qc.stride()[:3], *qs.stride()[:3])
        ptrs = (q, k, qw, kw, qc, qs, q_out, k_out)
        if kind == "token":
            ck = _token[(n,)](*ptrs, S, H, half, *strides, K_AFTER_Q=k_after_q, **common)
        else:
            sms = torch.cuda.get_device_properties(q.device).multi_processor_count
            grid = (min(n, sms * programs_per_sm),)
            ck = _persistent[grid](
                *ptrs, S, H, half, n, grid[0], *strides, ITERS=triton.cdiv(n, grid[0]), **common
            )
        if name not in REGS and ck is not None and hasattr(ck, "n_regs"):
            REGS[name] = ck.n_regs
        return q_out, k_out

    return fn


def product_capped(maxnreg, warps=None):
    """The product kernel and its tiled_pdl configuration, launched with a register cap
    and/or another warp count."""

    def fn(q, k, qw, kw, qc, qs, kc, ks, eps):
        B, Sq, HD = q.shape
        Sk = k.shape[1]
        H, half = qc.shape[1], qc.shape[3]
        shared = qc is kc and qs is ks
        sms = torch.cuda.get_device_properties(q.device).multi_processor_count
        cfg = qknorm_rope._tiled_pdl(H, 2 * half, B * Sq, B * Sk, sms, shared)
        q_out, k_out = torch.empty_like(q), torch.empty_like(k)
        bh, bhalf = triton.next_power_of_2(H), triton.next_power_of_2(half)
        ck = qknorm_rope._qknorm_rope_pair_kernel[(cfg.q_programs + cfg.k_programs,)](
            q, k, qw, kw, qc, qs, kc, ks, q_out, k_out,
            Sq, Sk, H, half, B * Sq, B * Sk, cfg.q_programs,
            *qc.stride()[:3], *qs.stride()[:3], *kc.stride()[:3], *ks.stride()[:3],
            EPS=eps, BLOCK_HEADS=bh, BLOCK_HALF=bhalf, BLOCK_TOKENS=cfg.block_tokens,
            LOG2N=(bh * bhalf).bit_length() - 1, MODE=cfg.mode, PDL=True,
            num_warps=warps or cfg.num_warps, launch_pdl=True,
            **({'maxnreg': maxnreg} if maxnreg else {}),
        )  # fmt: skip
        name = product_name(maxnreg, warps)
        if name not in REGS and hasattr(ck, "n_regs"):
            REGS[name] = ck.n_regs
        return q_out, k_out

    return fn


def product_name(maxnreg, warps):
    parts = [f"w{warps}" if warps else "", f"maxnreg {maxnreg}" if maxnreg else ""]
    return " ".join(["product", *filter(None, parts)]) if any(parts) else "product direct"


def candidates(product_only: bool = False):
    fused = qknorm_rope.ltx2_qknorm_split_rope_pair
    pair = rope_pair.apply_ltx2_split_rotary_emb_pair
    out = {
        "product tiled_pdl": functools.partial(fused, variant="tiled_pdl"),
        "product row": functools.partial(fused, variant="row"),
        # the same bytes less the weights, no norm: the floor of this traffic
        "pair tiled_pdl (no norm)": lambda q, k, qw, kw, qc, qs, kc, ks, eps: pair(
            q, k, qc, qs, kc, ks
        ),
    }
    if product_only:
        return out
    for w in (2, 4, 8, 16):
        out[f"token w{w}"] = candidate(f"token w{w}", "token", w)
    out["token k-after-q w8"] = candidate("token k-after-q w8", "token", 8, True)
    out["product direct"] = product_capped(None)
    for r, w in ((128, None), (96, None), (None, 4), (128, 4)):
        out[product_name(r, w)] = product_capped(r, w)
    out["token w16 maxnreg 64"] = candidate("token w16 maxnreg 64", "token", 16, maxnreg=64)
    out["persistent x2 w8"] = candidate("persistent x2 w8", "persistent", 8, programs_per_sm=2)
    return out


SHAPES = (
    shapes.QKNormPairShape(1, 6144, 6144, 32, 128, shared=True),
    shapes.QKNormPairShape(2, 1536, 1536, 32, 128, shared=True),
    shapes.QKNormPairShape(1, 1536, 1536, 32, 128, shared=True),
    shapes.QKNormPairShape(1, 16384, 16384, 32, 128, shared=True),
    shapes.QKNormPairShape(2, 126, 126, 32, 64, shared=True),
    shapes.QKNormPairShape(4, 25, 25, 32, 64, shared=True),
    shapes.QKNormPairShape(1, 1, 1, 32, 128, shared=True),
    shapes.QKNormPairShape(1, 126, 126, 32, 64, shared=True),
    shapes.QKNormPairShape(1, 1, 1, 32, 64, shared=True),
)


def compiled_registers(fn) -> list[dict]:
    """Registers and spills of every binary of a ``@triton.jit`` function compiled so far
    (the product's launch paths compile it on their own)."""
    out = []
    for cache in getattr(fn, "device_caches", {}).values():
        kernels = cache[0] if isinstance(cache, tuple) else cache
        for ck in kernels.values():
            src = getattr(ck, "src", None)
            const = {}
            for key, v in (getattr(src, "constants", None) or {}).items():
                i = key[0] if isinstance(key, tuple) and len(key) == 1 else key
                name = fn.arg_names[i] if isinstance(i, int) and i < len(fn.arg_names) else i
                if isinstance(v, int | bool):
                    const[str(name)] = v
            out.append(
                {
                    "regs": getattr(ck, "n_regs", None),
                    "spills": getattr(ck, "n_spills", None),
                    "warps": ck.metadata.num_warps,
                    "constexprs": const,
                }
            )
    return out


def gate(cands, shape):
    args = cases.qknorm_pair_inputs(shape, "cuda", seed=11)
    want = reference.qknorm_split_rope_pair_reference(*args)
    kept = {}
    for name, fn in cands.items():
        if name.startswith("pair"):
            kept[name] = fn  # another function: timed for its bytes, not gated here
            continue
        try:
            got = fn(*args)
        except Exception as e:  # noqa: BLE001 - one candidate that does not compile
            print(f"    {name}: {e!r:.300}", flush=True)
            continue
        if all(torch.equal(a, b) for a, b in zip(got, want, strict=True)):
            kept[name] = fn
        else:
            print(f"    {name}: not bit-exact, dropped", flush=True)
    return kept


def timed(cands, shape):
    make_sets = functools.partial(cases.input_sets, "qknorm_rope_pair", shape, "cuda")
    nbytes = cases.qknorm_pair_bytes(shape)
    return rope_launch_floor.timed(cands, dict.fromkeys(cands, make_sets), nbytes)


def main(out_path, product_only: bool = False):
    copy_bw = bandwidth.copy_bandwidth(True)
    print(f"{torch.cuda.get_device_name()}: copy bandwidth {copy_bw / 1e12:.2f} TB/s", flush=True)
    rows = {}
    for shape in SHAPES:
        print(f"{shape.label}", flush=True)
        kept = gate(candidates(product_only), shape)
        us = timed(kept, shape)
        nbytes = cases.qknorm_pair_bytes(shape)
        base = us["product tiled_pdl"]
        rows[shape.label] = {}
        for name, t in sorted(us.items(), key=lambda kv: kv[1]):
            pct = 100 * nbytes / (t * 1e-6) / copy_bw
            regs = REGS.get(name)
            rows[shape.label][name] = {"us": t, "pct_copy_bw": pct, "regs": regs}
            print(
                f"    {name:28s} {t:8.2f} us  {pct:5.1f}% copy BW  "
                f"{base / t:5.3f}x product  regs {regs}",
                flush=True,
            )
    binaries = compiled_registers(qknorm_rope._qknorm_rope_pair_kernel)
    for b in binaries:
        print(f"product kernel binary: {b}", flush=True)
    with open(out_path, "w") as f:
        json.dump(
            {
                "device": torch.cuda.get_device_name(),
                "copy_bw": copy_bw,
                "rows": rows,
                "product_binaries": binaries,
            },
            f,
        )
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", default="fused_norm_occupancy.json", help="JSON out")
    parser.add_argument(
        "--product", action="store_true", help="only the product's designs and the pair"
    )
    args = parser.parse_args()
    sys.exit(main(args.out, args.product))
