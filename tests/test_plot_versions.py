"""The summary figures draw one version of a benchmark's code per line, and, where they
set GPUs side by side, one version on every GPU.

asv stores with each result the benchmark's version; results of two versions measured
different code. The records here are built in memory (the cell builder of
``test_series``), each (machine, commit) pair one result file with one version per
benchmark, as asv writes them.
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from ltx2k.report import plots
from ltx2k.report.plots import data
from ltx2k.report.plots.style import FLAG_COLOURS, FLAG_REGRESSION
from tests.test_series import rec

COLD = "bench_kernels.SplitRope.time_device_cold"
PCT = "bench_kernels.SplitRope.track_pct_copy_bandwidth"
SHAPE = "B1_S1024_H32_D128"
MACHINES = ("a100-sxm4-80gb", "h200")
VERSIONS = (None, "v1", "v2", "v3")


def cell(commit, at, value, version, *, machine="h200", variant="blocked", benchmark=COLD):
    """One result: *value* in seconds (None: failed) of benchmark version *version* at
    the *at*-th commit (its date)."""
    return replace(
        rec(commit, value, machine=machine, benchmark=benchmark),
        date=at,
        params=(("shape", SHAPE), ("variant", variant)),
        bench_version=version,
    )


# --- current_version ----------------------------------------------------------------------


@st.composite
def version_histories(draw):
    """Records of 1-2 machines over 1-8 commits, each machine measuring its own commits,
    with a version per result file that may change, change back, or be missing."""
    n = draw(st.integers(1, 8))
    commits = [f"{i:02d}" + "c" * 38 for i in range(n)]
    variants = draw(st.lists(st.sampled_from(("blocked", "per_head")), min_size=1, unique=True))
    records = []
    for machine in draw(st.lists(st.sampled_from(MACHINES), min_size=1, unique=True)):
        for at, c in enumerate(commits):
            if not draw(st.booleans()):
                continue  # this machine did not measure this commit
            version = draw(st.sampled_from(VERSIONS))
            for v in variants:
                value = draw(st.none() | st.floats(1e-6, 1e-3))
                records.append(cell(c, at, value, version, machine=machine, variant=v))
    shuffled = draw(st.permutations(records))
    return shuffled, commits


def _expected(records, commits, key):
    """The records a figure may draw, by the rule itself: per group, the version of the
    newest record that has one; a record without a version matches any."""
    newest = {}
    for r in sorted(records, key=lambda r: commits.index(r.commit)):
        if r.bench_version is not None:
            newest[key(r)] = r.bench_version
    return [
        r
        for r in records
        if r.bench_version is None
        or newest.get(key(r)) is None
        or r.bench_version == newest[key(r)]
    ]


@given(h=version_histories(), use_order=st.booleans())
def test_each_line_keeps_exactly_its_newest_version(h, use_order):
    records, commits = h
    order = commits if use_order else None  # dates alone place the commits too
    for key in (data.line_key, data.benchmark_key):
        kept = data.current_version(records, order, key=key)
        assert kept == _expected(records, commits, key)
        groups: dict = {}
        for r in records:
            groups.setdefault(key(r), []).append(r)
        for k, group in groups.items():
            mine = [r for r in kept if key(r) == k]
            assert len({r.bench_version for r in mine} - {None}) <= 1, (k, mine)
            if key is data.line_key:
                # A line's newest result is always drawn: its version is the line's.
                newest = max(group, key=lambda r: commits.index(r.commit))
                assert newest in mine


# --- the history figure -------------------------------------------------------------------


def _panel(fig, machine="h200"):
    return next(ax for ax in fig.axes if ax.get_title() == f"{machine} · {SHAPE}")


def _steps(ax) -> set[int]:
    """x of the regression-step marks drawn in the panel."""
    return {
        int(x)
        for ln in ax.get_lines()
        if ln.get_marker() == "v" and ln.get_color() == FLAG_COLOURS[FLAG_REGRESSION]
        for x in ln.get_xdata()
    }


def _line(ax):
    (line,) = [ln for ln in ax.get_lines() if ln.get_linestyle() == "-"]
    return [int(x) for x in line.get_xdata()], [float(y) for y in line.get_ydata()]


def _legend_texts(fig) -> set[str]:
    return {t.get_text() for legend in fig.legends for t in legend.get_texts()}


def _history(times_us, versions):
    commits = [f"{i:02d}" + "a" * 38 for i in range(len(times_us))]
    records = [
        cell(c, i, t * 1e-6, v)
        for i, (c, t, v) in enumerate(zip(commits, times_us, versions, strict=True))
    ]
    return plots.history(records, "split_rope", order=commits)


def test_a_change_of_benchmark_code_is_no_regression_step():
    """Old code at 10 µs, new code at 20 µs: one line of the new code's five runs,
    no step mark at the change."""
    fig = _history([10.0] * 5 + [20.0] * 5, ["old"] * 5 + ["new"] * 5)
    ax = _panel(fig)
    assert _steps(ax) == set()
    xs, ys = _line(ax)
    assert xs == [5, 6, 7, 8, 9] and ys == [20.0] * 5
    assert "older benchmark version not drawn" in _legend_texts(fig)


def test_a_step_within_one_version_is_marked_and_the_code_change_is_not():
    """New code from commit 4 on, slower by 2x at commit 8: the one step is at 8."""
    times = [5.0] * 4 + [10.0] * 4 + [20.0] * 4
    fig = _history(times, ["old"] * 4 + ["new"] * 8)
    ax = _panel(fig)
    assert _steps(ax) == {8}
    assert _line(ax)[0] == list(range(4, 12))
    # Without a change of code the figure is as before: the step marked, no note.
    same = _history(times, ["new"] * 12)
    assert _steps(_panel(same)) == {4, 8}
    assert "older benchmark version not drawn" not in _legend_texts(same)


def test_a_version_that_changes_back_draws_the_runs_of_the_newest_code():
    """v1, then v2, then v1 again (a reverted change), with runs of no version between:
    the v1 runs and the versionless ones are drawn, the v2 runs are not."""
    versions = ["v1", "v1", "v2", "v2", None, "v1", "v1"]
    fig = _history([10.0, 10.0, 30.0, 30.0, 10.0, 10.0, 10.0], versions)
    ax = _panel(fig)
    assert _line(ax) == ([0, 1, 4, 5, 6], [10.0] * 5)
    assert _steps(ax) == set()


# --- figures of GPUs side by side ---------------------------------------------------------


def _fleet():
    """h200 ran commits 0-9, its benchmark code changed at 5 (2x the time); the a100
    ran commits 0-4 only, all of the old code. Each run has cold times of two variants
    and their % of copy bandwidth (the a100's ceiling 1.5 TB/s, the h200's 4 TB/s)."""
    commits = [f"{i:02d}" + "b" * 38 for i in range(10)]
    nbytes = plots.comparisons.bytes_moved("split_rope", SHAPE)
    out = []
    for machine, ceiling, runs in (("h200", 4e12, range(10)), ("a100-sxm4-80gb", 1.5e12, range(5))):
        for i in runs:
            version = "new" if i >= 5 else "old"
            for variant, t in (("per_head", 20e-6), ("blocked", 10e-6)):
                t = t * (2 if i >= 5 else 1)
                pct = 100 * nbytes / t / ceiling
                out.append(cell(commits[i], i, t, version, machine=machine, variant=variant))
                out.append(
                    replace(
                        cell(commits[i], i, pct, version, machine=machine, variant=variant),
                        benchmark=PCT,
                        unit="%",
                    )
                )
    return out, commits


def test_gpus_side_by_side_show_one_version_and_name_the_gpu_left_out():
    """The a100's newest results are of the old code: the figures of each GPU's latest
    results draw the h200's alone and say the a100's older version is not drawn."""
    records, commits = _fleet()
    for fig in (
        plots.speedup(records, "split_rope", order=commits),
        plots.copy_bandwidth(records, "split_rope", order=commits),
        plots.roofline(records, "split_rope", order=commits),
    ):
        titles = [ax.get_title() for ax in fig.axes]
        assert titles == [f"h200 @ {commits[9][:8]}"], titles
        assert "older benchmark version not drawn: a100-sxm4-80gb" in fig.get_suptitle()
    assert set(plots.copy_ceilings(records, "split_rope", order=commits)) == {"h200"}


def test_cross_gpu_lines_are_of_the_newest_version_only():
    """Across GPUs one version, the newest: the h200's line starts at the change, and
    the a100 (old code only) has no line."""
    records, commits = _fleet()
    fig = plots.cross_gpu(records, "split_rope", "blocked", order=commits)
    ax = next(a for a in fig.axes if a.get_title() == SHAPE)
    lines = [ln for ln in ax.get_lines() if len(ln.get_xdata())]
    assert [list(map(int, ln.get_xdata())) for ln in lines] == [[5, 6, 7, 8, 9]]
    assert "older benchmark version not drawn" in fig.get_suptitle()
