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

For each case it forks ``--procs`` processes per pinning mode (as asv's
forkserver does) and prints the per-process spread of the raw and calibrated
values. ``judge()`` then scores a mean the way ``ltx2k regress`` would, from
the ``--json`` rows (it is not called by ``main``): histories of ``runs`` runs
resampled from the measured processes are given to the change-point detector,
unchanged (false flags) and with a 10% step at HEAD or up to 4 commits before
it (detection within 3 commits).

Usage: python tools/experiments/host_calibration.py [--procs 16] [--json OUT]
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
    ("ada_values9", "slab", shapes.ADA_SHAPES[0]),
]
BATCH = 50  # calls per sample, as the asv timer's number
SAMPLES = 20


def _python_reference() -> None:
    # interpreter speed alone (no dispatcher, no driver): a second candidate reference
    x = 0
    for i in range(200):
        x += i * i


def child(case, pin: int | None = None) -> dict:
    if pin is not None:  # what asv run --cpu-affinity does in the benchmark process
        os.sched_setaffinity(0, {pin})
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
    case_s, cal_s, py_s = [], [], []
    for _ in range(SAMPLES):  # interleaved, so a drift inside the process hits both
        case_s.append(batch(timed.run))
        cal_s.append(batch(calibration))
        py_s.append(batch(_python_reference))
    return dict(
        pin=pin,
        case_us=statistics.median(case_s) * 1e6,
        calibration_us=statistics.median(cal_s) * 1e6,
        python_us=statistics.median(py_s) * 1e6,
        ratio=statistics.median(c / r for c, r in zip(case_s, cal_s, strict=True)),
        ratio_python=statistics.median(c / r for c, r in zip(case_s, py_s, strict=True)),
        samples_us=[c * 1e6 for c in case_s],
        calibration_samples_us=[r * 1e6 for r in cal_s],
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


def measure(procs: int, json_path: str | None) -> list[dict]:
    """Fork ``procs`` processes per case and pinning mode, alternating, and keep every result."""
    cpus = sorted(os.sched_getaffinity(0))
    pin_cpu = cpus[len(cpus) // 2]
    rows = []
    for case in CASES:
        got = []
        for i in range(2 * procs):  # unpinned and pinned alternate, so drift hits both alike
            pin = pin_cpu if i % 2 else None
            res = run_forked(functools.partial(child, case, pin))[0]
            if "case_us" in res:
                got.append(res)
            else:
                print(f"  process failed: {res}", file=sys.stderr)
        rows.append(dict(kernel=case[0], variant=case[1], shape=case[2].label, processes=got))
        for pinned in (False, True):
            sel = [g for g in got if (g["pin"] is not None) == pinned]
            raw = np.array([g["case_us"] for g in sel])
            print(
                f"{case[1]:14s} {case[2].label:18s} {'pinned' if pinned else 'free':6s} "
                f"raw {raw.min():6.1f}/{np.median(raw):6.1f}/{raw.max():6.1f} us  "
                + "  ".join(
                    f"{key} spread {spread_pct([g[key] for g in sel]):4.1f}%"
                    for key in ("case_us", "ratio", "ratio_python")
                ),
                flush=True,
            )
        if json_path:  # after every case: a time limit loses only the case it cut
            with open(json_path, "w") as f:
                json.dump(rows, f, indent=1)
    return rows


def spread_pct(values) -> float:
    log = np.log(np.asarray(values, dtype=float))
    return float(100 * 1.4826 * np.median(np.abs(log - np.median(log))))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--procs", type=int, default=12, help="processes per case and pinning mode")
    ap.add_argument("--json", help="write the per-process measurements here")
    args = ap.parse_args()
    if runtime.select_backend() != "cuda":
        print("host_calibration.py needs a CUDA device", file=sys.stderr)
        return 1
    measure(args.procs, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
