"""Where one `asv run` spends its time, cell by cell (the suite-cost question).

asv records one duration per benchmark, not per cell (benchmark x params), and every cell
is a process of its own. This tool measures each one in a real run:

    python tools/asv_cell_cost.py patch CLONE/benchmarks/bench_kernels.py
    CELL_LOG=cells.jsonl ltx2k run -- HEAD^!        # in that clone; never commit the patch
    python tools/asv_cell_cost.py report cells.jsonl

``patch`` wraps the suite's setup functions (before the classes bind them) so that each
call appends its name, arguments, start, end and pid to ``$CELL_LOG``. A cell's cost is
from its process's first setup call to the next process's: fork, CUDA context, inputs,
gate, samples, exit and asv's own bookkeeping.
"""

from __future__ import annotations

import argparse
import collections
import gzip
import importlib.util
import json
import sys
from pathlib import Path

# variants.py by path, as the suite loads it: the package's __init__ imports torch
_VARIANTS = Path(__file__).resolve().parent.parent / "ltx2k" / "workload" / "variants.py"
_spec = importlib.util.spec_from_file_location("ltx2k_variants", _VARIANTS)
_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_module)
COMPILED_VARIANTS = _module.COMPILED_VARIANTS

PATCH = """
import json as _cj, os as _co, time as _ct
_CELL_LOG = _co.environ.get("CELL_LOG")
if _CELL_LOG:
    def _cell_wrap(f, tag):
        @functools.wraps(f)
        def g(*a, **k):
            t0 = _ct.time()
            err = None
            try:
                return f(*a, **k)
            except BaseException as e:
                err = type(e).__name__
                raise
            finally:
                with open(_CELL_LOG, "a") as fh:
                    args = [str(x)[:60] for x in a if not isinstance(x, dict)]
                    fh.write(_cj.dumps([tag, args, t0, _ct.time(), _co.getpid(), err]) + "\\n")
        return g
    for _n in ("_prepare", "_host_launch_setup", "_host_calibrated_setup", "_counted_setup",
               "_track_setup", "_leave_cold_median", "_count_allocations"):
        if _n in globals():
            globals()[_n] = _cell_wrap(globals()[_n], _n)
"""
MARKER = "\nfor _kernel, _class_name in _VARIANTS.ASV_CLASS.items():"


def patch(path: Path) -> None:
    src = path.read_text()
    if MARKER not in src:
        sys.exit(f"{path}: no {MARKER.strip()!r} line to insert the timestamps before")
    path.write_text(src.replace(MARKER, "\n" + PATCH + MARKER, 1))


def report(log: Path) -> None:
    # the logs kept in docs/data are gzipped
    text = gzip.decompress(log.read_bytes()).decode() if log.suffix == ".gz" else log.read_text()
    rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    procs: dict[int, list] = {}
    for r in rows:
        procs.setdefault(r[4], []).append(r)
    order = sorted(procs.values(), key=lambda rs: min(r[2] for r in rs))
    cost = collections.defaultdict(lambda: [0, 0.0])
    for rs, nxt in zip(order, order[1:], strict=False):
        first = min(rs, key=lambda r: r[2])
        tag, args = first[0], first[1]
        # _prepare's arguments are (kernel, metric, variant, shape)
        key = " ".join(args[:3]) if tag == "_prepare" else " ".join([tag, *args[:2]])
        cost[key][0] += 1
        cost[key][1] += min(r[2] for r in nxt) - first[2]
    total = sum(s for _, s in cost.values())
    for key, (n, s) in sorted(cost.items(), key=lambda kv: -kv[1][1]):
        print(f"{key:55s} {n:4d} cells {s:7.1f} s  {s / n:.3f} s/cell")
    print(f"{len(order)} processes, {total:.1f} s from the first cell's start to the last's")
    # Per kernel, and the torch.compile peers' share: on a machine whose inductor cache is
    # empty each of their processes compiles its graph (docs/kernels/attention_prologue.md,
    # "The suite's cost, cell by cell").
    kernels = collections.defaultdict(lambda: [0, 0.0, 0, 0.0])
    for key, (n, s) in cost.items():
        words = key.split()
        kernel = words[1] if words[0].startswith("_") and len(words) > 1 else words[0]
        k = kernels[kernel]
        k[0] += n
        k[1] += s
        if any(w in COMPILED_VARIANTS for w in words):
            k[2] += n
            k[3] += s
    print(f"{'kernel':20s} {'processes':>9s} {'seconds':>8s}  torch.compile peers")
    for kernel, (n, s, nc, sc) in sorted(kernels.items(), key=lambda kv: -kv[1][1]):
        print(f"{kernel:20s} {n:9d} {s:8.1f}  {sc:.1f} s in {nc} processes")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("patch").add_argument("suite", type=Path)
    sub.add_parser("report").add_argument("log", type=Path)
    args = ap.parse_args(argv)
    if args.cmd == "patch":
        patch(args.suite)
    else:
        report(args.log)


if __name__ == "__main__":
    main()
