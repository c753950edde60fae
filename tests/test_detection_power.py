"""ltx2k power: detection power of `ltx2k regress` from an A/A pair of runs (real noise).

Records are built here from seeded lognormal samples, so every expectation
follows from the noise and the threshold, not from echoed outputs.
"""

from __future__ import annotations

import json
from dataclasses import replace as _replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ltx2k import cli
from ltx2k.analysis import detection_power
from ltx2k.analysis.thresholds import Thresholds
from ltx2k.history.records import Record

SHA = "c0ffee" + "0" * 34
BENCH = "bench_kernels.SplitRope.time_device_cold"


def record(value_us: float, seed: int, *, shape: str, sigma=0.005, variant="blocked", n=10):
    rng = np.random.default_rng(seed)
    s = value_us * 1e-6 * rng.lognormal(0.0, sigma, n)
    q25, med, q75 = np.percentile(s, [25, 50, 75])
    return Record(
        machine="h200",
        commit=SHA,
        date=0,
        benchmark=BENCH,
        params=(("variant", variant), ("shape", shape)),
        value=float(med),
        ci_99=(float(np.percentile(s, 1)), float(np.percentile(s, 99))),
        q_25=float(q25),
        q_75=float(q75),
        samples=tuple(float(x) for x in s),
        number=1,
        repeat=n,
        unit="seconds",
        env="ltx2k-inherit-py3.12",
    )


def aa_pair(n_cells=12, sigma=0.005):
    a = [record(20 + 10 * i, seed=i, shape=f"S{i}", sigma=sigma) for i in range(n_cells)]
    b = [record(20 + 10 * i, seed=100 + i, shape=f"S{i}", sigma=sigma) for i in range(n_cells)]
    return a, b


def test_quiet_pair_no_false_flags_and_steps_beyond_threshold_all_found():
    a, b = aa_pair()
    rep = detection_power.detection_power(a, b, deltas=(0.0, 0.01, 0.02, 0.06, 0.10))
    assert rep.false_flags == ()
    rates = {p.delta: p.rate for p in rep.points}
    # default device threshold 1.03: 1-2% steps are never flags, 6% and 10% always are
    assert rates[0.01] == 0 and rates[0.02] == 0
    assert rates[0.06] == 1.0 and rates[0.10] == 1.0
    assert rep.smallest_reliable == 0.06


def test_a_tighter_threshold_finds_smaller_steps():
    a, b = aa_pair()
    tight = Thresholds(ratios=(("*.time_device_*", 1.01), ("*", 1.05)))
    rep = detection_power.detection_power(a, b, deltas=(0.02, 0.03, 0.06), thresholds=tight)
    assert rep.smallest_reliable is not None and rep.smallest_reliable <= 0.03


def test_bimodal_cell_is_a_false_flag_in_either_direction():
    a, b = aa_pair(4)
    # the second run happened to pick a 20% faster kernel (torch.compile's autotuner)
    b[2] = record(30 * 0.8, seed=7, shape="S2")
    for first, second in ((a, b), (b, a)):
        rep = detection_power.detection_power(first, second, deltas=(0.10,))
        assert rep.false_flags == (f"{BENCH.split('.', 1)[1]} blocked S2",)
        # and a 10% step on it is not "reliably detected": one direction hides it
        assert rep.points[0].rate == 0.75


def test_cells_not_rerun_are_left_out_and_an_all_stale_pair_is_an_error():
    a, b = aa_pair(3)
    b[1] = a[1]  # the second run never replaced this one
    rep = detection_power.detection_power(a, b, deltas=(0.1,))
    assert len(rep.benchmarks) == 2 and not any("S1" in x.split() for x in rep.benchmarks)
    with pytest.raises(ValueError, match="re-run"):
        detection_power.detection_power(a, a, deltas=(0.1,))


def test_small_cells_are_below_min_value():
    a = [record(5, 1, shape="tiny"), record(50, 2, shape="big")]
    b = [record(5, 3, shape="tiny"), record(50, 4, shape="big")]
    rep = detection_power.detection_power(a, b, deltas=(0.1,))
    assert [x.split()[-1] for x in rep.benchmarks] == ["big"]


@pytest.mark.parametrize("deltas", [(), (-0.05,), (float("nan"),), ("5%",)])
def test_bad_deltas_are_rejected(deltas):
    a, b = aa_pair(2)
    with pytest.raises(ValueError, match="deltas"):
        detection_power.detection_power(a, b, deltas=deltas)


def test_two_shared_commits_need_a_choice():
    import dataclasses

    a, b = aa_pair(2)
    other = "beef" + "0" * 36
    a += [dataclasses.replace(r, commit=other) for r in a]
    b += [dataclasses.replace(r, commit=other) for r in b]
    with pytest.raises(ValueError, match="exactly one"):
        detection_power.detection_power(a, b, deltas=(0.1,))
    assert detection_power.detection_power(a, b, deltas=(0.1,), commit="beef").commit == other


_ENVS = st.text("abcxyz-.0123456789", min_size=1, max_size=8)


@settings(max_examples=30, deadline=None)
@given(
    envs=st.lists(_ENVS, min_size=2, max_size=2, unique=True),
    factor=st.sampled_from((0.5, 1.5, 2.0)),
    both_in_b=st.booleans(),
)
def test_a_commit_in_several_environments_pairs_one_environment(envs, factor, both_in_b):
    """Run A holds the commit in two asv environments, the second one measuring other
    values; run B holds the first (and maybe the second): the pair is of the first
    environment whatever the names sort as, so the quiet A/A pair shows no false flag. With
    both environments in both runs, env= chooses, and one is asked for without it."""
    quiet, other = envs
    a, b = aa_pair(6)
    a = [_replace(r, env=quiet) for r in a]
    b = [_replace(r, env=quiet) for r in b]
    a_other = [_replace(_scaled_record(r, factor), env=other) for r in a]
    b_other = [_replace(r, env=other) for r in b]
    for run_a in (a + a_other, a_other + a):
        if both_in_b:
            with pytest.raises(ValueError, match="several environments"):
                detection_power.detection_power(run_a, b + b_other, deltas=(0.1,))
            rep = detection_power.detection_power(run_a, b + b_other, deltas=(0.1,), env=quiet)
        else:
            rep = detection_power.detection_power(run_a, b, deltas=(0.1,))
        assert rep.false_flags == ()
        assert rep.points[0].rate == 1.0


def _scaled_record(r: Record, f: float) -> Record:
    return _replace(
        r,
        value=r.value * f,
        ci_99=(r.ci_99[0] * f, r.ci_99[1] * f),
        q_25=r.q_25 * f,
        q_75=r.q_75 * f,
        samples=tuple(x * f for x in r.samples),
    )


def test_cli_writes_json_and_plot(tmp_path, monkeypatch, capsys):
    a, b = aa_pair(3)
    runs = {"A": a, "B": b}
    monkeypatch.setattr("ltx2k.history.records.load_results", lambda path: (runs[str(path)], []))
    out, png = tmp_path / "p.json", tmp_path / "p.png"
    rc = cli.main(
        [
            "power",
            "A",
            "B",
            "--ratio",
            "1.05",
            "--ratio",
            "1.03",
            "--json",
            str(out),
            "--plot",
            str(png),
        ]
    )
    assert rc == 0
    data = json.loads(out.read_text())
    assert [d["thresholds"].split()[2].rstrip(",") for d in data] == ["1.05", "1.03"]
    assert all(d["cells"] == 3 and d["false_flags"] == [] for d in data)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "smallest slowdown flagged in every cell" in capsys.readouterr().out


@pytest.mark.parametrize(
    "flag, path, said",
    [
        ("--plot", "nope/p.png", "--plot '{tmp}/nope/p.png': its folder '{tmp}/nope' does not"),
        ("--json", "nope/p.json", "--json '{tmp}/nope/p.json': its folder '{tmp}/nope' does not"),
        ("--plot", ".", "--plot '{tmp}' is a folder; pass a file path"),
    ],
)
def test_cli_treats_json_and_plot_paths_alike_before_the_analysis(
    tmp_path, monkeypatch, capsys, flag, path, said
):
    """--plot into a missing folder created it, where --json failed on one after the
    analysis (and after --json was written, for a --plot that could not be)."""
    a, b = aa_pair(3)
    runs = {"A": a, "B": b}
    monkeypatch.setattr("ltx2k.history.records.load_results", lambda p: (runs[str(p)], []))
    other = "--json" if flag == "--plot" else "--plot"
    written = tmp_path / ("ok.json" if other == "--json" else "ok.png")
    argv = ["power", "A", "B", flag, str(tmp_path / path), other, str(written)]
    assert cli.main(argv) == 1
    out, err = capsys.readouterr()
    (line,) = err.strip().splitlines()
    assert out == "" and line.startswith("ltx2k: error: " + said.format(tmp=tmp_path)), err
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no folder made, nothing written


def test_cli_says_what_it_could_not_read_and_why_nothing_pairs(monkeypatch, capsys):
    from ltx2k.history.records import Problem

    a, b = aa_pair(2)
    broken = Problem("B/h200/c0ffee00-env.json", "h200", "truncated", "B's file stops early")
    runs = {"A": (a, []), "B": (b[:1], [broken])}
    monkeypatch.setattr("ltx2k.history.records.load_results", lambda path: runs[str(path)])
    assert cli.main(["power", "A", "B", "--machine", "a100"]) == 1
    err = capsys.readouterr().err
    assert "ltx2k power: truncated: B's file stops early" in err
    assert "none of them matches --machine 'a100'" in err and "h200@c0ffee00" in err
    runs["B"] = ([_replace(r, commit="beef" * 10) for r in b], [broken])
    assert cli.main(["power", "A", "B"]) == 1
    err = capsys.readouterr().err
    assert "no cell of one run is in the other" in err and "truncated" in err


def test_cli_bad_ratio_is_named(monkeypatch, capsys):
    a, b = aa_pair(2)
    runs = {"A": a, "B": b}
    monkeypatch.setattr("ltx2k.history.records.load_results", lambda path: (runs[str(path)], []))
    with pytest.raises(SystemExit) as e:
        cli.main(["power", "A", "B", "--ratio", "abc"])
    assert e.value.code != 0 and "--ratio" in capsys.readouterr().err
    assert cli.main(["power", "A", "B", "--ratio", "0.9"]) != 0
    assert "ratio >= 1.0" in capsys.readouterr().err


# --- partial, uneven runs: what a runner that was killed or failed cells leaves --------------

_CELL = st.fixed_dictionaries(
    {
        "in_a": st.booleans(),
        "in_b": st.booleans(),
        "failed_a": st.booleans(),  # asv wrote null: the cell failed or timed out
        "failed_b": st.booleans(),
        "samples_a": st.sampled_from(["all", "none", "one-null"]),
        "copied": st.booleans(),  # B kept A's result: the cell was not re-run
        "us": st.floats(1.0, 500.0),
    }
)


def _side(rec: Record, failed: bool, samples: str) -> Record:
    if failed:
        return _replace(rec, value=None, ci_99=None, q_25=None, q_75=None, samples=None)
    if samples == "none":  # a run without --record-samples
        return _replace(rec, samples=None)
    if samples == "one-null":
        return _replace(rec, samples=(None, *rec.samples[1:]))
    return rec


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_CELL, min_size=1, max_size=8))
def test_partial_runs_give_a_report_of_the_cells_both_measured_or_a_named_error(cells):
    run_a, run_b, usable = [], [], set()
    why = {reason: 0 for reason in detection_power.LEFT_OUT}  # of the cells both runs hold
    for i, c in enumerate(cells):
        shape = f"S{i}"
        a = _side(record(c["us"], i, shape=shape), c["failed_a"], c["samples_a"])
        b = a if c["copied"] else _side(record(c["us"], 100 + i, shape=shape), c["failed_b"], "all")
        if c["in_a"]:
            run_a.append(a)
        if c["in_b"]:
            run_b.append(b)
        both = c["in_a"] and c["in_b"] and a.value is not None and b.value is not None
        if both and a.value >= 10e-6 and not c["copied"]:
            usable.add(shape)
        elif c["in_a"] and c["in_b"]:
            reason = (
                detection_power.NO_VALUE
                if not both
                else detection_power.BELOW_MIN
                if a.value < 10e-6
                else detection_power.NOT_RERUN
            )
            why[reason] += 1
    try:
        rep = detection_power.detection_power(run_a, run_b, deltas=(0.05, 0.5))
    except ValueError as e:
        # Only where no cell could be paired, and the message says which way.
        assert not usable, (usable, e)
        assert "re-run" in str(e) or "share exactly one" in str(e)
        return
    got = {label.split()[-1] for label in rep.benchmarks}
    assert got == usable
    assert dict(rep.left_out) == {k: n for k, n in why.items() if n}
    assert rep.to_json()["left_out"] == dict(rep.left_out)
    labels = set(rep.benchmarks)
    assert set(rep.false_flags) <= labels
    assert all(set(p.flagged) <= labels and p.total == len(labels) for p in rep.points)
