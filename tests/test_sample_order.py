"""Where a cell's slow samples fall: ltx2k.analysis.sample_order and tools/sample_order.py,
over the partial and uneven samples real runners leave (missing, not finite, short)."""

from __future__ import annotations

import math
import statistics

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ltx2k.analysis import sample_order
from ltx2k.history.records import Record
from tools import sample_order as tool
from tools.synthetic_history import generate_history

COLD = "bench_kernels.SplitRope.time_device_cold"


def rec(
    samples, *, benchmark=COLD, value="median", params=(("variant", "tiled"),), path=""
) -> Record:
    if value == "median":
        finite = [x for x in samples or () if x is not None and math.isfinite(x)]
        value = statistics.median(finite) if finite else None
    return Record(
        machine="h200",
        commit="a" * 40,
        date=0,
        benchmark=benchmark,
        params=params,
        value=value,
        ci_99=None,
        q_25=None,
        q_75=None,
        samples=None if samples is None else tuple(samples),
        number=1,
        repeat=len(samples or ()),
        unit="seconds",
        env="env",
        path=path,
    )


def test_a_slow_first_sample_is_counted_at_position_zero_and_moves_nothing():
    samples = [1.3e-5] + [1e-5] * 19
    profile = sample_order.position_profile([rec(samples)], positions=4)
    assert profile["time_device_cold"].cells == 1
    assert profile["time_device_cold"].share_high == (1.0, 0.0, 0.0, 0.0)
    assert sample_order.moved_cells([rec(samples)]) == []


def test_a_transient_over_half_the_samples_moves_the_reported_median():
    samples = [1.2e-5] * 11 + [1e-5] * 9
    moved = sample_order.moved_cells([rec(samples)])
    assert len(moved) == 1
    ratio, r = moved[0]
    assert ratio == pytest.approx(1.2)
    assert r.samples == tuple(samples)


def test_a_missing_sample_keeps_the_position_of_the_others():
    samples = [None, 1.3e-5] + [1e-5] * 10
    profile = sample_order.position_profile([rec(samples)], positions=3)
    assert profile["time_device_cold"].share_high == (0.0, 1.0, 0.0)


def test_only_time_metrics_with_enough_samples_are_read():
    slow_first = [2.0] + [1.0] * 9
    records = [
        rec(slow_first, benchmark="bench_kernels.SplitRope.track_pct_copy_bandwidth"),
        rec([2.0, 1.0, 1.0]),  # too few samples for a later half
        rec(None),
        rec([math.nan] * 10),
        rec(slow_first, benchmark="bench_kernels.SplitRope.time_host_latency"),
    ]
    profile = sample_order.position_profile(records)
    assert list(profile) == ["time_host_latency"]
    assert profile["time_host_latency"].share_high[0] == 1.0


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: sample_order.position_profile([], positions=0), "positions"),
        (lambda: sample_order.position_profile([], high=0), "high"),
        (lambda: sample_order.moved_cells([], tol=-0.1), "tol"),
    ],
)
def test_bad_arguments_are_named(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_a_run_slow_from_first_sample_to_last_is_found_across_runs():
    # Inside its own cell the slow run looks steady; only the other runs show it.
    runs = [rec([1e-5] * 20, path=f"run{i}/a.json") for i in range(6)]
    runs.append(rec([1.2e-5] * 20, path="run6/a.json"))
    assert sample_order.moved_cells(runs) == []
    compared, slow = sample_order.slow_processes(runs)
    assert len(compared) == 7
    assert [(round(x, 6), r.path) for x, r in slow] == [(1.2, "run6/a.json")]
    # the same cell in too few runs is not compared
    assert sample_order.slow_processes(runs[4:]) == ([], [])
    with pytest.raises(ValueError, match="min_runs"):
        sample_order.slow_processes(runs, min_runs=1)


# What runners leave: samples missing, not finite, cells of any length, values failed.
_sample = st.one_of(
    st.none(),
    st.floats(min_value=1e-7, max_value=1e-2),
    st.sampled_from([math.nan, math.inf, 0.0]),
)
_metric = st.sampled_from(
    [COLD, "bench_kernels.SplitRopePair.time_host_latency", "bench_kernels.X.track_allocations"]
)
_cells = st.lists(st.tuples(st.lists(_sample, max_size=24), _metric, st.booleans()), max_size=12)


def _records(cells):
    return [rec(s, benchmark=b, value="median" if ok else None) for s, b, ok in cells]


@settings(max_examples=200, deadline=None)
@given(_cells, st.integers(min_value=1, max_value=8))
def test_profiles_count_every_readable_cell_once_and_shares_are_fractions(cells, positions):
    records = _records(cells)
    profile = sample_order.position_profile(records, positions)
    readable = [
        r
        for r in records
        if sample_order.is_time(r) and sample_order.settled(r.samples) is not None
    ]
    assert sum(p.cells for p in profile.values()) == len(readable)
    for p in profile.values():
        assert len(p.share_high) == positions
        assert all(0.0 <= s <= 1.0 for s in p.share_high)
    for ratio, r in sample_order.moved_cells(records):
        assert ratio > 1 + sample_order.TOL
        assert sample_order.is_time(r) and r.value is not None


@settings(max_examples=200, deadline=None)
@given(_cells, st.sampled_from([0.25, 2.0, 1024.0]))
def test_a_unit_change_changes_no_verdict(cells, scale):
    # A power of two scales every float exactly: the verdicts are ratios.
    records = _records(cells)
    scaled = [
        rec(
            None if r.samples is None else [None if x is None else x * scale for x in r.samples],
            benchmark=r.benchmark,
            value=None if r.value is None else r.value * scale,
        )
        for r in records
    ]
    assert sample_order.position_profile(scaled) == sample_order.position_profile(records)
    assert [round(x, 12) for x, _ in sample_order.moved_cells(scaled)] == [
        round(x, 12) for x, _ in sample_order.moved_cells(records)
    ]


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(st.lists(_sample, max_size=24), _metric, st.integers(0, 7)), max_size=30),
    st.integers(min_value=2, max_value=5),
)
def test_across_runs_every_cell_seen_often_enough_is_compared_once_per_run(cells, min_runs):
    records = [
        rec(s, benchmark=b, params=(("shape", f"S{run % 3}"),), path=f"run{run}/r.json")
        for s, b, run in cells
    ]
    compared, slow = sample_order.slow_processes(records, min_runs=min_runs)
    runs_of = {}
    for r in records:
        if sample_order.is_time(r) and sample_order.settled(r.samples) is not None:
            runs_of.setdefault((r.benchmark, r.params), set()).add(r.path)
    assert len(compared) == sum(len(v) for v in runs_of.values() if len(v) >= min_runs)
    assert all(any(r is c for c in compared) for _, r in slow)
    assert all(x > 1 + sample_order.LEVEL for x, _ in slow)


def test_the_tool_reads_results_and_draws_the_shares(tmp_path, capsys):
    h = generate_history(tmp_path / "h", n_commits=2, seed=5, machines=("h200",))
    png = tmp_path / "order.png"
    argv = [str(h.results_dir), "--positions", "3", "--plot", str(png), "--min-runs", "2"]
    assert tool.main(argv) == 0
    out = capsys.readouterr().out
    assert "time_device_cold" in out and "% of cells slow at sample" in out
    assert "across runs (time_device_cold, cells in >= 2 runs)" in out
    assert png.stat().st_size > 0
    with pytest.raises(SystemExit):
        tool.main([str(h.results_dir), "--exclude", "("])


def test_the_tool_names_a_directory_that_is_not_one(tmp_path):
    with pytest.raises(SystemExit, match="is not a directory"):
        tool.main([str(tmp_path / "nowhere")])
    with pytest.raises(SystemExit):
        tool.main([str(tmp_path), "--positions", "0"])


def _one_run_per_directory(tmp_path):
    """The synthetic history's two commits as two results directories, one run each."""
    import shutil

    h = generate_history(tmp_path / "h", n_commits=2, seed=5, machines=("h200",))
    files = sorted((h.results_dir / "h200").glob("*-*.json"))
    files = [f for f in files if f.name != "machine.json"]
    dirs = []
    for i, f in enumerate(files):
        d = tmp_path / f"run{i}"
        (d / "h200").mkdir(parents=True)
        shutil.copy(h.results_dir / "benchmarks.json", d)
        shutil.copy(h.results_dir / "h200" / "machine.json", d / "h200")
        shutil.copy(f, d / "h200")
        dirs.append(d)
    return h, dirs


def test_the_tool_places_the_across_runs_reading_in_time_and_against_the_clocks(tmp_path, capsys):
    import datetime as dt
    import json
    import re

    from ltx2k.history import records
    from ltx2k.workload import variants

    _, (d1, d2) = _one_run_per_directory(tmp_path)
    recs = records.load_results(str(d1))[0] + records.load_results(str(d2))[0]
    cold = [r for r in recs if sample_order.metric_of(r) == "time_device_cold"]
    compared, _ = sample_order.slow_processes(cold, min_runs=2)
    placed = [r for r in compared if str(d2) in r.path]
    assert placed
    # one process per cell of the second run, 0.5 s apart, in the results' order
    t0, log, index = 1_796_586_000.0, [], {}
    for i, r in enumerate(placed):
        p = dict(r.params)
        cls = r.benchmark.split(".")[-2]
        kernel = {c: k for k, c in variants.ASV_CLASS.items()}[cls]
        key = [kernel, "device_cold", p["variant"], p["shape"]]
        log.append(json.dumps(["_prepare", key, t0 + 0.5 * i, t0 + 0.5 * i + 0.2, 100 + i, None]))
        index[id(r)] = i
    log.insert(3, '["_prepare", ["cut sh')  # a line a killed run left
    cells = tmp_path / "cells.jsonl"
    cells.write_text("\n".join(log) + "\n")
    # the clocks: a power cap from the row at the m-th process's end on, none before
    m = len(placed) // 3
    rows = ["timestamp, clocks.current.sm [MHz], clocks_event_reasons.active"]
    for k in range(2 * len(placed) + 2):
        t = t0 + 0.25 * k
        stamp = dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%Y/%m/%d %H:%M:%S.%f")[:-3]
        capped = k >= 2 * m + 2
        rows.append(f"{stamp}, {1500 if capped else 1980}, 0x{4 if capped else 0:016x}")
    clocks = tmp_path / "clocks.csv"
    clocks.write_text("\n".join(rows) + "\n")

    argv = [str(d1), str(d2), "--min-runs", "2", "--cells", f"{d2}={cells}"]
    assert tool.main([*argv, "--clocks", f"{d2}={clocks}"]) == 0
    out = capsys.readouterr()
    assert f"in time ({len(placed)} readings placed, 0 not)" in out.out
    assert "1 lines unreadable" in out.err
    got = re.search(r"clock-slowing reason: (\d+), (\d+) of them slow; without one: (\d+)", out.out)
    # process i spans [t0 + 0.5 i, t0 + 0.5 (i + 1)], the next one's start included: it
    # saw a capped row if i >= m
    assert got and int(got[1]) == len(placed) - m and int(got[3]) == m

    # what a wrong pairing of logs and directories gets: its own clear error
    with pytest.raises(SystemExit):  # argparse: a directory not among those given
        tool.main([str(d1), "--min-runs", "2", "--cells", f"{d2}={cells}"])
    with pytest.raises(SystemExit):
        tool.main([*argv[:4], "--cells", f"{d2}"])  # no '='
    with pytest.raises(SystemExit):
        tool.main([*argv, "--clocks", f"{d2}={tmp_path / 'none.csv'}"])  # no such file
    with pytest.raises(SystemExit):
        tool.main([str(d1), str(d2), "--min-runs", "2", "--clocks", f"{d2}={clocks}"])
    with pytest.raises(SystemExit):
        tool.main([*argv, "--gap", "0"])
    bad = tmp_path / "bad.csv"
    bad.write_text("clocks.sm\n1980\n")
    with pytest.raises(SystemExit, match="timestamp"):
        tool.main([*argv, "--clocks", f"{d2}={bad}"])


def test_a_cell_log_cannot_be_given_for_a_directory_of_several_runs(tmp_path):
    h = generate_history(tmp_path / "h", n_commits=2, seed=5, machines=("h200",))
    cells = tmp_path / "cells.jsonl"
    cells.write_text('["_prepare", ["split_rope", "device_cold", "tiled", "S"], 1, 2, 3, null]\n')
    d = str(h.results_dir)
    with pytest.raises(SystemExit, match="2 result files"):
        tool.main([d, "--min-runs", "2", "--cells", f"{d}={cells}"])
