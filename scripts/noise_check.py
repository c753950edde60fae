"""Run-to-run noise: compare the medians of two asv result sets of the same commit.

Usage: python scripts/noise_check.py RESULTS_A RESULTS_B [--min-us 10] [--json OUT]
Prints, per benchmark x params present in both, the relative difference of
the medians, and the worst case among those >= --min-us.
"""

from __future__ import annotations

import argparse
import json

from ltx2k.history.records import load_results


def medians(path):
    recs, _ = load_results(path)
    return {
        (r.machine, r.commit, r.benchmark, r.params): r.value
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
    rows = []
    for k in sorted(set(a) & set(b), key=str):
        rows.append(
            dict(
                benchmark=k[2],
                params=dict(k[3]),
                a_us=a[k] * 1e6,
                b_us=b[k] * 1e6,
                rel=abs(b[k] / a[k] - 1),
            )
        )
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
            json.dump(dict(rows=rows, worst=worst), f, indent=1)


if __name__ == "__main__":
    main()
