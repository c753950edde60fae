"""What a benchmark process costs before and after its samples, forked as asv forks it.

Usage: python tools/process_floor.py OUT.json [--floor-only] (docs/measurement.md, "Suite cost").

Two questions, with a CUDA context kept open by `ltx2k.runtime.ContextKeeper` as in a run:

1. The floor: a child that creates a CUDA context and exits, in variants (1 byte; 256 MiB
   held by the caching allocator; the same released before exit; one hardware queue,
   ``CUDA_DEVICE_MAX_CONNECTIONS=1``). Each child reports when it started and when it was
   done; the parent notes when it reaped it, so the context's creation and its
   teardown at exit are measured apart.
2. The capture path: a cold-L2 cell prepared through ``ltx2k.measure.suite.prepare`` with
   its device metrics captured through ``kernel[grid]`` (the suite's path) or through the
   native or lean path. Every path launches the same compiled kernel with the same grid,
   so the graph's kernels must be the same: each child also dumps its graph's kernel
   nodes (name, grid, block, shared memory), and the parent compares them. Per child: the
   set-up's wall time, the time in the captured calls and in ending the capture, and the
   cold-L2 median of 20 replays. Children alternate between paths, 5 of each per cell.

Expected (written before it ran): the context 0.15-0.2 s and its teardown ~0.1 s, neither
moved by the variants beyond 0.02 s; capture through the native path saves ~0.15 s of
set-up at AdaLN's decode cells (1,000-1,700 calls), nothing at the others; identical
kernel nodes, and medians within the ±1.5% one process differs from another.
"""

import json
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

from ltx2k import runtime
from ltx2k.measure import forked

REPS = 5
FLOOR_MODES = ("context", "alloc_256mib", "alloc_then_free", "one_connection")
CELLS = [
    ("ada_values9", "slab_dconst", "B1_S1_D2048_bf16", "device_cold"),
    ("ada_values9", "slab_grid", "B1_S1_D4096_bf16", "device_cold"),
    ("ada_values9", "slab_dconst", "B2_S3_D2048_bf16", "kernel"),
    ("split_rope", "tiled_pdl", "B4_S25_H32_D64", "device_cold"),
    ("split_rope", "tiled_pdl", "B2_S1536_H32_D64", "device_cold"),
]
PATHS = ("triton", "native", "lean")


def _floor_child(mode):
    t0 = time.perf_counter()
    if mode == "one_connection":
        os.environ["CUDA_DEVICE_MAX_CONNECTIONS"] = "1"
    import torch

    torch.empty(1, device="cuda")
    torch.cuda.synchronize()
    t_ctx = time.perf_counter()
    if mode in ("alloc_256mib", "alloc_then_free"):
        big = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
        big.fill_(1)
        torch.cuda.synchronize()
        if mode == "alloc_then_free":
            del big
            torch.cuda.empty_cache()
    return {"start": t0, "context_s": t_ctx - t0, "done": time.perf_counter()}


def _kernel_nodes(graph, path):
    # torch writes the graph as Graphviz dot (verbose); a kernel node's label carries its
    # function, grid, block and shared memory, and its arguments, whose pointers differ
    # by design: addresses are masked.
    graph.debug_dump(path)
    text = Path(path).read_text()
    labels = [m for m in re.findall(r'label="(.*?)"', text, flags=re.S) if "KERNEL" in m]
    return [re.sub(r"0x[0-9a-fA-F]+", "0x_", m) for m in labels]


def _capture_child(kernel, variant, label, metric, path, dump):
    import torch

    from ltx2k.measure import suite
    from ltx2k.workload import cases

    spent = {"capture_calls": 0.0, "end_capture": 0.0}
    graphs = []
    begin, end = torch.cuda.CUDAGraph.capture_begin, torch.cuda.CUDAGraph.capture_end
    marks = {}

    def capture_begin(self, *a, **k):
        if dump:
            self.enable_debug_mode()  # keeps the captured graph, for debug_dump
        out = begin(self, *a, **k)
        marks[id(self)] = time.perf_counter()
        return out

    def capture_end(self):
        t = time.perf_counter()
        spent["capture_calls"] += t - marks.pop(id(self), t)
        out = end(self)
        spent["end_capture"] += time.perf_counter() - t
        graphs.append(self)
        return out

    torch.cuda.CUDAGraph.capture_begin, torch.cuda.CUDAGraph.capture_end = (
        capture_begin,
        capture_end,
    )
    t0 = time.perf_counter()
    shape = cases.find_shape(kernel, label)
    timed = suite.prepare(kernel, variant, shape, metric, launch=path)
    setup = time.perf_counter() - t0
    last = timed.timer()
    samples = []
    for _ in range(20):
        timed.run()
        now = timed.timer()
        samples.append(now - last)
        last = now
    nodes = []
    if dump and graphs:
        with tempfile.NamedTemporaryFile(suffix=".dot") as f:
            nodes = _kernel_nodes(graphs[0], f.name)
    return {
        "setup_s": setup,
        **spent,
        "graphs": len(graphs),
        "median_us": statistics.median(samples) * 1e6,
        "kernel_nodes": nodes,
    }


def main(out_path, floor_only=False):
    import functools

    import torch  # noqa: F401 - imported before forking, as asv's forkserver has it

    result = {"floor": {m: [] for m in FLOOR_MODES}, "capture": {}}
    with runtime.ContextKeeper():
        for _ in range(2 * REPS if floor_only else REPS):
            for mode in FLOOR_MODES:
                got, _ = forked.run_forked(functools.partial(_floor_child, mode))
                got["exit_s"] = time.perf_counter() - got.pop("done")
                result["floor"][mode].append(got)
        for mode, rows in result["floor"].items():
            ctx = statistics.median(r["context_s"] for r in rows)
            ex = statistics.median(r["exit_s"] for r in rows)
            print(f"floor {mode:16s} context {ctx:.3f} s  exit {ex:.3f} s", flush=True)
        for kernel, variant, label, metric in [] if floor_only else CELLS:
            key = f"{kernel} {variant} {label} {metric}"
            rows = {p: [] for p in PATHS}
            nodes = {}
            for p in PATHS:  # one child per path that dumps its graph, not timed
                fn = functools.partial(_capture_child, kernel, variant, label, metric, p, True)
                got, _ = forked.run_forked(fn)
                nodes[p] = got.get("kernel_nodes", got.get("error"))
            for _ in range(REPS):
                for p in PATHS:
                    fn = functools.partial(_capture_child, kernel, variant, label, metric, p, False)
                    got, wall = forked.run_forked(fn)
                    got["wall_s"] = wall
                    rows[p].append(got)
            result["capture"][key] = {"timed": rows, "same_nodes_as_triton": {}}
            print(key, flush=True)
            base = None
            for p, rs in rows.items():
                errs = [r["error"] for r in rs if "error" in r]
                if errs:
                    print(f"    {p}: {errs[0]}", flush=True)
                    continue
                med = {
                    k: statistics.median(r[k] for r in rs)
                    for k in ("wall_s", "setup_s", "capture_calls", "end_capture", "median_us")
                }
                base = base or med
                same = isinstance(nodes[p], list) and nodes[p] == nodes["triton"]
                result["capture"][key]["same_nodes_as_triton"][p] = same
                n = len(nodes[p]) if isinstance(nodes[p], list) else nodes[p]
                print(
                    f"    {p:7s} wall {med['wall_s']:.3f} s setup {med['setup_s']:.3f} s "
                    f"(captured calls {med['capture_calls']:.3f}, end {med['end_capture']:.3f}) "
                    f"median {med['median_us']:.3f} us "
                    f"({med['median_us'] / base['median_us']:.4f}) "
                    f"kernel nodes {n}, same as triton's: {same}",
                    flush=True,
                )
            if isinstance(nodes["triton"], list) and nodes["triton"]:
                print("    first node:", nodes["triton"][0][:400], flush=True)
    with open(out_path, "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1], floor_only="--floor-only" in sys.argv[2:])
