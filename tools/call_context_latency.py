"""Host latency and launch path of the kernels in the call contexts a serving process has.

For each kernel at decode shapes (where the host path is the call's cost), the default
variant is called in each context below; per context the tool prints the host latency per
call (median of 5 batches of 2,000 calls, one device sync per batch), the same in
calibrated units (per eager ``torch.add`` call, timed right after each batch in the same
process), which path the call took (``replay``: the native path; ``python``: the Python
launch; ``op``: the registered torch.library op) and whether the output is bit-identical
to the plain call's. Peers in the same contexts: the eager reference, and for AdaLN a grid
kernel of sglang's current design (one program per token row x parameter x column block,
written here from its description) launched through ``kernel[grid]``.

It reads only the public functions and the native sites' counters, so it also measures an
older checkout: ``PYTHONPATH=/path/to/old/checkout python tools/call_context_latency.py``.

Usage (GPU): python tools/call_context_latency.py [--json OUT] [--label NAME]
Put the table it prints in docs/measurement.md with its date and GPU.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import statistics
import sys
import time

import torch
import triton
import triton.language as tl

BATCHES, CALLS = 5, 2000
ADA_SHAPES = (
    ("B1_S1_D4096_bf16", 1, 1, 4096, "bf16"),
    ("B1_S1_D2048_bf16", 1, 1, 2048, "bf16"),
    ("B2_S1_D4096_fp32", 2, 1, 4096, "fp32"),
    ("B1_S126_D2048_bf16", 1, 126, 2048, "bf16"),
)
ROPE_SHAPES = (("B4_S25_H32_D64", 4, 25, 32, 64), ("B1_S126_H32_D64", 1, 126, 32, 64))


@triton.jit
def _ada_grid_kernel(
    temb_ptr,
    table_ptr,
    out_ptr,
    rows,
    hidden: tl.constexpr,
    table_stride: tl.constexpr,
    BLOCK: tl.constexpr,
):
    # sglang's current design: one program per (token row, parameter, column block); the
    # nine outputs are slices of one [9, rows, hidden] buffer.
    pid = tl.program_id(0)
    nblocks = tl.cdiv(hidden, BLOCK)
    row = pid // (9 * nblocks)
    p = (pid // nblocks) % 9
    cols = (pid % nblocks) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < hidden
    t = tl.load(temb_ptr + row * 9 * hidden + p * hidden + cols, mask=mask)
    w = tl.load(table_ptr + p * table_stride + cols, mask=mask)
    # eager: table + temb promotes to the wider dtype, then the result dtype is that
    v = w + t.to(w.dtype)
    tl.store(out_ptr + p * rows * hidden + row * hidden + cols, v, mask=mask)


def sglang_current_grid(table, timestep):
    B, S, nine_d = timestep.shape
    hidden = nine_d // 9
    rows = B * S
    out = torch.empty(
        (9, B, S, hidden),
        dtype=torch.promote_types(table.dtype, timestep.dtype),
        device=timestep.device,
    )
    block = min(triton.next_power_of_2(hidden), 1024)
    grid = (rows * 9 * triton.cdiv(hidden, block),)
    _ada_grid_kernel[grid](timestep, table, out, rows, hidden, table.stride(0), BLOCK=block)
    return out.unbind(0)


def _sites():
    sites = []
    for mod in ("ltx2k.kernels.rope", "ltx2k.kernels.adaln"):
        sites += list(getattr(importlib.import_module(mod), "_SITES", {}).values())
    return sites


def _hits() -> int:
    return sum(s.stats()[1] for s in _sites())


def _batch_seconds(fn, args, enter) -> float:
    """Seconds for CALLS calls in the context *enter*, one device sync at each end."""
    with enter():
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(CALLS):
            fn(*args)
        torch.cuda.synchronize()
        return time.perf_counter() - t0


def _timed(fn, args, enter) -> tuple[float, float]:
    """(median µs per call, median calls of torch.add per call) over BATCHES batches."""
    ref = torch.ones(16, device="cuda")
    us, units = [], []
    for i in range(BATCHES + 1):  # the first batch warms up
        batch = _batch_seconds(fn, args, enter)
        t1 = time.perf_counter()
        for _ in range(CALLS):
            torch.add(ref, ref, out=ref)
        torch.cuda.synchronize()
        t2 = time.perf_counter()
        if i:
            us.append(batch / CALLS * 1e6)
            units.append(batch / (t2 - t1))
    return statistics.median(us), statistics.median(units)


def _path(fn, args, enter) -> str:
    before = _hits()
    with enter():
        out = fn(*args)
    first = out[0] if isinstance(out, (tuple, list)) else out
    if first.grad_fn is not None:  # the registered op (whose own launch may replay)
        return "op"
    return "replay" if _hits() > before else "python"


def ab_rows(kernel, label, fn, base_args, weights, rounds: int) -> list[dict]:
    """Each model context against plain, side by side: per round one batch of each, in an
    order rotated every round; the ratio of each round's pair, median and quartiles."""
    chosen = (
        "plain",
        "Parameter, trainable, no_grad",
        "Parameter, trainable, inference_mode",
        "Parameter, frozen, grad mode on",
        "inference tensors, inference_mode",
    )
    ctxs = [c for c in contexts(base_args, weights) if c[0] in chosen]
    per = {name: [] for name, _, _ in ctxs}
    for r in range(rounds + 1):  # round 0 warms up
        order = ctxs[r % len(ctxs) :] + ctxs[: r % len(ctxs)]
        for name, args, enter in order:
            seconds = _batch_seconds(fn, args, enter)
            if r:
                per[name].append(seconds / CALLS * 1e6)
    out = []
    for name, _, _ in ctxs:
        ratios = sorted(a / b for a, b in zip(per[name], per["plain"], strict=True))
        q = statistics.quantiles(ratios, n=4)
        out.append(
            {
                "kernel": kernel,
                "shape": label,
                "context": name,
                "us": statistics.median(per[name]),
                "ratio": statistics.median(ratios),
                "q25": q[0],
                "q75": q[2],
                "rounds": rounds,
            }
        )
    return out


def _same(a, b) -> bool:
    a = a if isinstance(a, (tuple, list)) else (a,)
    b = b if isinstance(b, (tuple, list)) else (b,)
    return all(torch.equal(x, y) for x, y in zip(a, b, strict=True))


def contexts(args, weights: tuple[int, ...]):
    """(name, args, enter) for each context; *weights* the model's nn.Parameter arguments."""
    nothing = contextlib.nullcontext

    def as_param(trainable: bool):
        return tuple(
            torch.nn.Parameter(a.clone(), requires_grad=trainable) if i in weights else a
            for i, a in enumerate(args)
        )

    with torch.inference_mode():
        inference = tuple(a.clone() for a in args)
    stream = torch.cuda.Stream()
    return (
        ("plain", args, nothing),
        ("Parameter, trainable, no_grad", as_param(True), torch.no_grad),
        ("Parameter, trainable, inference_mode", as_param(True), torch.inference_mode),
        ("Parameter, frozen, grad mode on", as_param(False), nothing),
        ("inference tensors, inference_mode", inference, torch.inference_mode),
        ("non-default stream", args, lambda: torch.cuda.stream(stream)),
        ("torch.device('cuda') context", args, lambda: torch.device("cuda")),
        ("autocast bf16", args, lambda: torch.autocast("cuda", dtype=torch.bfloat16)),
        ("Parameter, trainable, grad mode on (autograd)", as_param(True), nothing),
    )


def graph_capture(fn, args) -> tuple[str, bool]:
    """The path a call takes inside torch.cuda.graph capture, and whether the replayed graph
    gives the plain call's bits."""
    expect = fn(*args)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fn(*args)  # warm the path on the capture stream
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    before = _hits()
    with torch.cuda.graph(graph):
        out = fn(*args)
    path = "replay" if _hits() > before else "python"
    graph.replay()
    torch.cuda.synchronize()
    return path, _same(out, expect)


def _write_json(args_ns, rows: list, **extra) -> None:
    if args_ns.json:
        with open(args_ns.json, "w") as f:
            gpu = torch.cuda.get_device_name()
            json.dump({"label": args_ns.label, "gpu": gpu, **extra, "rows": rows}, f, indent=1)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", help="write every row here")
    ap.add_argument("--label", default="", help="a name for this checkout in the output")
    ap.add_argument(
        "--ab",
        type=int,
        metavar="ROUNDS",
        default=0,
        help="instead: each model context against plain, ROUNDS interleaved rounds",
    )
    args_ns = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("call_context_latency: needs a CUDA GPU", file=sys.stderr)
        return 2
    import ltx2k
    from ltx2k.workload import cases, reference, shapes

    rows = []
    kernels = (
        (
            "ada_values9",
            ltx2k.ltx2_ada_values9,
            (0,),
            [
                (label, cases.ada_inputs(shapes.AdaShape(B, S, D, dt), "cuda", seed=1))
                for label, B, S, D, dt in ADA_SHAPES
            ],
            {
                "eager": reference.ada_values9_reference,
                "sglang current (grid)": sglang_current_grid,
            },
        ),
        (
            "split_rope",
            ltx2k.apply_ltx2_split_rotary_emb,
            (0,),
            [
                (label, cases.rope_inputs(shapes.RopeShape(B, S, H, D), "cuda", seed=1))
                for label, B, S, H, D in ROPE_SHAPES
            ],
            {"eager": reference.split_rotary_reference},
        ),
    )
    if args_ns.ab:
        rows = [
            row
            for kernel, fn, weights, cells, _ in kernels
            for label, base_args in cells
            for row in ab_rows(kernel, label, fn, base_args, weights, args_ns.ab)
        ]
        print(
            f"# {args_ns.label} {torch.cuda.get_device_name()}: each context / plain, "
            f"{args_ns.ab} interleaved rounds of {CALLS} calls"
        )
        print("| kernel | shape | context | µs/call | / plain (median) | quartiles |")
        print("|---|---|---|---:|---:|---|")
        for r in rows:
            print(
                f"| {r['kernel']} | {r['shape']} | {r['context']} | {r['us']:.1f} | "
                f"{r['ratio']:.3f} | {r['q25']:.3f}-{r['q75']:.3f} |"
            )
        _write_json(args_ns, rows)
        return 0
    for kernel, fn, weights, cells, peers in kernels:
        for label, base_args in cells:
            expect = fn(*base_args)
            for name, args, enter in contexts(base_args, weights):
                path = _path(fn, args, enter)
                with enter():
                    same = _same(fn(*args), expect)
                us, units = _timed(fn, args, enter)
                row = {
                    "kernel": kernel,
                    "shape": label,
                    "context": name,
                    "impl": "ltx2k",
                    "us": us,
                    "units": units,
                    "path": path,
                    "bitexact": same,
                }
                rows.append(row)
                for peer, pfn in peers.items():
                    if name not in (
                        "plain",
                        "Parameter, trainable, no_grad",
                        "Parameter, trainable, inference_mode",
                    ):
                        continue
                    with enter():
                        psame = _same(pfn(*args), expect)
                    pus, punits = _timed(pfn, args, enter)
                    rows.append(
                        {
                            "kernel": kernel,
                            "shape": label,
                            "context": name,
                            "impl": peer,
                            "us": pus,
                            "units": punits,
                            "path": "",
                            "bitexact": psame,
                        }
                    )
            path, same = graph_capture(fn, base_args)
            rows.append(
                {
                    "kernel": kernel,
                    "shape": label,
                    "context": "torch.cuda.graph capture",
                    "impl": "ltx2k",
                    "us": None,
                    "units": None,
                    "path": path,
                    "bitexact": same,
                }
            )
    print(
        f"# {args_ns.label} {torch.cuda.get_device_name()} torch {torch.__version__} "
        f"triton {triton.__version__}"
    )
    print("| kernel | shape | context | impl | µs/call | torch.add calls | path | bit-exact |")
    print("|---|---|---|---|---:|---:|---|---|")
    for r in rows:
        us = f"{r['us']:.1f}" if r["us"] is not None else "—"
        units = f"{r['units']:.2f}" if r["units"] is not None else "—"
        print(
            f"| {r['kernel']} | {r['shape']} | {r['context']} | {r['impl']} | {us} | {units} "
            f"| {r['path']} | {'yes' if r['bitexact'] else 'NO'} |"
        )
    _write_json(args_ns, rows, torch=torch.__version__)
    return 0


if __name__ == "__main__":
    sys.exit(main())
