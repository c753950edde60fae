"""Host latency of asv's host cells, as asv measures them and side by side.

A `time_host_latency` cell is one asv process: the suite's own host clock
(``ltx2k.measure.suite.prepare(..., "host")``: batches of calls, one sync each) in a
process of its own. Between processes such a number moves by more than the differences
one wants to read at decode (docs/measurement.md, "Call contexts"). This tool times the
same cells

1. each in fresh processes, several times (the spread asv's single process hides), with
   the native replay's hits and misses of each process (a miss rate above the first
   call's one miss means the cell timed the Python launch path, not the replay);
2. all in one process, interleaved batch by batch (the comparison).

    python tools/host_cell_spread.py [--processes 4] [--batches 200] [CELL ...]

CELL is ``kernel:variant:shape``; by default the decode cells of split RoPE and of the
attention prologue. Put what it prints in docs/ with its date and GPU.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DECODE_CELLS = (
    "split_rope:tiled_pdl:B4_S25_H32_D64",
    "split_rope_pair:tiled_pdl:B4_Sq25_Sk25_H32_D64_shared",
    "split_rope_pair:tiled:B4_Sq25_Sk25_H32_D64_shared",
    "split_rope_pair:row:B4_Sq25_Sk25_H32_D64_shared",
    "split_rope_pair:two_launches:B4_Sq25_Sk25_H32_D64_shared",
    "qknorm_rope_pair:tiled_pdl:B4_Sq25_Sk25_H32_D64_shared",
)


def parse_cell(text: str) -> tuple[str, str, str]:
    from ltx2k.workload import cases

    parts = text.split(":")
    if len(parts) != 3:
        raise SystemExit(f"host_cell_spread: a cell is kernel:variant:shape, got {text!r}")
    kernel, variant, shape = parts
    if kernel not in cases.KERNELS:
        raise SystemExit(f"host_cell_spread: unknown kernel {kernel!r} in {text!r}")
    try:
        cases.find_shape(kernel, shape)
    except ValueError:
        raise SystemExit(f"host_cell_spread: {kernel} has no shape {shape!r}") from None
    return kernel, variant, shape


def native_counters() -> dict[str, list[int]]:
    """(entries, hits, misses) of every native site that was called in this process."""
    from ltx2k.kernels import adaln, qknorm_rope, rope, rope_pair

    out = {}
    for module in (rope, rope_pair, qknorm_rope, adaln):
        for key, site in module._SITES.items():
            entries, hits, misses = site.stats()
            if hits or misses:
                out[f"{module.__name__.rsplit('.', 1)[-1]}:{key}"] = [entries, hits, misses]
    return out


def time_cells(cells, batches: int) -> list[float]:
    """Median µs per call of each cell, its batches interleaved with the others'."""
    from ltx2k.measure import suite
    from ltx2k.workload import cases

    timed = [
        suite.prepare(kernel, variant, cases.find_shape(kernel, shape), "host")
        for kernel, variant, shape in cells
    ]
    per_cell: list[list[float]] = [[] for _ in cells]
    for _ in range(batches):
        for samples, t in zip(per_cell, timed, strict=True):
            before = t.timer()
            t.run()
            samples.append((t.timer() - before) * 1e6)
    return [statistics.median(s) for s in per_cell]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cells", nargs="*", default=list(DECODE_CELLS), help="kernel:variant:shape")
    ap.add_argument("--processes", type=int, default=4, help="fresh processes per cell")
    ap.add_argument("--batches", type=int, default=200, help="batches in the shared process")
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # a child process
    a = ap.parse_args(argv)
    if a.processes < 0 or a.batches < 1:
        ap.error("--processes must be >= 0 and --batches >= 1")
    cells = [parse_cell(c) for c in a.cells]
    if a.one:
        (us,) = time_cells(cells[:1], 60)
        print(json.dumps({"us": us, "native": native_counters()}))
        return 0
    import torch

    if not torch.cuda.is_available():
        print("host_cell_spread: needs a CUDA GPU", file=sys.stderr)
        return 2
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}")
    print(f"each cell in {a.processes} fresh processes (60 batches each), µs per call:")
    for text in a.cells:
        values, counters = [], {}
        for _ in range(a.processes):
            run = subprocess.run(
                [sys.executable, __file__, "--one", text], capture_output=True, text=True
            )
            if run.returncode != 0:
                print(f"  {text}: failed: {run.stderr.strip()[-300:]}")
                break
            got = json.loads(run.stdout.strip().splitlines()[-1])
            values.append(got["us"])
            counters = got["native"]
        if values:
            shown = " ".join(f"{v:6.2f}" for v in values)
            print(f"  {text:58s} {shown}   native (entries, hits, misses): {counters}")
    print(f"all in one process, {a.batches} interleaved batches, median µs per call:")
    for text, us in zip(a.cells, time_cells(cells, a.batches), strict=True):
        print(f"  {text:58s} {us:7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
