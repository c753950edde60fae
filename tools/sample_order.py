"""Where the slow samples of a suite's cells fall, over one or more asv results directories.

    python tools/sample_order.py RESULTS_DIR [RESULTS_DIR ...] [--positions 5] [--plot PNG]
        [--cells RESULTS_DIR=LOG ...] [--clocks RESULTS_DIR=CSV ...]

Per time metric: how many cells, and the share of them whose sample 0, 1, 2, ... lies more
than 10% above the cell's settled value (the median of its later half); then the cells
whose reported median lies more than 3% above their settled value; then, across the
directories (one run each), the readings of a cell that lie more than 5% above the cell's
median over the runs, by benchmark class and by run (:mod:`ltx2k.analysis.sample_order`).
``--exclude REGEX`` leaves out benchmarks whose code changed between the runs. ``--plot``
draws the shares by position, one line per metric.

``--cells DIR=LOG`` (a run's per-cell timestamps, ``tools/asv_cell_cost.py``) places that
across-runs reading in time: when each slow reading's process ran, and whether the slow
ones come closer together than chance (a permutation test). ``--clocks DIR=CSV`` (the
nvidia-smi log of the same run, ``tools/gpu_validation.sh`` with ``CELL_COST=1``) adds
the GPU's lowest SM clock and its clock-slowing reasons during each of those processes
(:mod:`ltx2k.analysis.run_timeline`). Put what it prints in docs/ with its date and GPUs.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ltx2k.analysis import sample_order  # noqa: E402
from ltx2k.history import records  # noqa: E402


def load(dirs: list[str]) -> list:
    out = []
    for d in dirs:
        try:
            recs, problems = records.load_results(d)
        except ValueError as e:
            raise SystemExit(f"sample_order: {e}") from None
        for p in problems:
            if p.kind not in records.QUIET_KINDS:
                print(f"sample_order: {d}: {p.message}", file=sys.stderr)
        out += recs
    return out


def plot(profiles: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 3.6), layout="constrained")
    for p in profiles.values():
        xs = range(len(p.share_high))
        ax.plot(xs, [100 * s for s in p.share_high], marker="o", label=f"{p.metric} ({p.cells})")
    ax.set_xlabel("sample position in the cell (asv's order)")
    ax.set_ylabel(f"% of cells > {sample_order.HIGH:.0%} above settled")
    ax.set_xticks(range(max(len(p.share_high) for p in profiles.values())))
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    fig.savefig(path, dpi=120)


def across(recs, a, exclude) -> None:
    """The cross-run reading of one metric, by benchmark class and by run."""
    picked = [
        r
        for r in recs
        if sample_order.metric_of(r) == a.metric and not (exclude and exclude.search(r.benchmark))
    ]
    compared, slow = sample_order.slow_processes(picked, min_runs=a.min_runs)
    readings = len(compared)
    if not readings:
        print(f"\nacross runs: no {a.metric} cell is in {a.min_runs} or more runs")
        return
    print(
        f"\nacross runs ({a.metric}, cells in >= {a.min_runs} runs): {len(slow)} of {readings} "
        f"readings ({100 * len(slow) / readings:.1f}%) settle > {sample_order.LEVEL:.0%} above "
        "the cell's median"
    )
    total = Counter(r.benchmark.split(".")[-2] for r in compared)
    by_class = Counter(r.benchmark.split(".")[-2] for _, r in slow)
    for name, n in sorted(total.items()):
        print(f"  {name:20s} {by_class.get(name, 0):4d} of {n}")
    by_run = Counter(_run_of(r, a.results) for _, r in slow)
    for d in a.results:
        print(f"  {d}: {by_run.get(d, 0)}")
    if a.cells:
        in_time(compared, slow, a)


def _read_lines(path: str, flag: str) -> list[str]:
    import gzip

    try:
        data = Path(path).read_bytes()
        return (gzip.decompress(data) if path.endswith(".gz") else data).decode().splitlines()
    except (OSError, EOFError, UnicodeDecodeError) as e:
        raise SystemExit(f"sample_order: {flag} {path}: cannot read it: {e}") from None


def in_time(compared, slow, a) -> None:
    """The across-runs reading placed in time: when each reading's process ran (--cells),
    whether the slow ones come together (a permutation test), and the GPU's clocks
    meanwhile (--clocks)."""
    from ltx2k.analysis import run_timeline
    from ltx2k.workload import variants

    kernel_of = {c: k for k, c in variants.ASV_CLASS.items()}
    ratio_of = {id(r): ratio for ratio, r in slow}
    runs, lines, unplaced = [], [], 0
    with_reason = [0, 0]  # readings whose process saw a clock-slowing reason; slow among them
    without = [0, 0]
    for d, log in a.cells.items():
        spans, skipped = run_timeline.process_spans(_read_lines(log, "--cells"))
        if skipped:
            print(
                f"sample_order: --cells {log}: {skipped} lines unreadable, skipped", file=sys.stderr
            )
        rows = None
        if d in a.clocks:
            try:
                rows, bad = run_timeline.read_clocks(
                    _read_lines(a.clocks[d], "--clocks"), a.utc_offset
                )
            except ValueError as e:
                raise SystemExit(f"sample_order: --clocks {a.clocks[d]}: {e}") from None
            if bad:
                print(
                    f"sample_order: --clocks {a.clocks[d]}: {bad} rows without a time",
                    file=sys.stderr,
                )
        mine = [r for r in compared if _run_of(r, a.results) == d]
        files = {r.path for r in mine}
        if len(files) > 1:
            raise SystemExit(
                f"sample_order: --cells {d}={log}: {d} holds {len(files)} result files (runs); "
                "a cell log belongs to one run: give each run its own results directory"
            )
        placed = []
        for r in mine:
            cls, metric = r.benchmark.split(".")[-2:]
            params = dict(r.params)
            key = (
                kernel_of.get(cls, cls),
                metric.removeprefix("time_"),
                params.get("variant"),
                params.get("shape"),
            )
            span = spans.get(key)
            if span is None:
                unplaced += 1
                continue
            clocks = run_timeline.clocks_during(rows, span.start, span.end) if rows else None
            placed.append((span.start, r, clocks))
        if not placed:
            continue
        t0 = min(t for t, _, _ in placed)
        runs.append(([t for t, _, _ in placed], [id(r) in ratio_of for _, r, _ in placed]))
        for t, r, clocks in placed:
            is_slow = id(r) in ratio_of
            if clocks is not None and clocks.rows:
                tally = with_reason if clocks.slowed else without
                tally[0] += 1
                tally[1] += is_slow
            if is_slow:
                params = ", ".join(v for _, v in r.params)
                seen = ""
                if clocks is not None:
                    seen = (
                        f"  SM >= {clocks.min_sm_mhz} MHz, "
                        f"{'+'.join(clocks.reason_names()) or 'no clock event'}"
                        if clocks.rows
                        else "  no clock row"
                    )
                text = f"{ratio_of[id(r)]:.3f}  {r.benchmark.split('.')[-2]} [{params}]{seen}"
                lines.append((d, t - t0, text))
    if not runs:
        print(f"\nin time: no reading of {a.metric} matched a process of --cells")
        return
    c = run_timeline.clustering(runs, gap=a.gap)
    print(
        f"\nin time ({sum(len(t) for t, _ in runs)} readings placed, {unplaced} not): "
        f"{c.close} of {c.slow} slow readings have another within {a.gap:g} s of them; "
        f"placed at random, {c.shuffled_median:g} (median of shuffles); p = {c.p:.3g}"
    )
    for d, t, text in sorted(lines):
        print(f"  {d}: {t:7.1f} s  {text}")
    if a.clocks:
        print(
            f"readings whose process saw a clock-slowing reason: {with_reason[0]}, "
            f"{with_reason[1]} of them slow; without one: {without[0]}, {without[1]} slow"
        )


def _run_of(r, dirs: list[str]) -> str:
    path = Path(r.path).resolve()
    for d in dirs:
        if Path(d).resolve() in path.parents:
            return d
    return r.path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="+", help="asv results directories")
    ap.add_argument("--positions", type=int, default=5, help="sample positions to show")
    ap.add_argument("--list", type=int, default=15, help="moved cells to list (largest first)")
    ap.add_argument("--plot", help="write the shares by position to this PNG")
    ap.add_argument("--metric", default="time_device_cold", help="the metric compared across runs")
    ap.add_argument("--exclude", help="leave out benchmarks matching this regex (across runs)")
    ap.add_argument("--min-runs", type=int, default=6, help="runs a cell needs (across runs)")
    ap.add_argument(
        "--cells",
        action="append",
        default=[],
        metavar="RESULTS_DIR=LOG",
        help="a results directory's per-cell timestamps (tools/asv_cell_cost.py; .gz read): "
        "places the across-runs reading in time",
    )
    ap.add_argument(
        "--clocks",
        action="append",
        default=[],
        metavar="RESULTS_DIR=CSV",
        help="a results directory's nvidia-smi clock log (tools/gpu_validation.sh, CELL_COST=1)",
    )
    ap.add_argument("--gap", type=float, default=5.0, help="seconds that count as together")
    ap.add_argument(
        "--utc-offset",
        type=float,
        default=0.0,
        help="the runner's offset from UTC in seconds (nvidia-smi writes local time)",
    )
    a = ap.parse_args(argv)
    for flag in ("cells", "clocks"):
        pairs = {}
        for item in getattr(a, flag):
            d, sep, f = item.partition("=")
            if not sep or not d or not f:
                ap.error(f"--{flag} takes RESULTS_DIR=FILE, got {item!r}")
            if d not in a.results:
                ap.error(f"--{flag} {item!r}: {d!r} is not one of the results directories given")
            if not Path(f).is_file():
                ap.error(f"--{flag} {item!r}: no file {f!r}")
            pairs[d] = f
        setattr(a, flag, pairs)
    if a.clocks and not a.cells:
        ap.error("--clocks needs --cells: the clock rows are placed by each cell's process")
    if not a.gap > 0:
        ap.error(f"--gap must be positive seconds, got {a.gap}")
    if a.positions < 1:
        ap.error(f"--positions must be at least 1, got {a.positions}")
    if a.list < 0:
        ap.error(f"--list must be 0 or more, got {a.list}")
    if a.min_runs < 2:
        ap.error(f"--min-runs must be at least 2, got {a.min_runs}")
    try:
        exclude = re.compile(a.exclude) if a.exclude else None
    except re.error as e:
        ap.error(f"--exclude {a.exclude!r} is not a regular expression: {e}")
    recs = load(a.results)
    profiles = sample_order.position_profile(recs, a.positions)
    if not profiles:
        print("sample_order: no time cell with enough samples", file=sys.stderr)
        return 1
    moved = sample_order.moved_cells(recs)
    n_moved = {}
    for _, r in moved:
        n_moved[sample_order.metric_of(r)] = n_moved.get(sample_order.metric_of(r), 0) + 1
    cols = " ".join(f"{i:>5d}" for i in range(a.positions))
    print(f"{'metric':20s} {'cells':>6s} {'moved':>6s}   % of cells slow at sample {cols}")
    for p in profiles.values():
        shares = " ".join(f"{100 * s:5.1f}" for s in p.share_high)
        print(f"{p.metric:20s} {p.cells:6d} {n_moved.get(p.metric, 0):6d}   {'':26s}{shares}")
    n = sum(p.cells for p in profiles.values())
    print(
        f"\nslow: > {sample_order.HIGH:.0%} above the cell's settled value (the median of its "
        f"later half);\nmoved: the reported median > {sample_order.TOL:.0%} above it "
        f"({len(moved)} of {n} cells). The {min(a.list, len(moved))} largest:"
    )
    for ratio, r in moved[: a.list]:
        params = ", ".join(v for _, v in r.params)
        base = r.value / ratio
        first = " ".join(f"{x / base:.2f}" for x in (r.samples or ())[:10] if x is not None)
        print(f"  {ratio:5.3f}  {r.machine} {r.commit[:8]} {r.benchmark} [{params}]")
        print(f"         first samples / settled: {first}")
    across(recs, a, exclude)
    if a.plot:
        plot(profiles, a.plot)
        print(f"\nplot: {a.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
