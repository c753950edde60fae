"""Interleaved A/B on calibrated host latency: is a 10% step seen, and do A/A pairs stay quiet?

Along a history of separate ``asv run``s the calibrated host latency moves by
about 3% between runs, because the processes of one run move together
(docs/history.md, "Host latency"). An interleaved A/B, as ``asv continuous
--interleave-rounds`` and ``ltx2k confirm`` run it, measures both sides in one
run, alternating process by process, so that shared component hits both
sides alike. This script measures whether that is enough for a 10% step.

Per case (the cells of ``track_host_calibrated``: the default variant at
``shapes.HOST_BOUND_SHAPES``):

- a pilot process measures the call's raw host time per call;
- the changed side B adds a busy-wait of ``--step`` (10%) of that pilot time to
  every call: a stand-in for a host-side regression of that size (an extra
  check or an extra Python frame per call) that needs no second build;
- ``--runs`` interleaved runs, each ``--procs`` processes of A, B and A' (the
  same code as A) in rotating order, each process one calibrated value
  (``ltx2k.measure.host.calibrated_ratio``, as the benchmark computes it);
- each run is judged as a commit-vs-commit pair: the ratio of the medians at
  least ``--min-step`` and a two-sided exact Mann-Whitney p below ``--alpha``
  (the report's defaults). A vs B is a detection, A vs A' a possible false flag.

Resampling the processes of all runs into pairs of ``--procs`` per side gives
the same rates over many more trials (the processes of interleaved runs are
exchangeable within a case, which is what interleaving buys).

Usage (GPU): python tools/experiments/host_ab.py [--runs 3] [--procs 8] [--json OUT]
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import statistics
import sys
import time

os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")

import numpy as np  # noqa: E402
from scipy import stats  # noqa: E402

from ltx2k import runtime, shapes, variants  # noqa: E402
from ltx2k.analysis.thresholds import DEFAULT_ALPHA, Thresholds  # noqa: E402
from ltx2k.measure.forked import run_forked  # noqa: E402


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def child(kernel: str, label: str, delay_s: float) -> dict:
    """One process: the calibrated ratio, with *delay_s* of busy-wait added to every call."""
    from ltx2k.measure import host, suite

    shape = next(s for s in shapes.HOST_BOUND_SHAPES[kernel] if s.label == label)
    variant = variants.DEFAULT_VARIANT[kernel]
    fn = suite._gated_fn(kernel, variant, shape)  # as a caller gets it; gated
    args = suite._args(kernel, shape)
    on_gpu = suite._on_gpu()  # the CPU interpreter runs it too, as a smoke test
    calls = suite.HOST_BATCH_GPU if on_gpu else 1

    if delay_s > 0:

        def batch():
            for _ in range(calls):
                fn(*args)
                _spin(delay_s)
    else:

        def batch():
            for _ in range(calls):
                fn(*args)

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


def _one(kernel, label, delay_s) -> dict:
    got, _ = run_forked(functools.partial(child, kernel, label, delay_s))
    if "ratio" not in got:
        raise RuntimeError(f"{kernel} {label}: a measuring process failed: {got.get('error')}")
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3, help="interleaved runs per case")
    ap.add_argument("--procs", type=int, default=8, help="processes per side and run")
    ap.add_argument("--step", type=float, default=0.10, help="injected host step (fraction)")
    ap.add_argument("--min-step", type=float, default=None, help="flag threshold (ratio)")
    ap.add_argument("--alpha", type=float, default=DEFAULT_ALPHA)
    ap.add_argument("--seconds", type=float, default=240, help="stop starting runs after this")
    ap.add_argument("--json", help="write every process's values here")
    a = ap.parse_args()
    for name in ("runs", "procs"):
        if getattr(a, name) < 1:
            ap.error(f"--{name} must be >= 1, got {getattr(a, name)}")
    if 2.0 / math.comb(2 * a.procs, a.procs) >= a.alpha:
        ap.error(f"--procs {a.procs}: an exact rank test cannot reach alpha {a.alpha}")
    min_step = a.min_step or Thresholds().step_for("SplitRope.track_host_calibrated")
    runtime.warm_before_fork()
    t_start = time.time()
    out = {"procs": a.procs, "step": a.step, "min_step": min_step, "alpha": a.alpha, "cases": []}
    for kernel, shape_list in shapes.HOST_BOUND_SHAPES.items():
        for shape in shape_list:
            pilot = statistics.median(_one(kernel, shape.label, 0.0)["raw_us"] for _ in range(3))
            delay = a.step * pilot * 1e-6
            case = {"kernel": kernel, "shape": shape.label, "pilot_raw_us": pilot, "runs": []}
            print(f"{kernel} {shape.label}: raw {pilot:.2f} us/call, B adds {delay * 1e6:.3f} us")
            for r in range(a.runs):
                if time.time() - t_start > a.seconds:
                    print("  time budget spent; no more runs")
                    break
                sides = {"A": [], "B": [], "A2": []}
                order = ["A", "B", "A2"]
                for i in range(a.procs):
                    rot = order[i % 3 :] + order[: i % 3]
                    for side in rot:
                        got = _one(kernel, shape.label, delay if side == "B" else 0.0)
                        sides[side].append(got["ratio"])
                det, ratio_ab, p_ab = flagged(sides["A"], sides["B"], min_step, a.alpha)
                ff, ratio_aa, p_aa = flagged(sides["A"], sides["A2"], min_step, a.alpha)
                case["runs"].append(
                    dict(
                        sides,
                        detected=det,
                        ratio_ab=ratio_ab,
                        p_ab=p_ab,
                        false_flag=ff,
                        ratio_aa=ratio_aa,
                        p_aa=p_aa,
                    )
                )
                print(
                    f"  run {r}: A/B ratio {ratio_ab:.3f} p {p_ab:.2g} "
                    f"{'DETECTED' if det else 'missed'}; A/A ratio {ratio_aa:.3f} p {p_aa:.2g} "
                    f"{'FALSE FLAG' if ff else 'quiet'}",
                    flush=True,
                )
            if case["runs"]:
                a_all = [v for run in case["runs"] for v in run["A"] + run["A2"]]
                b_all = [v for run in case["runs"] for v in run["B"]]
                if len(a_all) >= 2 * a.procs and len(b_all) >= a.procs:
                    case["resampled"] = resampled(a_all, b_all, a.procs, min_step, a.alpha)
                    print(f"  resampled: {case['resampled']}")
            out["cases"].append(case)
    runs = [r for c in out["cases"] for r in c["runs"]]
    out["summary"] = {
        "runs": len(runs),
        "detected": sum(r["detected"] for r in runs),
        "false_flags": sum(r["false_flag"] for r in runs),
        "seconds": time.time() - t_start,
    }
    print("summary:", out["summary"])
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
