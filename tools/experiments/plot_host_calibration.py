"""Plot the calibrated host-latency data in docs/data: per process, and along no-op commits.

Usage: python tools/experiments/plot_host_calibration.py [--out docs/img/h200-host-calibration.png]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "docs" / "data"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="docs/img/h200-host-calibration.png")
    args = ap.parse_args()
    procs = json.loads((DATA / "h200-2026-12-01b-host-calibration.json").read_text())
    hist = json.loads((DATA / "h200-2026-12-01b-host-history.json").read_text())["runs"]
    fig, (a, b) = plt.subplots(1, 2, figsize=(13, 4.6), gridspec_kw={"width_ratios": [1, 1.3]})
    rng = np.random.default_rng(0)
    for i, row in enumerate(procs):
        for j, (key, colour, label) in enumerate(
            (("case_us", "tab:grey", "raw"), ("ratio", "tab:blue", "calibrated"))
        ):
            v = np.array([p[key] for p in row["processes"]])
            x = i + (j - 0.5) * 0.35 + rng.uniform(-0.07, 0.07, len(v))
            a.scatter(
                x, 100 * (v / np.median(v) - 1), s=12, color=colour, label=label if i == 0 else None
            )
    a.set_xticks(range(len(procs)))
    a.set_xticklabels([f"{r['variant']}\n{r['shape']}" for r in procs], fontsize=8)
    a.axhline(0, color="black", lw=0.6)
    a.set_ylabel("process value vs the case's median (%)")
    a.set_title("per benchmark process (24 per case)")
    a.legend(loc="upper left", fontsize=8)
    forked = next(v for k, v in hist.items() if k.startswith("forked"))
    for name, cells in forked.items():
        commits = sorted(cells)  # no-op commits: their order does not matter here
        v = np.array([cells[c] for c in commits])
        label = " ".join(name.split()[1:]).replace("track_host_calibrated ", "")
        b.plot(range(len(v)), 100 * (v / np.median(v) - 1), marker="o", label=label)
    b.axhline(0, color="black", lw=0.6)
    for y in (-10, 10):
        b.axhline(y, color="tab:red", lw=0.8, ls="--")
    b.text(0, 10.5, "a 10% step", color="tab:red", fontsize=8)
    b.set_xlabel("asv run (one per no-op commit)")
    b.set_ylabel("calibrated host latency vs the cell's median (%)")
    b.set_title("calibrated, median of 6 forked processes, along 7 no-op commits")
    b.legend(fontsize=7, loc="lower right")
    fig.suptitle("Host latency on the H200 VM runner, 2026-12-01 (docs/history.md)", fontsize=10)
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
