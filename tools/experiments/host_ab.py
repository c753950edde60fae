"""Interleaved A/B on calibrated host latency: is a 10% step seen, and do A/A pairs stay quiet?

Along a history of separate ``asv run``s the calibrated host latency moves by
about 3% between runs, because the processes of one run move together
(docs/history.md, "Host latency"). An interleaved A/B, as ``asv continuous
--interleave-rounds`` and ``ltx2k confirm`` run it, measures both sides in one
run, alternating process by process, so that shared component hits both
sides alike. This script measures whether that is enough for a 10% step.

The cells are those of ``track_host_calibrated``: the default variant at
``shapes.HOST_BOUND_SHAPES``. Every measuring process is forked (as the suite
forks them) and measures every cell once, so one process start serves all
cells; the cells of one process share its slowness, which makes their
verdicts correlated, never more optimistic.

- pilot processes measure each call's raw host time per call;
- the changed side B adds a busy-wait of ``--step`` (10%) of that pilot time to
  every call of a cell: a stand-in for a host-side regression of that size
  (an extra check or an extra Python frame per call) that needs no second build;
- ``--runs`` interleaved runs, each ``--procs`` processes of A, B and A' (the
  same code as A) in rotating order, each process one calibrated value per
  cell (``ltx2k.measure.host.calibrated_ratio``, as the benchmark computes it);
- each run and cell is judged as a commit-vs-commit pair: the ratio of the
  medians at least ``--min-step`` and a two-sided exact Mann-Whitney p below
  ``--alpha``. A vs B is a detection, A vs A' a possible false flag.

Resampling the processes of all runs into pairs of ``--procs`` per side gives
the same rates over many more trials (the processes of interleaved runs are
exchangeable within a cell, which is what interleaving buys). The detection
rate's 95% interval is Clopper-Pearson (``scipy.stats.binomtest``).

Usage (GPU): python tools/experiments/host_ab.py [--runs 3] [--procs 10] [--json OUT]
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
from scipy import stats  # noqa: E402

from ltx2k import runtime, shapes, variants  # noqa: E402
from ltx2k.analysis.significance import rank_test_can_reach  # noqa: E402
from ltx2k.analysis.thresholds import DEFAULT_ALPHA  # noqa: E402
from ltx2k.measure.forked import run_forked  # noqa: E402

CELLS = [(k, s.label) for k, shape_list in shapes.HOST_BOUND_SHAPES.items() for s in shape_list]
SIDES = ("A", "B", "A2")


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def _cell(kernel: str, label: str, delay_s: float) -> dict:
    from ltx2k.measure import host, suite

    shape = next(s for s in shapes.HOST_BOUND_SHAPES[kernel] if s.label == label)
    fn = suite._gated_fn(kernel, variants.DEFAULT_VARIANT[kernel], shape)  # as a caller gets it
    args = suite._args(kernel, shape)
    on_gpu = suite._on_gpu()  # the CPU interpreter runs it too, as a smoke test
    calls = suite.HOST_BATCH_GPU if on_gpu else 1

    def batch():
        for _ in range(calls):
            fn(*args)
            if delay_s > 0:
                _spin(delay_s)

    ratio = host.calibrated_ratio(
        batch, calls, on_gpu, suite.HOST_CALIBRATED_SAMPLES_GPU if on_gpu else 2
    )
    clock = host.HostClock(on_gpu)
    raw = []
    for _ in range(10):
        t0 = clock()
        batch()
        raw.append((clock() - t0) / calls)
    return {"ratio": ratio, "raw_us": statistics.median(raw) * 1e6}


def child(delays: dict) -> dict:
    """One process: every cell once, each call of a cell followed by its busy-wait."""
    t0 = time.perf_counter()
    out = {}
    for kernel, label in CELLS:
        out[f"{kernel} {label}"] = _cell(kernel, label, delays.get(f"{kernel} {label}", 0.0))
    return {"cells": out, "seconds": time.perf_counter() - t0}


def _one(delays: dict) -> dict:
    got, wall = run_forked(functools.partial(child, delays))
    if "cells" not in got:
        raise RuntimeError(f"a measuring process failed: {got.get('error')}")
    got["wall"] = wall
    return got


def flagged(a, b, min_step: float, alpha: float) -> tuple[bool, float, float]:
    """(flag, ratio of medians b/a, two-sided exact Mann-Whitney p)."""
    ratio = statistics.median(b) / statistics.median(a)
    p = float(stats.mannwhitneyu(b, a, alternative="two-sided", method="exact").pvalue)
    return (ratio >= min_step and p < alpha), ratio, p


def resampled(a_all, b_all, procs, min_step, alpha, trials=2000, seed=0) -> dict:
    rng = np.random.default_rng(seed)
    a_all, b_all = np.asarray(a_all), np.asarray(b_all)
    det = ff = 0
    for _ in range(trials):
        a = rng.choice(a_all, 2 * procs, replace=False)
        b = rng.choice(b_all, procs, replace=False)
        det += flagged(a[:procs], b, min_step, alpha)[0]
        ff += flagged(a[:procs], a[procs:], min_step, alpha)[0]
    return {"trials": trials, "detected": det / trials, "false_flags": ff / trials}


def _interval(k: int, n: int) -> list[float]:
    ci = stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact")
    return [ci.low, ci.high]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3, help="interleaved runs")
    ap.add_argument("--procs", type=int, default=10, help="processes per side and run")
    ap.add_argument("--step", type=float, default=0.10, help="injected host step (fraction)")
    ap.add_argument("--min-step", type=float, default=1.05, help="flag threshold (ratio)")
    ap.add_argument("--alpha", type=float, default=DEFAULT_ALPHA)
    ap.add_argument("--seconds", type=float, default=240, help="stop starting runs after this")
    ap.add_argument("--json", help="write every process's values here")
    ap.add_argument("--trials", type=int, default=2000, help="resampled pairs per cell (0: none)")
    a = ap.parse_args()
    for name in ("runs", "procs"):
        if getattr(a, name) < 1:
            ap.error(f"--{name} must be >= 1, got {getattr(a, name)}")
    if not rank_test_can_reach(a.procs, a.procs, a.alpha):
        ap.error(f"--procs {a.procs}: an exact rank test cannot reach alpha {a.alpha}")
    if not 0 < a.step < 10:
        ap.error(f"--step must be a fraction in (0, 10), got {a.step}")
    runtime.warm_before_fork()
    t_start = time.time()
    pilots = [_one({}) for _ in range(3)]
    keys = list(pilots[0]["cells"])
    raw = {k: statistics.median(p["cells"][k]["raw_us"] for p in pilots) for k in keys}
    delays = {k: a.step * raw[k] * 1e-6 for k in keys}
    for k in keys:
        print(f"{k}: raw {raw[k]:.2f} us/call, B adds {delays[k] * 1e6:.3f} us")
    print(f"process wall: {[round(p['wall'], 2) for p in pilots]} s", flush=True)
    out = {
        "procs": a.procs,
        "step": a.step,
        "min_step": a.min_step,
        "alpha": a.alpha,
        "pilot_raw_us": raw,
        "runs": [],
    }
    for r in range(a.runs):
        if time.time() - t_start > a.seconds:
            print("time budget spent; no more runs")
            break
        sides = {s: [] for s in SIDES}
        walls = []
        for i in range(a.procs):
            for side in SIDES[i % 3 :] + SIDES[: i % 3]:
                got = _one(delays if side == "B" else {})
                sides[side].append({k: v["ratio"] for k, v in got["cells"].items()})
                walls.append(got["wall"])
        run = {"sides": sides, "process_wall_s": statistics.median(walls), "cells": {}}
        for k in keys:
            va = [p[k] for p in sides["A"]]
            det, ratio_ab, p_ab = flagged(va, [p[k] for p in sides["B"]], a.min_step, a.alpha)
            ff, ratio_aa, p_aa = flagged(va, [p[k] for p in sides["A2"]], a.min_step, a.alpha)
            run["cells"][k] = {"detected": det, "ratio_ab": ratio_ab, "p_ab": p_ab}
            run["cells"][k].update(false_flag=ff, ratio_aa=ratio_aa, p_aa=p_aa)
            print(
                f"run {r} {k}: A/B {ratio_ab:.3f} p {p_ab:.2g} {'DETECTED' if det else 'missed'}; "
                f"A/A {ratio_aa:.3f} p {p_aa:.2g} {'FALSE FLAG' if ff else 'quiet'}",
                flush=True,
            )
        print(f"run {r}: median process wall {run['process_wall_s']:.2f} s", flush=True)
        out["runs"].append(run)
        if a.json:  # after every run: a run cut short by a time limit keeps what it measured
            with open(a.json, "w") as f:
                json.dump(out, f, indent=1)
    cells = [c for run in out["runs"] for c in run["cells"].values()]
    det = sum(c["detected"] for c in cells)
    ff = sum(c["false_flag"] for c in cells)
    summary = {
        "runs": len(out["runs"]),
        "cell_pairs": len(cells),
        "detected": det,
        "false_flags": ff,
        "seconds": time.time() - t_start,
    }
    if cells:
        summary["detected_ci95"] = _interval(det, len(cells))
    out["resampled"] = {}
    for k in keys:
        a_all = [p[k] for run in out["runs"] for s in ("A", "A2") for p in run["sides"][s]]
        b_all = [p[k] for run in out["runs"] for p in run["sides"]["B"]]
        if a.trials and len(a_all) >= 2 * a.procs and len(b_all) >= a.procs:
            out["resampled"][k] = resampled(
                a_all, b_all, a.procs, a.min_step, a.alpha, trials=a.trials
            )
            print(f"resampled {k}: {out['resampled'][k]}")
    out["summary"] = summary
    print("summary:", summary)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
