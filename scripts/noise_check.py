"""Run-to-run noise: compare the medians of two asv result sets of the same commit.

Usage: python scripts/noise_check.py RESULTS_A RESULTS_B [--min-us 10] [--json OUT]
Prints, per benchmark x params present in both, the relative difference of
the medians, and the worst case among those >= --min-us.
"""

from __future__ import annotations

import argparse
import json
import sys

from ltx2k.history.records import load_results


def medians(path):
    recs, _ = load_results(path)
    return {
        (r.machine, r.commit, r.benchmark, r.params): (r.value, r.samples)
        for r in recs
        if r.value is not None and r.benchmark.rsplit(".", 1)[-1].startswith("time_")
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--min-us", type=float, default=10.0)
    ap.add_argument("--json")
    args = ap.parse_args()
    a, b = medians(args.a), medians(args.b)
    common = sorted(set(a) & set(b), key=str)
    # Identical raw samples mean the second run never replaced that result (a
    # timed-out or filtered run): comparing it with itself would report 0% noise.
    stale = [k for k in common if a[k][1] is not None and a[k][1] == b[k][1]]
    if stale:
        print(f"{len(stale)} benchmark(s) with identical samples in both runs (not re-run)")
    a = {k: v[0] for k, v in a.items()}
    b = {k: v[0] for k, v in b.items()}
    rows = []
    for k in [k for k in common if k not in set(stale)]:
        rows.append(
            dict(
                benchmark=k[2],
                params=dict(k[3]),
                a_us=a[k] * 1e6,
                b_us=b[k] * 1e6,
                rel=abs(b[k] / a[k] - 1),
            )
        )
    if not rows:
        print("no benchmark was measured in both runs", file=sys.stderr)
        return 1
    big = [r for r in rows if r["a_us"] >= args.min_us]
    worst = max(big, key=lambda r: r["rel"]) if big else None
    print(f"{len(rows)} common time benchmarks, {len(big)} >= {args.min_us} us")
    if worst:
        print(
            f"worst >= {args.min_us} us: {worst['rel'] * 100:.2f}% "
            f"{worst['benchmark']} {worst['params']} "
            f"({worst['a_us']:.2f} vs {worst['b_us']:.2f} us)"
        )
        print(f"median rel diff: {sorted(r['rel'] for r in big)[len(big) // 2] * 100:.2f}%")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(rows=rows, worst=worst, not_rerun=len(stale)), f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
