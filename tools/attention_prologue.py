"""The attention prologue on a GPU: correctness, device time against its peers, host latency.

What a developer reruns after touching ``ltx2k/kernels/rope_pair.py`` or
``ltx2k/kernels/qknorm_rope.py`` (the numbers in docs/kernels/attention_prologue.md):

1. every variant and launch path, bit-exact against its reference on random inputs at
   LTX-2's prologue shapes (self-attention with shared cos/sin, cross-attention with
   different q and k lengths);
2. how far the fused reference is from ``F.rms_norm`` + split RoPE (bf16 ulps, share of
   elements);
3. device time with a cold L2 (``triton.testing.do_bench``: the cache flushed before each
   call, median of the calls) of each variant and peer, side by side in one process;
4. host latency at decode (median of batches of back-to-back calls, one sync per batch).

    python tools/attention_prologue.py --json out.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import asdict, dataclass

import torch
import triton.testing

import ltx2k  # noqa: F401 - the lazy public API
from ltx2k.kernels import qknorm_rope, rope, rope_pair
from ltx2k.workload import reference

EPS = 1e-6


@dataclass(frozen=True)
class Case:
    label: str
    B: int
    Sq: int
    Sk: int
    H: int
    D: int
    shared: bool


CASES = (
    Case("video self B1 S6144 H32 D128", 1, 6144, 6144, 32, 128, True),
    Case("video self B2 S1536 H32 D128", 2, 1536, 1536, 32, 128, True),
    Case("video self B1 S1536 H32 D128", 1, 1536, 1536, 32, 128, True),
    Case("audio self B2 S251 H32 D64", 2, 251, 251, 32, 64, True),
    Case("a2v cross B1 Sq6144 Sk126 H32 D64", 1, 6144, 126, 32, 64, False),
    Case("v2a cross B1 Sq126 Sk6144 H32 D64", 1, 126, 6144, 32, 64, False),
    Case("video self B2 S15810 H32 D64", 2, 15810, 15810, 32, 64, True),
    Case("decode B1 S1 H32 D128", 1, 1, 1, 32, 128, True),
)


def make(case: Case, seed: int = 0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    B, H, D = case.B, case.H, case.D

    def x(S):
        return torch.randn((B, S, H * D), generator=g, device="cuda").to(torch.bfloat16)

    def angles(S):
        ang = torch.rand((B, S, H, D // 2), generator=g, device="cuda") * 6.2831853
        return ang.cos().to(torch.bfloat16).transpose(1, 2), ang.sin().to(torch.bfloat16).transpose(
            1, 2
        )

    q, k = x(case.Sq), x(case.Sk)
    q_cos, q_sin = angles(case.Sq)
    k_cos, k_sin = (q_cos, q_sin) if case.shared else angles(case.Sk)
    w = [
        (1 + 0.1 * torch.randn(H * D, generator=g, device="cuda")).to(torch.bfloat16)
        for _ in range(2)
    ]
    return q, k, w[0], w[1], q_cos, q_sin, k_cos, k_sin


def ulp_gap(a: torch.Tensor, b: torch.Tensor) -> tuple[int, float]:
    """Max distance in bf16 ulps (ordered bit patterns) and the share of unequal elements."""

    def ordered(t):
        i = t.view(torch.int16).to(torch.int32)
        return torch.where(i < 0, -(i & 0x7FFF), i)

    d = (ordered(a) - ordered(b)).abs()
    return int(d.max()), float((d != 0).float().mean())


def cold_us(fn) -> float:
    return 1000 * triton.testing.do_bench(fn, warmup=25, rep=200, return_mode="median")


def host_us(fn, calls: int = 2000, batches: int = 5) -> float:
    fn()
    torch.cuda.synchronize()
    per = []
    for _ in range(batches):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
        per.append((time.perf_counter() - t0) / calls * 1e6)
    return statistics.median(per)


def pair_fns(args):
    q, k, _, _, qc, qs, kc, ks = args
    pair = rope_pair.apply_ltx2_split_rotary_emb_pair
    fns = {
        f"pair {v}": (lambda v=v: pair(q, k, qc, qs, kc, ks, variant=v))
        for v in rope_pair.ACCEPTED_VARIANTS
    }
    fns["two single launches"] = lambda: (
        rope.apply_ltx2_split_rotary_emb(q, qc, qs),
        rope.apply_ltx2_split_rotary_emb(k, kc, ks),
    )
    fns["pair eager"] = lambda: reference.split_rope_pair_reference(q, k, qc, qs, kc, ks)
    fns["one single launch (q)"] = lambda: rope.apply_ltx2_split_rotary_emb(q, qc, qs)
    return fns


_COMPILED = {}


def compiled(fn):
    if fn not in _COMPILED:
        import torch._inductor.config as cfg

        cfg.emulate_precision_casts = True
        _COMPILED[fn] = torch.compile(fn, fullgraph=True, dynamic=False)
    return _COMPILED[fn]


def prologue_fns(args):
    q, k, qw, kw, qc, qs, kc, ks = args
    fns = {
        f"fused {v}": (lambda v=v: qknorm_rope.ltx2_qknorm_split_rope_pair(*args, EPS, variant=v))
        for v in qknorm_rope.ACCEPTED_VARIANTS
    }
    fns["unfused eager"] = lambda: reference.unfused_prologue(*args, EPS)
    fns["unfused compiled"] = lambda: compiled(reference.unfused_prologue)(*args, EPS)

    def norm_then_pair():
        h = (q.shape[-1],)
        qn = torch.nn.functional.rms_norm(q, h, qw, EPS)
        kn = torch.nn.functional.rms_norm(k, h, kw, EPS)
        return rope_pair.apply_ltx2_split_rotary_emb_pair(qn, kn, qc, qs, kc, ks)

    fns["rms_norm + ltx2k pair"] = norm_then_pair
    return fns


def check(case: Case, args, log) -> list[str]:
    failures = []
    q, k, qw, kw, qc, qs, kc, ks = args
    want = reference.split_rope_pair_reference(q, k, qc, qs, kc, ks)
    for (variant, launch), _ in sorted(rope_pair.CALLS.items()):
        for call in range(2):  # the native path records, then replays
            got = rope_pair.apply_ltx2_split_rotary_emb_pair(
                q, k, qc, qs, kc, ks, variant=variant, launch=launch
            )
            if not all(torch.equal(a, b) for a, b in zip(got, want, strict=True)):
                failures.append(f"pair {variant}/{launch} call {call} at {case.label}")
    want = reference.qknorm_split_rope_pair_reference(*args, EPS)
    for (variant, launch), _ in sorted(qknorm_rope.CALLS.items()):
        for call in range(2):
            got = qknorm_rope.ltx2_qknorm_split_rope_pair(
                *args, EPS, variant=variant, launch=launch
            )
            if not all(torch.equal(a, b) for a, b in zip(got, want, strict=True)):
                gaps = [ulp_gap(a, b) for a, b in zip(got, want, strict=True)]
                failures.append(f"fused {variant}/{launch} call {call} at {case.label}: {gaps}")
    unfused = reference.unfused_prologue(*args, EPS)
    gaps = [ulp_gap(a, b) for a, b in zip(want, unfused, strict=True)]
    log(f"  fused reference vs F.rms_norm + split RoPE: q {gaps[0]}, k {gaps[1]} (max ulps, share)")
    return failures


def sweep(args, row, log) -> None:
    """Time the tiled configurations' alternatives: tokens per program (the tile's
    elements) and warps, of the fused kernel and of the pair."""
    fused_tiled, pair_tiled = qknorm_rope.ALGORITHMS["tiled"], rope_pair.ALGORITHMS["tiled"]
    fused_tile, rope_tile = qknorm_rope.TILE_ELEMENTS, rope.TILE_ELEMENTS
    try:
        for name, tiled, fns, warp_counts in (
            ("fused", fused_tiled, prologue_fns, (4, 8, 16)),
            ("pair", pair_tiled, pair_fns, (8, 16, 32)),
        ):
            module = qknorm_rope if name == "fused" else rope_pair
            for tile in (2048, 4096, 8192):
                for warps in warp_counts:
                    qknorm_rope.TILE_ELEMENTS = rope.TILE_ELEMENTS = tile
                    module.ALGORITHMS["tiled"] = lambda *p, w=warps, t=tiled: t(*p)._replace(
                        num_warps=w
                    )
                    us = cold_us(fns(args)[f"{name} tiled"])
                    key = f"{name} tiled tile={tile} warps={warps}"
                    row["cold_us"][key] = us
                    log(f"  sweep {key}: {us:9.2f} us")
            module.ALGORITHMS["tiled"] = tiled
    finally:
        qknorm_rope.TILE_ELEMENTS, rope.TILE_ELEMENTS = fused_tile, rope_tile
        qknorm_rope.ALGORITHMS["tiled"], rope_pair.ALGORITHMS["tiled"] = fused_tiled, pair_tiled


def host_detail(log) -> dict:
    """Where a decode call's host time goes: the public functions against their native
    replays called directly, next to split RoPE's."""
    case = CASES[-1]
    q, k, qw, kw, qc, qs, kc, ks = make(case)
    out = {}
    pair = rope_pair.apply_ltx2_split_rotary_emb_pair
    fused = qknorm_rope.ltx2_qknorm_split_rope_pair
    pair(q, k, qc, qs, qc, qs)
    fused(q, k, qw, kw, qc, qs, qc, qs, EPS)
    rope.apply_ltx2_split_rotary_emb(q, qc, qs)
    pair_site = rope_pair._SITES["tiled_pdl", True]
    fused_site = qknorm_rope._site("tiled_pdl", True, EPS)
    rope_site = rope._SITES["tiled_pdl"]
    fns = {
        "single rope, public": lambda: rope.apply_ltx2_split_rotary_emb(q, qc, qs),
        "single rope, site.call": lambda: rope_site.call(q, qc, qs),
        "pair, public": lambda: pair(q, k, qc, qs, qc, qs),
        "pair, site.call": lambda: pair_site.call(q, k, qc, qs),
        "pair, lean": lambda: pair(q, k, qc, qs, qc, qs, launch="lean"),
        "fused, public": lambda: fused(q, k, qw, kw, qc, qs, qc, qs, EPS),
        "fused, site.call": lambda: fused_site.call(q, k, qw, kw, qc, qs),
        "plain check x6": lambda: rope_pair._plain(q, k, qc, qs, kc, ks),
        "torch.empty x2": lambda: (torch.empty(q.shape, dtype=q.dtype, device=q.device),
                                   torch.empty(k.shape, dtype=k.dtype, device=k.device)),
    }  # fmt: skip
    for name, fn in fns.items():
        out[name] = host_us(fn)
        log(f"  host {name:24s} {out[name]:7.2f} us")
    out["stats"] = {
        "pair": pair_site.stats(),
        "fused": fused_site.stats(),
        "rope": rope_site.stats(),
    }
    log(f"  native stats (entries, hits, misses): {out['stats']}")
    return out


def transforms(log) -> list[str]:
    """On CUDA: opcheck of both ops, gradients against eager autograd of the references,
    torch.compile(fullgraph=True), torch.export and a CUDA graph replay, each compared
    bit for bit with the reference."""
    failures = []
    for case in CASES:  # cross-attention (Sq != Sk); self-attention, shared cos/sin
        if "Sq6144 Sk126" in case.label or "audio self" in case.label:
            failures += _transforms_at(case, log)
    return failures


def _same(a, b) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a, b, strict=True))


def _transforms_at(case: Case, log) -> list[str]:
    from torch.library import opcheck

    failures = []
    same = _same
    sq, sk = (64, 64) if case.shared else (64, 48)
    small = Case(case.label, 1, sq, sk, case.H, case.D, case.shared)
    q, k, qw, kw, qc, qs, kc, ks = make(small)
    if small.shared:
        kc, ks = qc, qs
    for name, fn in (
        ("pair opcheck", lambda: opcheck(
            torch.ops.ltx2k.split_rope_pair.default, (q, k, qc, qs, kc, ks, "tiled_pdl", "auto"))),
        ("fused opcheck", lambda: opcheck(
            torch.ops.ltx2k.qknorm_split_rope_pair.default,
            (q, k, qw, kw, qc, qs, kc, ks, EPS, "tiled_pdl", "auto"))),
    ):  # fmt: skip
        try:
            fn()
            log(f"  {name} {small.label}: ok")
        except Exception as e:  # noqa: BLE001 - a failure is reported, the rest still runs
            failures.append(f"{name} at {small.label}: {type(e).__name__}: {e}")
    # gradients of every input against eager autograd through the reference
    for label, fn, ref, n in (
        ("pair", rope_pair.apply_ltx2_split_rotary_emb_pair,
         reference.split_rope_pair_reference, 6),
        ("fused", lambda *a: qknorm_rope.ltx2_qknorm_split_rope_pair(*a, EPS),
         lambda *a: reference.qknorm_split_rope_pair_reference(*a, EPS), 8),
    ):  # fmt: skip
        base = (q, k, qc, qs, kc, ks) if n == 6 else (q, k, qw, kw, qc, qs, kc, ks)
        grads = []
        for f in (fn, ref):
            leaves = {id(t): t.detach().clone().requires_grad_() for t in base}
            args = [leaves[id(t)] for t in base]
            out = f(*args)
            g = [torch.randn_like(o) for o in out] if not grads else grads[0][1]
            torch.autograd.backward(out, g)
            grads.append(([a.grad for a in args], g, out))
        ok = same(grads[0][2], grads[1][2]) and all(
            torch.equal(a, b) for a, b in zip(grads[0][0], grads[1][0], strict=True)
        )
        log(f"  {label} gradients {small.label}: {'ok' if ok else 'MISMATCH'}")
        if not ok:
            failures.append(f"{label} gradients at {small.label}")

    def prologue(q, k, qw, kw, qc, qs, kc, ks):
        a = rope_pair.apply_ltx2_split_rotary_emb_pair(q, k, qc, qs, kc, ks)
        b = qknorm_rope.ltx2_qknorm_split_rope_pair(q, k, qw, kw, qc, qs, kc, ks, EPS)
        return (*a, *b)

    args = (q, k, qw, kw, qc, qs, kc, ks)
    want = (
        *reference.split_rope_pair_reference(q, k, qc, qs, kc, ks),
        *reference.qknorm_split_rope_pair_reference(*args, EPS),
    )
    checks = {}
    checks["compile"] = lambda: torch.compile(prologue, fullgraph=True)(*args)

    class Block(torch.nn.Module):
        def forward(self, *a):
            return prologue(*a)

    def exported():
        ep = torch.export.export(Block(), args)
        targets = {str(n.target) for n in ep.graph.nodes if n.op == "call_function"}
        assert "ltx2k.split_rope_pair.default" in targets, targets
        assert "ltx2k.qknorm_split_rope_pair.default" in targets, targets
        return ep.module()(*args)

    checks["export"] = exported

    def graphed():
        static = [t.clone() for t in args]
        if small.shared:
            static[6], static[7] = static[4], static[5]
        prologue(*static)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            outs = prologue(*static)
        fresh = make(small, seed=7)
        for dst, src in zip(static, fresh, strict=True):
            if dst.data_ptr() not in {s.data_ptr() for s in static[:0]}:
                dst.copy_(src)
        g.replay()
        torch.cuda.synchronize()
        f = list(static)
        ref = (
            *reference.split_rope_pair_reference(f[0], f[1], f[4], f[5], f[6], f[7]),
            *reference.qknorm_split_rope_pair_reference(*f, EPS),
        )
        return outs, ref

    for name, fn in checks.items():
        try:
            got = fn()
            ok = same(got, want)
        except Exception as e:  # noqa: BLE001
            ok, got = False, e
        log(f"  {name} {small.label}: {'ok' if ok else f'FAILED {got!r}'[:300]}")
        if not ok:
            failures.append(f"{name} at {small.label}")
    try:
        outs, ref = graphed()
        ok = same(outs, ref)
    except Exception as e:  # noqa: BLE001
        ok = False
        log(f"  cuda graph: {e!r}")
    log(f"  cuda graph replay with new inputs {small.label}: {'ok' if ok else 'MISMATCH'}")
    if not ok:
        failures.append(f"cuda graph at {small.label}")
    return failures


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", help="write every number here")
    ap.add_argument("--cases", default="", help="comma-separated substrings of case labels")
    ap.add_argument("--no-time", action="store_true", help="correctness only")
    ap.add_argument(
        "--transforms", action="store_true", help="also opcheck, gradients, compile, export, graphs"
    )
    ap.add_argument(
        "--sweep", action="store_true", help="also time the fused tiled kernel's warp counts"
    )
    a = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("attention_prologue: needs a CUDA GPU", file=sys.stderr)
        return 2

    def log(msg):
        print(msg, flush=True)

    log(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}")
    wanted = [w for w in a.cases.split(",") if w]
    results, failures = [], []
    for case in CASES:
        if wanted and not any(w in case.label for w in wanted):
            continue
        log(f"{case.label}")
        args = make(case)
        failures += check(case, args, log)
        if a.no_time:
            continue
        row = {"case": asdict(case), "cold_us": {}, "host_us": {}}
        for name, fn in {**pair_fns(args), **prologue_fns(args)}.items():
            row["cold_us"][name] = cold_us(fn)
            if case.Sq == 1:
                row["host_us"][name] = host_us(fn)
        for name, us in row["cold_us"].items():
            host = row["host_us"].get(name)
            log(f"  {name:24s} {us:9.2f} us" + (f"   host {host:7.2f} us" if host else ""))
        if a.sweep:
            sweep(args, row, log)
        results.append(row)
    if a.transforms:
        failures += transforms(log)
    for f in failures:
        log(f"MISMATCH {f}")
    detail = host_detail(log) if a.sweep else None
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"failures": failures, "results": results, "host": detail}, fh, indent=1)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
