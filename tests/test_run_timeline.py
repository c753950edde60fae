"""ltx2k.analysis.run_timeline: the per-cell timestamp log and nvidia-smi's clock log as a
runner leaves them (lines cut short, [N/A] fields, processes without a cell), and the
clustering test on slow readings."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ltx2k.analysis import run_timeline as rt

T0 = 1_796_586_000.0

# ---------------------------------------------------------------- the per-cell log


@st.composite
def cell_logs(draw):
    """Processes one after another, each a few setup calls; some name a cell
    (_prepare), some not; garbage lines and a cut-short last line mixed in."""
    n = draw(st.integers(0, 12))
    t = T0
    procs, lines, garbage = [], [], 0
    for pid in range(1000, 1000 + n):
        gap = draw(st.floats(0.01, 5.0))
        t += gap
        calls = []
        named = draw(st.booleans())
        if named:
            key = ["split_rope", "device_cold", f"v{pid}", "B1_S1024_H32_D128"]
            calls.append(["_prepare", key, t, t + 0.1, pid, None])
        for _ in range(draw(st.integers(0 if named else 1, 3))):
            t += draw(st.floats(0.0, 1.0))
            calls.append(["_leave_cold_median", ["split_rope"], t, t + 0.01, pid, None])
        t = max(c[3] for c in calls)
        procs.append((pid, min(c[2] for c in calls), named, calls))
        for c in calls:
            lines.append(json.dumps(c))
        if draw(st.booleans()):
            # cut short, not JSON, too few fields, a time that is not a number
            bad = ['["_prepare", [', "not json", "[1, 2]", '{"a": 1}', '["x", [], "t", 1, 2, 3]']
            lines.append(draw(st.sampled_from(bad)))
            garbage += 1
    order = draw(st.permutations(range(len(lines))))  # a log's lines need not be sorted
    return procs, [lines[i] for i in order], garbage


@settings(max_examples=80, deadline=None)
@given(cell_logs())
def test_process_spans_place_every_named_process_and_count_what_they_skip(log):
    procs, lines, garbage = log
    spans, skipped = rt.process_spans(lines)
    assert skipped == garbage
    named = [p for p in procs if p[2]]
    assert len(spans) == len(named)
    starts = [p[1] for p in procs]
    for i, (pid, start, is_named, calls) in enumerate(procs):
        if not is_named:
            continue
        span = spans[("split_rope", "device_cold", f"v{pid}", "B1_S1024_H32_D128")]
        assert span.pid == pid and span.start == start
        # to the next process's first call, or to its own last end
        end = starts[i + 1] if i + 1 < len(procs) else max(c[3] for c in calls)
        assert span.end == max(start, end)
    ordered = sorted(spans.values(), key=lambda s: s.start)
    assert all(a.end <= b.start for a, b in zip(ordered, ordered[1:], strict=False))


def test_process_spans_keep_a_cells_first_process():
    rows = [
        ["_prepare", ["k", "device_cold", "v", "s"], T0, T0 + 1, 1, None],
        ["_prepare", ["k", "device_cold", "v", "s"], T0 + 2, T0 + 3, 2, "RuntimeError"],
    ]
    spans, skipped = rt.process_spans(json.dumps(r) for r in rows)
    assert skipped == 0 and spans[("k", "device_cold", "v", "s")].pid == 1
    assert spans[("k", "device_cold", "v", "s")].end == T0 + 2


# ---------------------------------------------------------------- nvidia-smi's clock log

FIELDS = {
    "timestamp": "timestamp",
    "sm_mhz": "clocks.current.sm [MHz]",
    "mem_mhz": "clocks.current.memory [MHz]",
    "reasons": "clocks_event_reasons.active",
    "power_w": "power.draw [W]",
}


def _stamp(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%Y/%m/%d %H:%M:%S.%f")[:-3]


@st.composite
def clock_logs(draw):
    cols = ["timestamp"] + draw(
        st.lists(st.sampled_from(["sm_mhz", "mem_mhz", "reasons", "power_w"]), unique=True)
    )
    cols = draw(st.permutations(cols))
    header = ", ".join(FIELDS[c] for c in cols)
    rows, lines, bad = [], [], 0
    t = T0
    for _ in range(draw(st.integers(0, 15))):
        t += draw(st.sampled_from([0.25, 0.25, 0.5, 3.0]))
        row = {"t": round(t, 3)}
        cells = []
        for c in cols:
            if c == "timestamp":
                cells.append(_stamp(row["t"]))
            elif draw(st.integers(0, 4)) == 0:
                cells.append(draw(st.sampled_from(["[N/A]", "[Not Supported]", ""])))
                row[c] = None
            elif c == "reasons":
                row[c] = draw(st.integers(0, 0x1FF))
                cells.append(f"0x{row[c]:016x}")
            else:
                row[c] = float(draw(st.integers(100, 3000)))
                cells.append(f"{row[c]:.2f}")
        if draw(st.integers(0, 6)) == 0:  # the timestamp lost: the row cannot be placed
            cells[cols.index("timestamp")] = "[N/A]"
            bad += 1
        else:
            rows.append(row)
        lines.append(", ".join(cells))
    if lines and draw(st.booleans()):  # a last line cut short by a killed logger: at
        # most 19 characters, so never a whole timestamp (whose fraction %f would parse)
        lines.append(lines[-1][: draw(st.integers(1, 19))])
        bad += 1
    return header, lines, rows, bad


@settings(max_examples=80, deadline=None)
@given(clock_logs(), st.sampled_from([0.0, 3600.0, -19800.0]))
def test_read_clocks_reads_any_columns_and_skips_only_rows_it_cannot_place(log, offset):
    header, lines, rows, bad = log
    got, skipped = rt.read_clocks([header, *lines], utc_offset_s=offset)
    assert skipped == bad
    assert len(got) == len(rows)
    assert [r.t for r in got] == sorted(r.t for r in got)
    for g, want in zip(got, rows, strict=True):
        assert g.t == pytest.approx(want["t"] - offset, abs=1e-3)
        for field in ("sm_mhz", "mem_mhz", "reasons", "power_w"):
            assert getattr(g, field) == want.get(field)


def test_read_clocks_needs_a_timestamp_column():
    with pytest.raises(ValueError, match="timestamp"):
        rt.read_clocks(["clocks.current.sm [MHz]", "1980"])
    with pytest.raises(ValueError, match="timestamp"):
        rt.read_clocks([])


def test_read_clocks_takes_the_older_throttle_name_and_units_free_headers():
    rows, _ = rt.read_clocks(
        ["", "timestamp, clocks.sm, clocks_throttle_reasons.active", f"{_stamp(T0)}, 1410, 0x4"]
    )
    assert rows == [rt.ClockRow(T0, 1410.0, None, 0x4, None)]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.floats(0, 100), st.integers(500, 2000), st.integers(0, 0x1FF))),
    st.floats(0, 100),
    st.floats(0, 50),
)
def test_clocks_during_is_the_rows_inside_the_span(raw, start, length):
    rows = sorted(
        (rt.ClockRow(T0 + t, float(sm), None, bits, None) for t, sm, bits in raw),
        key=lambda r: r.t,
    )
    c = rt.clocks_during(rows, T0 + start, T0 + start + length)
    inside = [r for r in rows if T0 + start <= r.t <= T0 + start + length]
    assert c.rows == len(inside)
    assert c.min_sm_mhz == min((r.sm_mhz for r in inside), default=None)
    bits = 0
    for r in inside:
        bits |= r.reasons
    assert c.reasons == bits
    assert c.slowed == bool(bits & ~rt.BENIGN)


def test_clock_reasons_name_their_bits():
    c = rt.Clocks(3, 1400.0, 2600.0, 0x1 | 0x4)
    assert c.reason_names() == ["gpu_idle", "sw_power_cap"] and c.slowed
    assert not rt.Clocks(3, 1980.0, 2600.0, 0x1).slowed


# ---------------------------------------------------------------- clustering in time


def test_clustering_finds_slow_readings_that_come_together():
    times = [0.5 * i for i in range(200)]
    together = [100 <= i < 110 for i in range(200)]  # ten in a row, 5 s
    r = rt.clustering([(times, together)], gap=2.0, shuffles=500)
    assert r.slow == 10 and r.close == 10 and r.p < 0.01
    apart = [i % 20 == 0 for i in range(200)]  # ten, 10 s apart
    r = rt.clustering([(times, apart)], gap=2.0, shuffles=500)
    assert r.close == 0 and r.p == 1.0


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.booleans(), min_size=2, max_size=60),
    st.floats(-1e6, 1e6),
    st.integers(0, 3),
)
def test_clustering_depends_on_time_differences_only(slow, shift, seed):
    times = [0.4 * i for i in range(len(slow))]
    a = rt.clustering([(times, slow)], shuffles=50, seed=seed)
    b = rt.clustering([([t + shift for t in times], slow)], shuffles=50, seed=seed)
    assert a == b
    assert 0 < a.p <= 1 and a.close <= a.slow == sum(slow)


def test_clustering_rejects_bad_arguments():
    with pytest.raises(ValueError, match="gap"):
        rt.clustering([], gap=0)
    with pytest.raises(ValueError, match="shuffles"):
        rt.clustering([], shuffles=0)
    with pytest.raises(ValueError, match="2 times and 1 slow"):
        rt.clustering([([0.0, 1.0], [True])])
