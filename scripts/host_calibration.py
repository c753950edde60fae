"""Can a 10% host-latency step be seen on a VM runner? Per-process spread, raw and calibrated.

Host latency on a VM runner moves between benchmark processes by up to ~2x
(docs/measurement.md), which hides any percent-level change. This script
measures which of three means makes it watchable:

- more processes per cell (the median of k per-process medians, as pyperf
  runs 20 processes by default);
- calibration: in the same process, interleaved with the case, time one
  reference call (one eager ``torch.add`` through the dispatcher and the
  launch path) and divide, so a process that is slow as a whole cancels;
- both.

For each case it forks ``--procs`` processes (as asv's forkserver does), then
judges every mean the way ``ltx2k regress`` would: histories of
``--runs`` runs resampled from the measured processes are given to the
change-point detector, unchanged (false flags) and with a 10% step at HEAD
or up to 4 commits before it (detection within 3 commits).

Usage: python scripts/host_calibration.py [--procs 16] [--runs 10] [--json OUT]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import sys
import time

os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")

import numpy as np  # noqa: E402

from ltx2k import runtime, shapes  # noqa: E402
from ltx2k.analysis import changepoint  # noqa: E402
from ltx2k.measure.forked import run_forked  # noqa: E402

CASES = [
    ("ada_values9", "slab_dconst", shapes.ADA_SHAPES[0]),
    ("ada_values9", "eager", shapes.ADA_SHAPES[0]),
    ("split_rope", "blocked_native", shapes.ROPE_SHAPES[3]),
    ("split_rope", "blocked", shapes.ROPE_SHAPES[0]),
]
BATCH = 50  # calls per sample, as the asv timer's number
SAMPLES = 20


def child(case) -> dict:
    import torch

    from ltx2k.measure import suite

    kernel, variant, shape = case
    timed = suite.prepare(kernel, variant, shape, "host")
    ref = torch.ones(16, device="cuda")

    def batch(fn) -> float:
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(BATCH):
            fn()
        torch.cuda.synchronize()
        return (time.perf_counter() - t0) / BATCH

    def calibration():
        torch.add(ref, ref, out=ref)

    for _ in range(5):
        batch(timed.run)
        batch(calibration)
    case_s, cal_s = [], []
    for _ in range(SAMPLES):  # interleaved, so a drift inside the process hits both
        case_s.append(batch(timed.run))
        cal_s.append(batch(calibration))
    return dict(
        case_us=statistics.median(case_s) * 1e6,
        calibration_us=statistics.median(cal_s) * 1e6,
        ratio=statistics.median(c / r for c, r in zip(case_s, cal_s, strict=True)),
    )


def judge(values: np.ndarray, runs: int, k: int, rng, trials: int = 400) -> dict:
    """False flags and 10%-step detection of histories built from per-process values.

    Each run of a history is the median of k values drawn from the measured
    processes (with replacement): what asv would store with k processes per cell.
    """

    def run_value() -> float:
        return float(np.median(rng.choice(values, size=k, replace=True)))

    # regress pools the noise of a GPU's cells of one metric; here the pool is
    # this case's own run-to-run spread, as if every cell were like it.
    pool = np.log([run_value() for _ in range(2000)])
    prior = changepoint.NoisePrior(float(1.4826 * np.median(np.abs(pool - np.median(pool)))), 30)
    false = detected = steps = 0
    for t in range(trials):
        hist = [run_value() for _ in range(runs)]
        false += bool(changepoint.detect(hist, prior=prior, min_effect=0.05).steps)
        back = t % 5  # 0..4 commits before HEAD
        at = runs - 1 - back
        stepped = [v * (1.10 if i >= at else 1.0) for i, v in enumerate(hist)]
        # detection within 3 commits: judged at HEAD = at + min(back, 2)
        head = at + min(back, 2) + 1
        found = changepoint.detect(stepped[:head], prior=prior, min_effect=0.05).steps
        steps += 1
        detected += any(abs(s.index - at) <= 1 for s in found)
    log = np.log(values)
    return dict(
        k=k,
        spread_pct=float(100 * 1.4826 * np.median(np.abs(log - np.median(log)))),
        false_flag_rate=false / trials,
        detected_10pct=detected / steps,
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--procs", type=int, default=16)
    ap.add_argument("--runs", type=int, default=10, help="runs per simulated history")
    ap.add_argument("--json")
    args = ap.parse_args()
    if runtime.select_backend() != "cuda":
        print("host_calibration.py needs a CUDA device", file=sys.stderr)
        return 1
    rng = np.random.default_rng(0)
    rows = []
    for case in CASES:
        got = [run_forked(functools.partial(child, case))[0] for _ in range(args.procs)]
        got = [g for g in got if "case_us" in g]
        raw = np.array([g["case_us"] for g in got])
        cal = np.array([g["ratio"] for g in got])
        row = dict(
            kernel=case[0],
            variant=case[1],
            shape=case[2].label,
            processes=got,
            judged={
                f"{name} x{k}": judge(vals, args.runs, k, rng)
                for name, vals in (("raw", raw), ("calibrated", cal))
                for k in (1, 3, 5)
            },
        )
        rows.append(row)
        print(
            f"{case[1]:14s} {case[2].label:18s} raw {raw.min():6.1f}/{np.median(raw):6.1f}/"
            f"{raw.max():6.1f} us  calibration "
            f"{np.median([g['calibration_us'] for g in got]):5.1f} us",
            flush=True,
        )
        for name, j in row["judged"].items():
            print(
                f"    {name:14s} spread {j['spread_pct']:5.1f}%  false flags "
                f"{j['false_flag_rate']:.3f}  10% step found {j['detected_10pct']:.3f}",
                flush=True,
            )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
