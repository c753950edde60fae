"""Where one asv benchmark process's time goes, on a GPU runner (the suite-cost question).

asv's forkserver imports the suite once and forks one process per benchmark x
params. This script does the same with the real suite module
(``benchmarks/bench_kernels.py``, whose import warms what it warms before
forking) for one cell of each kind of benchmark, and times, inside the forked
child, the benchmark's ``setup`` (CUDA context, first kernel call, inputs,
correctness gate, graph capture) and its samples (20, as the suite's
``repeat`` allows at most), plus the fork-to-reap wall time (which includes
tearing the context down), and the modules each child compiled from source (none
where Python has their bytecode). With ``--profile`` the last child of each cell runs under
cProfile and prints its most expensive calls (cumulative seconds).

Usage: python tools/experiments/process_cost.py [--profile N] [--json OUT]
asv's own per-benchmark overhead is not in here; compare the sum with an
``asv run`` wall time to see it.
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import importlib.util
import io
import json
import pstats
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def load_suite():
    path = ROOT / "benchmarks" / "bench_kernels.py"
    spec = importlib.util.spec_from_file_location("bench_kernels", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["bench_kernels"] = mod
    spec.loader.exec_module(mod)
    return mod


# (class, benchmark, params): one cell of each kind, the default variants and the peers.
CELLS = [
    ("SplitRope", "time_device_cold", ("blocked", "B1_S1024_H32_D128")),
    ("SplitRope", "time_device_cold", ("compiled", "B1_S1024_H32_D128")),
    ("SplitRope", "time_device_warm", ("eager", "B4_S25_H32_D64")),
    ("SplitRope", "time_host_latency", ("blocked", "B4_S25_H32_D64")),
    ("SplitRope", "time_host_latency", ("compiled", "B4_S25_H32_D64")),
    ("SplitRope", "time_host_launch", ("native", "B4_S25_H32_D64")),
    ("SplitRope", "time_kernel", ("blocked", "B1_S1024_H32_D128")),
    ("AdaValues9", "time_device_cold", ("slab_dconst", "B1_S1_D4096_bf16")),
    ("AdaValues9", "time_device_cold", ("compiled", "B2_S6144_D4096_bf16")),
    ("AdaValues9", "time_host_latency", ("eager", "B1_S1_D4096_bf16")),
    ("AdaValues9", "time_kernel", ("slab_dconst", "B1_S1_D4096_bf16")),
    ("AdaValues9", "time_kernel", ("compiled", "B1_S1_D4096_bf16")),
    # allocations: every cell of both kernels counted in one setup_cache process (its
    # time is "setup" here), then each cell's process reads its count
    ("AdaValues9", "track_allocations", ("slab", "B1_S1024_D4096_bf16")),
]


def _setup_of(cls, name):
    fn = getattr(cls, name)
    return getattr(fn, "setup", None) or getattr(cls, "setup", None)


def _count_compiles_from_source() -> list:
    """Record (path, seconds) of each module this process compiles from source from now on.

    What a runner without bytecode (``PYTHONDONTWRITEBYTECODE``, no ``__pycache__``) pays at
    every import, in every process (ltx2k/bytecode.py); with bytecode the list stays empty.
    """
    import importlib.machinery

    seen = []
    loader = importlib.machinery.SourceFileLoader
    original = loader.source_to_code

    def counted(self, data, path, *args, **kwargs):
        t0 = time.perf_counter()
        code = original(self, data, path, *args, **kwargs)
        seen.append((path, time.perf_counter() - t0))
        return code

    loader.source_to_code = counted
    return seen


def child(suite, cls_name, name, params, profile_lines) -> dict:
    cls = getattr(suite, cls_name)
    bench = cls()
    compiled = _count_compiles_from_source()
    prof = cProfile.Profile() if profile_lines else None
    if prof:
        prof.enable()
    t = [time.perf_counter()]
    setup_cache = getattr(getattr(cls, name), "setup_cache", None)
    if setup_cache is not None:  # asv runs it in a process of its own, once per commit
        params = (setup_cache(), *params)
    setup = _setup_of(cls, name)
    if setup is not None:
        setup(*params)
    t.append(time.perf_counter())
    body = getattr(bench, name)
    if name.startswith("track_"):
        body(*params)
    else:
        timer = cls.timer
        for _ in range(20):
            t0 = timer()
            body(*params)
            timer() - t0
    t.append(time.perf_counter())
    out = dict(
        setup=t[1] - t[0],
        body=t[2] - t[1],
        from_source=len(compiled),
        from_source_s=sum(s for _, s in compiled),
    )
    if prof:
        prof.disable()
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats("cumulative").print_stats(profile_lines)
        out["profile"] = s.getvalue()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", help="write the rows here")
    ap.add_argument("--profile", type=int, default=0, help="print each child's N costliest calls")
    ap.add_argument("--repeat", type=int, default=2, help="processes per cell")
    ap.add_argument(
        "--warm-torch-key",
        action="store_true",
        help="also compute inductor's torch_key() (a hash of torch's sources) before forking",
    )
    args = ap.parse_args()
    t0 = time.perf_counter()
    suite = load_suite()  # what asv's forkserver does once: imports, warm_before_fork
    print(f"suite import (the forkserver's, once): {time.perf_counter() - t0:.2f} s", flush=True)
    if args.warm_torch_key:
        from torch._inductor.codecache import torch_key

        t0 = time.perf_counter()
        torch_key()
        print(f"torch_key() before forking: {time.perf_counter() - t0:.2f} s", flush=True)
    from ltx2k import runtime
    from ltx2k.measure.forked import run_forked

    cells = CELLS
    if not suite.ON_GPU:  # a smoke test of this script in the interpreter, at its shapes
        first = {c: getattr(suite, c).params[1][0] for c in ("SplitRope", "AdaValues9")}
        cells = [(c, n, (p[0], first[c])) for c, n, p in CELLS if p[0] != "compiled"]
    rows = []
    with runtime.context_keeper(suite.ON_GPU):  # as `ltx2k run` holds one
        for cls_name, name, params in cells:
            for i in range(args.repeat):
                lines = args.profile if i == args.repeat - 1 else 0  # the last, warmest process
                got, wall = run_forked(
                    functools.partial(child, suite, cls_name, name, params, lines)
                )
                row = dict(cls=cls_name, bench=name, params=list(params), wall=wall, **got)
                rows.append(row)
                print(
                    f"{cls_name:10s} {name:25s} {' '.join(params):32s} wall {wall:.2f}s  "
                    f"setup {got.get('setup', 0):.2f}  body {got.get('body', 0):.2f}  "
                    f"compiled from source {got.get('from_source', 0)} modules "
                    f"{got.get('from_source_s', 0):.2f}s"
                    + (f"  ERROR {got['error']}" if "error" in got else ""),
                    flush=True,
                )
                if row.get("profile"):
                    print(row["profile"], flush=True)
    print(f"median process wall {statistics.median(r['wall'] for r in rows):.2f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
