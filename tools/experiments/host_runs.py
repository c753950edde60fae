"""Where the run-to-run spread of the calibrated host latency comes from: fork or the run.

A run of ``track_host_calibrated`` forks its measuring processes from one
parent, as asv's forkserver forks benchmarks. Forked children share their
parent's address-space layout, so their values may move together from run to
run, and the median of several of them then averages less than it seems. This
script starts ``--runs`` parents per mode, alternating:

- ``fork``: the parent forks ``--procs`` children (what the suite does);
- ``spawn``: each child is a fresh interpreter (new layout, new imports).

and prints, per mode, the spread inside a run and between run medians.

Usage: python tools/experiments/host_runs.py [--runs 6] [--procs 6] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")

CASE = ("ada_values9", "slab_dconst", 0)


def _child() -> float:
    from ltx2k import shapes
    from ltx2k.measure import suite

    return suite._calibrated_child(CASE[0], CASE[1], shapes.ADA_SHAPES[CASE[2]])["ratio"]


def _run(mode: str, procs: int) -> list[float]:
    if mode == "fork":
        from ltx2k.measure import forked

        return [forked.run_forked(lambda: {"r": _child()})[0]["r"] for _ in range(procs)]
    out = []
    for _ in range(procs):
        p = subprocess.run([sys.executable, __file__, "--child"], capture_output=True, text=True)
        out.append(float(p.stdout.strip().splitlines()[-1]))
    return out


def spread_pct(values) -> float:
    import numpy as np

    log = np.log(np.asarray(values, dtype=float))
    return float(100 * np.std(log, ddof=1))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=6)
    ap.add_argument("--procs", type=int, default=6)
    ap.add_argument("--json")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--run", choices=("fork", "spawn"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(_child())
        return 0
    if args.run:
        print(json.dumps(_run(args.run, args.procs)))
        return 0
    got: dict[str, list[list[float]]] = {"fork": [], "spawn": []}
    for _ in range(args.runs):
        for mode in got:  # alternating, so a drift of the machine hits both
            cmd = [sys.executable, __file__, "--run", mode, "--procs", str(args.procs)]
            p = subprocess.run(cmd, capture_output=True, text=True)
            got[mode].append(json.loads(p.stdout.strip().splitlines()[-1]))
            print(mode, [round(v, 3) for v in got[mode][-1]], flush=True)
    for mode, runs in got.items():
        within = statistics.median(spread_pct(r) for r in runs)
        between = spread_pct([statistics.median(r) for r in runs])
        print(
            f"{mode:5s} within a run {within:4.1f}%  between run medians {between:4.1f}% "
            f"(independent processes would give {within / args.procs**0.5 * 1.25:4.1f}%)"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(got, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
