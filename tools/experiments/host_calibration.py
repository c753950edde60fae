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
values. ``--judge-history`` (no GPU) scores the calibrated metric the way
``ltx2k regress`` would, from asv runs of no-op commits: 20-run histories
resampled from their run-to-run residuals, unchanged (false flags) and with a
10% step at HEAD or up to 4 commits before it (detection within 3 commits).

Usage: python tools/experiments/host_calibration.py [--procs 12] [--json OUT]
       python tools/experiments/host_calibration.py --judge-history \
           docs/data/h200-2026-12-01b-host-history.json
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import sys
import time
from pathlib import Path

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


def judge_history(path: str, runs: int = 20, trials: int = 120, seed: int = 2) -> dict:
    """False flags and 10%-step detection, from the run-to-run residuals of measured histories.

    *path* holds asv runs of no-op commits (docs/data/h200-2026-12-01b-host-history.json,
    the forked measurements). Histories of *runs* runs for as many cells are resampled
    from the pooled residuals and judged as ``ltx2k regress`` does (noise pooled over
    the cells, minimum step 5%): unchanged (a false flag is any step), and with a 10%
    step at HEAD or up to 4 commits before it, found if some cut ending on the step's
    run or one of the next two reports it.
    """
    data = json.loads(Path(path).read_text())["runs"]
    cells = next(v for k, v in data.items() if k.startswith("forked"))
    logs = [np.log(list(c.values())) for c in cells.values()]
    # residuals about each cell's median, widened for the median fitted to them
    res = np.concatenate([x - np.median(x) for x in logs])
    res *= np.sqrt(len(logs[0]) / (len(logs[0]) - 1))
    rng = np.random.default_rng(seed)
    false = found = steps = 0
    for t in range(trials):
        hist = [list(np.exp(rng.choice(res, size=runs + 2))) for _ in logs]
        base = [h[:runs] for h in hist]
        prior = changepoint.pooled_noise(base)
        false += sum(bool(changepoint.detect(h, prior=prior, min_effect=0.05).steps) for h in base)
        at = runs - 1 - t % 5
        stepped = [[v * (1.10 if i >= at else 1.0) for i, v in enumerate(h)] for h in hist]
        for j in range(len(stepped)):
            steps += 1
            for cut in range(at + 1, at + 4):
                pr = changepoint.pooled_noise([x[:cut] for x in stepped])
                got = changepoint.detect(stepped[j][:cut], prior=pr, min_effect=0.05).steps
                if any(abs(z.index - at) <= 1 or z.last_good_index < at <= z.index for z in got):
                    found += 1
                    break
    return dict(
        residual_sd_pct=float(100 * res.std()),
        false_flag_rate=false / (trials * len(logs)),
        detected_10pct_within_3=found / steps,
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
    ap.add_argument(
        "--judge-history",
        metavar="JSON",
        help="no GPU: judge a stored no-op-commit history instead of measuring",
    )
    args = ap.parse_args()
    if args.judge_history:
        print(json.dumps(judge_history(args.judge_history), indent=1))
        return 0
    if runtime.select_backend() != "cuda":
        print("host_calibration.py needs a CUDA device", file=sys.stderr)
        return 1
    measure(args.procs, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
