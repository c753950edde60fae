"""Run-to-run noise: compare the medians of two asv result sets of the same commit.

Usage: python tools/experiments/noise_check.py RESULTS_A RESULTS_B [--min-us 10] [--bar 2]
                                              [--benchmarks GLOB] [--json OUT]
Compares, per benchmark x params measured in both runs (default: device time,
the metric the 2% run-to-run target in docs/measurement.md is about), the
relative difference of the medians;
prints the worst case among those >= --min-us and every cell over --bar %. Cells
not re-run in B (identical samples) are left out, by the same pairing as
``ltx2k power`` (ltx2k.analysis.detection_power.pair_runs).
"""

from __future__ import annotations

import argparse
import json
import sys

from ltx2k.analysis.detection_power import pair_runs
from ltx2k.history.records import load_results


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--min-us", type=float, default=10.0)
    ap.add_argument("--bar", type=float, default=2.0, help="list cells differing more (%%)")
    ap.add_argument("--benchmarks", default="*.time_device_*", help="fnmatch on the name")
    ap.add_argument("--json")
    args = ap.parse_args()
    try:
        machine, commit, pairs = pair_runs(
            load_results(args.a)[0],
            load_results(args.b)[0],
            benchmarks=args.benchmarks,
            min_value=0.0,
        )
    except ValueError as e:
        print(f"noise_check: {e}", file=sys.stderr)
        return 1
    rows = [
        dict(
            benchmark=a.benchmark,
            params=dict(a.params),
            a_us=a.value * 1e6,
            b_us=b.value * 1e6,
            rel=abs(b.value / a.value - 1),
        )
        for a, b in pairs
    ]
    big = [r for r in rows if r["a_us"] >= args.min_us]
    worst = max(big, key=lambda r: r["rel"]) if big else None
    print(f"{machine} @ {commit[:8]}: {len(rows)} re-run time benchmarks, ", end="")
    print(f"{len(big)} >= {args.min_us} us")
    if worst:
        print(
            f"worst >= {args.min_us} us: {worst['rel'] * 100:.2f}% "
            f"{worst['benchmark']} {worst['params']} "
            f"({worst['a_us']:.2f} vs {worst['b_us']:.2f} us)"
        )
        print(f"median rel diff: {sorted(r['rel'] for r in big)[len(big) // 2] * 100:.2f}%")
    over = sorted((r for r in big if r["rel"] * 100 > args.bar), key=lambda r: -r["rel"])
    print(f"{len(over)} of {len(big)} cells >= {args.min_us} us differ by more than {args.bar}%")
    for r in over:
        print(f"  {r['rel'] * 100:6.2f}%  {r['benchmark']} {r['params']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(machine=machine, commit=commit, rows=rows, worst=worst), f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
