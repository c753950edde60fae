"""ltx2k confirm: report parsing, the bisect decision, asv command lines, the verdict.

asv is faked in the unit tests (a runner that answers like asv find /
continuous and a loader that returns records); the one end-to-end test at the
bottom runs the real ``asv find`` and ``asv continuous`` on a throwaway clone of
this repository in which one commit makes a kernel launcher measurably slower
in the Triton interpreter.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ltx2k import cli
from ltx2k.confirm.asv import (
    WORK_MARKER,
    continuous_command,
    find_command,
    parse_found,
    private_config,
)
from ltx2k.confirm.orchestrate import confirm
from ltx2k.confirm.report import EXIT_CONFIRMED, EXIT_ERROR, EXIT_OK, render_markdown
from ltx2k.confirm.targets import Target, explicit_target, plan, read_report
from ltx2k.confirm.verdict import judge, with_process_values
from ltx2k.history.records import Record

REPO = Path(__file__).resolve().parents[1]
MACHINE = "cpu-interpreter"
BENCH = "bench_kernels.SplitRope.time_device_cold"
PARAMS = (("variant", "blocked"), ("shape", "B1_S1024_H32_D128"))

_GIT_ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@localhost",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@localhost",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def git(cwd, *args: str) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, env=_GIT_ENV)
    assert proc.returncode == 0, f"git {' '.join(args)}: {proc.stderr}"
    return proc.stdout.strip()


@pytest.fixture
def repo(tmp_path) -> tuple[Path, list[str]]:
    """A git repository with asv.conf.json and five commits (oldest first)."""
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    shutil.copy(REPO / "asv.conf.json", root / "asv.conf.json")
    commits = []
    for i in range(5):
        (root / "f.txt").write_text(str(i))
        git(root, "add", ".")
        git(root, "commit", "-qm", f"c{i}: change {i}")
        commits.append(git(root, "rev-parse", "HEAD"))
    return root, commits


def _step(good, bad, rng, **extra):
    return {"last_good": good, "first_bad": bad, "range": list(rng), "ratio": 1.06,
            "ci": [1.05, 1.07], "p_value": 1e-5, "persists": True, "direction": "regression",
            **extra}  # fmt: skip


def _row(benchmark=BENCH, params=PARAMS, cells=None, higher=False, threshold=1.03):
    return {
        "benchmark": benchmark,
        "params": [list(p) for p in params],
        "higher_is_better": higher,
        "threshold": threshold,
        "cells": cells or {},
    }


def _write_report(path: Path, rows) -> Path:
    path.write_text(json.dumps({"status": "regression", "rows": rows}))
    return path


def _rec(commit, values, *, benchmark=BENCH, params=PARAMS, machine=MACHINE, unit="seconds"):
    values = [float(v) for v in values]
    q = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
    return Record(
        machine=machine,
        commit=commit,
        date=0,
        benchmark=benchmark,
        params=params,
        value=statistics.median(values),
        ci_99=(min(values), max(values)),
        q_25=q[0],
        q_75=q[2],
        samples=tuple(values),
        number=1,
        repeat=len(values),
        unit=unit,
        env="e",
    )


BASE_SAMPLES = [10.0 + 0.01 * i for i in range(12)]


# --- report parsing -----------------------------------------------------------------------


def test_report_cells_of_this_machine_become_targets(tmp_path, repo):
    _, c = repo
    rows = [
        _row(cells={
            MACHINE: {"flag": "regression", "ratio": 1.06, "step": _step(c[1], c[4], c[2:])},
            "h200": {"flag": "regression", "ratio": 1.5, "step": _step(c[0], c[1], c[1:2])},
        }),
        # An improvement, an unflagged cell and another metric: nothing to confirm.
        _row(params=(("variant", "per_head"), ("shape", "B1")), cells={
            MACHINE: {"flag": "improvement", "step": _step(c[0], c[1], c[1:2])},
        }),
        _row(benchmark="bench_kernels.AdaValues9.track_pct_copy_bandwidth", higher=True,
             threshold=1.05, cells={MACHINE: {"flag": "ok", "step": None}}),
    ]  # fmt: skip
    targets, skipped = read_report(_write_report(tmp_path / "r.json", rows), MACHINE)
    assert skipped == []
    (t,) = targets
    assert (t.benchmark, t.params, t.last_good, t.first_bad) == (BENCH, PARAMS, c[1], c[4])
    assert t.range == tuple(c[2:]) and t.exact
    assert (t.threshold, t.higher_is_better, t.flagged_ratio) == (1.03, False, 1.06)
    (h200,) = read_report(tmp_path / "r.json", "h200")[0]
    assert h200.range == (c[1],)


def test_report_cells_without_a_step_are_skipped_with_a_note(tmp_path, repo):
    _, c = repo
    rows = [
        _row(cells={MACHINE: {"flag": "regression", "step": None}}),
        _row(params=(("variant", "wide"), ("shape", "S")), cells={
            MACHINE: {"flag": "regression", "step": _step(c[0], c[1], c[1:2])},
        }),
    ]  # fmt: skip
    targets, skipped = read_report(_write_report(tmp_path / "r.json", rows), MACHINE)
    assert [t.params[0][1] for t in targets] == ["wide"]
    (s,) = skipped
    assert s.label == f"{BENCH} blocked B1_S1024_H32_D128" and "no step" in s.why


@pytest.mark.parametrize(
    "content, message",
    [
        (None, "--report {path}: no such file"),
        ("{not json", "--report {path}: not valid JSON"),
        ('{"status": "ok"}', "no 'rows' list"),
        ('[1, 2]', "no 'rows' list"),
        (json.dumps({"rows": [_row(cells={MACHINE: {"flag": "regression"}})]}),
         "carry no 'step'"),
        (json.dumps({"rows": [_row(cells={MACHINE: {"flag": "regression", "step": _step(
            "abc", "0" * 40, [])}})]}), "rows[0] step.last_good: expected a full commit sha"),
        (json.dumps({"rows": [{"benchmark": BENCH, "params": "blocked", "cells": {
            MACHINE: {"flag": "regression", "step": None}}}]}), "'params' must be a list"),
        # Valid JSON that regress never writes. A NaN ratio sorted anywhere in
        # --max-cells' worst-first order; 10**400 and deep nesting were tracebacks.
        (json.dumps({"rows": [_row(cells={MACHINE: {"flag": "regression", "ratio": math.nan,
            "step": _step("0" * 40, "1" * 40, [])}})]}),
         f"rows[0].cells['{MACHINE}'].ratio: expected a finite number"),
        (json.dumps({"rows": [_row(threshold=0.5, cells={MACHINE: {"flag": "regression",
            "step": _step("0" * 40, "1" * 40, [])}})]}),
         "rows[0].threshold: expected a finite number >= 1"),
        (json.dumps({"rows": [_row(threshold="1.03", cells={MACHINE: {"flag": "regression",
            "step": _step("0" * 40, "1" * 40, [])}})]}), "rows[0].threshold: expected"),
        (json.dumps({"rows": [_row(cells={MACHINE: {"flag": "regression", "ratio": 10**400,
            "step": _step("0" * 40, "1" * 40, [])}})]}), "not valid JSON (an integer of 401"),
        ("[" * 100_000, "--report {path}: not valid JSON (JSON nested more than"),
        # A row's cells that are not an object were an AttributeError traceback; a cell
        # of this machine that is not one was skipped, a flag it may hold unconfirmed.
        (json.dumps({"rows": [{"benchmark": BENCH, "cells": [MACHINE]}]}),
         "rows[0]: 'cells' is not an object"),
        (json.dumps({"rows": [{"benchmark": BENCH, "cells": "regression"}]}),
         "rows[0]: 'cells' is not an object"),
        (json.dumps({"rows": [{"benchmark": BENCH, "cells": {MACHINE: ["regression"]}}]}),
         f"rows[0]: cells['{MACHINE}'] is not an object"),
    ],
)  # fmt: skip
def test_report_errors_name_the_flag_and_the_file(tmp_path, content, message):
    path = tmp_path / "regress.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ValueError) as e:
        read_report(path, MACHINE)
    assert message.format(path=path) in str(e.value)
    assert str(path) in str(e.value)


def test_a_report_with_nothing_flagged_needs_no_steps(tmp_path):
    rows = [_row(cells={MACHINE: {"flag": "ok"}, "h200": {"flag": "regression"}})]
    assert read_report(_write_report(tmp_path / "r.json", rows), MACHINE) == ([], [])


# --- the asv -b regex -------------------------------------------------------------------------


def _asv_selects(regex: str, params=None) -> list[str]:
    """What asv's own Benchmarks filter keeps for -b *regex*, as 'name(values)' strings."""
    import argparse
    import itertools

    from asv.benchmarks import Benchmarks

    params = params or [["'per_head'", "'blocked'", "'blocked_lean'"], ["'B1_S4_H3_D64'", "'B2'"]]
    suite = [
        {"name": name, "params": params, "param_names": ["variant", "shape"]}
        for name in (BENCH, "bench_kernels.SplitRope.time_device_cold_x",
                     "bench_kernels.AdaValues9.time_device_cold")
    ]  # fmt: skip
    selected = Benchmarks(argparse.Namespace(benchmark_dir="b"), suite, regex=regex)
    out = []
    for name, idx in selected.benchmark_selection.items():
        combos = list(itertools.product(*params))
        out += [f"{name}({', '.join(combos[i])})" for i in (idx or [])]
    return out


def test_a_report_cell_selects_exactly_its_parameter_combination():
    t = Target(BENCH, (("variant", "blocked"), ("shape", "B1_S4_H3_D64")), "a", "b")
    assert _asv_selects(t.regex()) == [f"{BENCH}('blocked', 'B1_S4_H3_D64')"]
    assert t.matches(BENCH, t.params)
    assert not t.matches(BENCH, (("variant", "blocked_lean"), ("shape", "B1_S4_H3_D64")))
    # asv writes int parameters unquoted
    ints = Target(BENCH, (("n", "4"),), "a", "b")
    assert re.search(ints.regex(), f"{BENCH}(4)") and not re.search(ints.regex(), f"{BENCH}(14)")


def test_command_line_names_select_by_suffix_and_parameter_subset():
    t = explicit_target("SplitRope.time_device_cold", "a", "b", ["shape=B2"])
    assert _asv_selects(t.regex()) == [
        f"{BENCH}('per_head', 'B2')",
        f"{BENCH}('blocked', 'B2')",
        f"{BENCH}('blocked_lean', 'B2')",
    ]
    t = explicit_target("SplitRope.time_device_cold", "a", "b", ["variant=blocked"])
    assert len(_asv_selects(t.regex())) == 2
    everything = explicit_target("SplitRope.time_device_cold", "a", "b")
    assert len(_asv_selects(everything.regex())) == 6  # not the _x benchmark, not AdaValues9
    assert everything.matches(BENCH, PARAMS)
    assert not everything.matches("bench_kernels.AdaValues9.time_device_cold", PARAMS)


@pytest.mark.parametrize(
    "bench, params, message",
    [
        ("", [], "--benchmark"),
        ("--all", [], "--benchmark"),
        ("X.y", ["variant"], "--param 'variant': expected NAME=VALUE"),
        ("X.y", ["variant=a", "variant=b"], "--param variant: given twice ('a' and 'b')"),
    ],
)
def test_explicit_target_errors(bench, params, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        explicit_target(bench, "a", "b", params)


def test_a_parameter_repeated_with_its_value_counts_once():
    t = explicit_target("X.y", "a", "b", ["variant=a", "shape=S", "variant=a"])
    assert t.params == (("variant", "a"), ("shape", "S"))


# --- git: range -> bisect decision ------------------------------------------------------------


def test_a_range_of_several_commits_is_bisected_from_good_itself(repo):
    root, c = repo
    p = plan(Target(BENCH, PARAMS, c[1], c[4], tuple(c[2:])), root)
    assert p.bisect and p.commits == tuple(c[1:]) and p.notes == ()
    assert p.find_range == f"{c[1]}^..{c[4]}"
    # asv find lists its range with git rev-list --first-parent, newest first, and
    # never names the first commit of that list: it must be last_good itself.
    listed = git(root, "rev-list", "--first-parent", p.find_range).split()
    assert listed[::-1] == list(p.commits)


def test_a_range_of_one_commit_is_measured_without_bisecting(repo):
    root, c = repo
    p = plan(Target(BENCH, PARAMS, c[2], c[3], (c[3],)), root)
    assert not p.bisect and p.commits == (c[2], c[3])


def test_a_root_last_good_bisects_everything_up_to_first_bad(repo):
    root, c = repo
    p = plan(Target(BENCH, PARAMS, c[0], c[2]), root)
    assert p.find_range == c[2]
    assert git(root, "rev-list", "--first-parent", p.find_range).split()[::-1] == list(p.commits)


def test_git_decides_the_range_when_the_report_disagrees(repo):
    root, c = repo
    p = plan(Target(BENCH, PARAMS, c[1], c[4], (c[4],)), root)
    assert p.commits == tuple(c[1:])
    (note,) = p.notes
    assert "differs from git's" in note


def test_explicit_refs_resolve(repo):
    root, c = repo
    t = explicit_target("SplitRope.time_device_cold", "HEAD~3", "main")
    p = plan(t, root)
    assert (p.target.last_good, p.target.first_bad) == (c[1], c[4])


@pytest.mark.parametrize(
    "good, bad, message",
    [
        ("0" * 40, -1, f"--good: commit '{'0' * 40}' is unknown to git"),
        (-1, 1, "is not an ancestor of --bad"),
        (2, 2, "are the same commit"),
        ("--output=x", -1, "--good: not a git revision"),
        ("$(id)", -1, "--good: not a git revision"),
    ],
)  # fmt: skip
def test_git_errors_name_the_flag(repo, good, bad, message):
    root, c = repo
    good = c[good] if isinstance(good, int) else good
    bad = c[bad] if isinstance(bad, int) else bad
    with pytest.raises(ValueError, match=re.escape(message)):
        plan(explicit_target("X.y", good, bad), root)


def test_a_report_commit_unknown_to_git_names_the_report_field(repo):
    root, c = repo
    t = Target(BENCH, PARAMS, "f" * 40, c[2])
    with pytest.raises(ValueError, match=r"r\.json: .*step\.last_good: commit 'f{40}' is unknown"):
        plan(t, root, what=f"r.json: {t.label}: ")


def test_a_good_commit_off_the_first_parent_line_is_refused(repo):
    root, c = repo
    git(root, "checkout", "-q", "-b", "side", c[2])
    (root / "g.txt").write_text("side")
    git(root, "add", ".")
    git(root, "commit", "-qm", "side")
    side = git(root, "rev-parse", "HEAD")
    git(root, "checkout", "-q", "main")
    git(root, "merge", "-q", "--no-ff", "-m", "merge", "side")
    merge = git(root, "rev-parse", "HEAD")
    with pytest.raises(ValueError, match="not on the first-parent line"):
        plan(explicit_target("X.y", side, merge), root)


# --- asv command lines --------------------------------------------------------------------------


def test_find_command(repo):
    root, c = repo
    p = plan(Target(BENCH, PARAMS, c[1], c[4]), root)
    cmd = find_command("conf.json", "h200", p, invert=False)
    assert cmd[:3] == [sys.executable, "-m", "asv"]
    assert cmd[3:] == ["find", "--config", "conf.json", "--machine", "h200", "--show-stderr",
                       f"{c[1]}^..{c[4]}", p.target.regex()]  # fmt: skip
    assert "--invert" in find_command("conf.json", "h200", p, invert=True)


def test_continuous_command_is_an_interleaved_ab_with_samples():
    cmd = continuous_command(
        "conf.json", "h200", "a" * 40, "b" * 40, ["^x$", "^y$"], factor=1.03, rounds=6
    )
    assert cmd[3] == "continuous"
    assert cmd[-2:] == ["a" * 40, "b" * 40]  # base (before) first, then the commit judged
    text = " ".join(cmd)
    for part in (
        "--machine h200",
        "--config conf.json",
        "--record-samples",
        "--interleave-rounds",
        "-a rounds=6",
        "--factor 1.03",
        "-b ^x$ -b ^y$",
    ):
        assert part in text, part  # fmt: skip


def test_the_private_config_keeps_results_out_of_the_history(tmp_path, repo):
    root, _ = repo
    conf_path = private_config(root / "asv.conf.json", tmp_path / "work")
    conf = json.loads(conf_path.read_text())
    assert conf["results_dir"] == str((tmp_path / "work" / "results").resolve())
    assert conf["repo"] == str(root.resolve())
    assert conf["env_dir"] == str((root / ".asv" / "env").resolve())  # builds shared
    assert conf["benchmark_dir"] == str((root / "benchmarks").resolve())
    # asv imports ".ltx2k.runner.asv_env" from the config's folder
    assert (tmp_path / "work" / "ltx2k").resolve() == (root / "ltx2k").resolve()
    with pytest.raises(ValueError, match="never writes into the runner's history"):
        private_config(root / "asv.conf.json", root)


@pytest.mark.parametrize(
    "output, expected",
    [
        ("· Greatest regression found: {short} <main~1>\n", 3),
        ("Greatest improvement found: {short}\n", 3),
        ("asv: error: 'x' benchmark not found\n", None),
        ("Greatest regression found: {first}\n", None),  # never the known-good end
    ],
)
def test_parse_found(repo, output, expected):
    _, c = repo
    text = output.format(short=c[3][:8], first=c[1][:8])
    found = parse_found(text, c[1:])
    assert found == (c[expected] if expected is not None else None)


# --- the verdict ------------------------------------------------------------------------------


def test_judge_confirms_a_significant_step_beyond_the_threshold():
    before, after = "a" * 40, "b" * 40
    recs = [_rec(before, BASE_SAMPLES), _rec(after, [x * 1.08 for x in BASE_SAMPLES])]
    t = Target(BENCH, PARAMS, before, after, threshold=1.03, higher_is_better=False)
    (c,) = judge(recs, t, before, after, MACHINE)
    assert c.verdict == "confirmed" and c.flag == "regression"
    assert c.ratio == pytest.approx(1.08) and c.p_value < 0.002 and c.test == "mann-whitney"
    assert (c.before_value, c.after_value) == (
        pytest.approx(statistics.median(BASE_SAMPLES)),
        pytest.approx(statistics.median(BASE_SAMPLES) * 1.08),
    )
    # The report's own threshold decides: 8% is under a 1.1 threshold.
    t10 = Target(BENCH, PARAMS, before, after, threshold=1.1)
    assert judge(recs, t10, before, after, MACHINE)[0].verdict == "not-confirmed"


def test_judge_unchanged_pair_and_missing_data():
    before, after = "a" * 40, "b" * 40
    t = Target(BENCH, PARAMS, before, after)
    same = [_rec(before, BASE_SAMPLES), _rec(after, BASE_SAMPLES[::-1])]
    (c,) = judge(same, t, before, after, MACHINE)
    assert c.verdict == "not-confirmed" and c.flag == "ok"
    missing = [_rec(before, BASE_SAMPLES)]
    (c,) = judge(missing, t, before, after, MACHINE)
    assert c.verdict == "no-data"
    # Other machines, commits and cells are not this target's.
    other = [_rec(before, BASE_SAMPLES, machine="h200"), _rec("c" * 40, BASE_SAMPLES)]
    assert judge(other, t, before, after, MACHINE) == []


def test_judge_follows_the_direction_of_higher_is_better_metrics():
    before, after = "a" * 40, "b" * 40
    bench = "bench_kernels.AdaValues9.track_pct_copy_bandwidth"
    recs = [
        _rec(before, [90.0], benchmark=bench, unit="%"),
        _rec(after, [80.0], benchmark=bench, unit="%"),
    ]
    t = Target(bench, PARAMS, before, after, higher_is_better=True, threshold=1.05)
    (c,) = judge(recs, t, before, after, MACHINE)
    assert c.verdict == "confirmed" and c.higher_is_better
    flipped = [r if r.commit == before else _rec(after, [99.0], benchmark=bench, unit="%")
               for r in recs]  # fmt: skip
    assert judge(flipped, t, before, after, MACHINE)[0].verdict == "not-confirmed"


# --- every process's value of a track_* benchmark ------------------------------------------------

HOST = "bench_kernels.SplitRope.track_host_calibrated"
HOST_PARAMS = (("variant", "blocked"), ("shape", "B4_S25_H32_D64"))
# Per-process calibrated values with the ~2% spread measured on the H200.
HOST_VALUES = [1.20, 1.23, 1.19, 1.25, 1.21, 1.22, 1.18, 1.24, 1.22, 1.20, 1.21, 1.23]


def _write_values(path, commit, values, benchmark=HOST, params=HOST_PARAMS, monkeypatch=None):
    from ltx2k.runner import process_values

    monkeypatch.setenv(process_values.ENV, str(path))
    monkeypatch.setenv("ASV_COMMIT", commit)
    # One record per round of 4 processes, as track_host_calibrated appends them.
    for i in range(0, len(values), 4):
        assert process_values.append(benchmark, [v for _, v in params], values[i : i + 4])


def test_process_values_round_trip_and_what_is_not_written(tmp_path, monkeypatch):
    from ltx2k.runner import process_values

    path = tmp_path / "v.jsonl"
    monkeypatch.delenv(process_values.ENV, raising=False)
    monkeypatch.setenv("ASV_COMMIT", "a" * 40)
    assert not process_values.append(HOST, ["blocked", "B4"], [1.0])  # no file named
    monkeypatch.setenv(process_values.ENV, str(path))
    monkeypatch.delenv("ASV_COMMIT")
    assert not process_values.append(HOST, ["blocked", "B4"], [1.0])  # no commit named
    assert not path.exists()
    monkeypatch.setenv("ASV_COMMIT", "a" * 40)
    assert process_values.append(HOST, ["blocked", "B4"], [1.0, 2.0])
    assert process_values.append(HOST, ["blocked", "B4"], [3.0])
    with open(path, "a") as f:  # a process killed mid-write, and a value that is no number
        f.write('{"commit": "a", "benchmark": "x", "par\n')
        f.write(json.dumps({"commit": "a", "benchmark": HOST, "params": [], "values": ["nan"]}))
        f.write("\n")
    values, bad = process_values.load(path)
    assert values == {("a" * 40, HOST, ("blocked", "B4")): [1.0, 2.0, 3.0]}
    assert bad == 2
    assert process_values.load(tmp_path / "missing.jsonl") == ({}, 0)


def test_a_track_cell_is_judged_on_every_process_with_the_minimum_step(tmp_path, monkeypatch):
    """asv keeps one number of track_host_calibrated per commit: ratio-only at the
    commit-vs-commit threshold (1.15) would never confirm an 8% host step. With every
    process's value of the interleaved rounds it is a rank test at the minimum step."""
    before, after = "a" * 40, "b" * 40
    path = tmp_path / "v.jsonl"
    slower = [v * 1.08 for v in HOST_VALUES]
    _write_values(path, before, HOST_VALUES, monkeypatch=monkeypatch)
    _write_values(path, after, slower, monkeypatch=monkeypatch)
    recs = [
        _rec(before, [statistics.median(HOST_VALUES[-4:])], benchmark=HOST, params=HOST_PARAMS),
        _rec(after, [statistics.median(slower[-4:])], benchmark=HOST, params=HOST_PARAMS),
    ]
    t = Target(HOST, HOST_PARAMS, before, after, threshold=1.15, higher_is_better=False)
    # asv's numbers alone: one value per side, ratio-only, under the 1.15 threshold.
    (plain,) = judge(recs, t, before, after, MACHINE)
    assert plain.verdict == "not-confirmed" and plain.test == "ratio-only"

    judged, sampled, _ = with_process_values(recs, path, before, after)
    assert sampled == {(HOST, HOST_PARAMS)}
    (c,) = judge(judged, t, before, after, MACHINE, sampled=sampled)
    assert c.verdict == "confirmed" and c.test == "mann-whitney" and c.p_value < 0.002
    assert c.ratio == pytest.approx(1.08) and c.threshold == pytest.approx(1.05)
    assert c.before_value == pytest.approx(statistics.median(HOST_VALUES))
    assert "every measuring process" in c.message

    # The same code on both sides (A/A): not confirmed.
    aa = tmp_path / "aa.jsonl"
    _write_values(aa, before, HOST_VALUES, monkeypatch=monkeypatch)
    _write_values(aa, after, HOST_VALUES[::-1], monkeypatch=monkeypatch)
    judged, sampled, _ = with_process_values(recs, aa, before, after)
    (c,) = judge(judged, t, before, after, MACHINE, sampled=sampled)
    assert c.verdict == "not-confirmed" and c.test == "mann-whitney"

    # A 3% step is under the minimum step however significant.
    small = tmp_path / "small.jsonl"
    _write_values(small, before, HOST_VALUES, monkeypatch=monkeypatch)
    _write_values(small, after, [v * 1.03 for v in HOST_VALUES], monkeypatch=monkeypatch)
    judged, sampled, _ = with_process_values(recs, small, before, after)
    (c,) = judge(judged, t, before, after, MACHINE, sampled=sampled)
    assert c.verdict == "not-confirmed"


def test_process_values_of_one_side_only_leave_asvs_numbers(tmp_path, monkeypatch):
    before, after = "a" * 40, "b" * 40
    path = tmp_path / "v.jsonl"
    _write_values(path, after, [v * 1.3 for v in HOST_VALUES], monkeypatch=monkeypatch)
    recs = [
        _rec(before, [1.2], benchmark=HOST, params=HOST_PARAMS),
        _rec(after, [1.3], benchmark=HOST, params=HOST_PARAMS),
    ]
    with open(path, "a") as f:
        f.write('{"commit": "cut sho\n')
    judged, sampled, bad = with_process_values(recs, path, before, after)
    assert sampled == set() and judged == recs and bad == 1
    t = Target(HOST, HOST_PARAMS, before, after, threshold=1.15)
    (c,) = judge(judged, t, before, after, MACHINE, sampled=sampled)
    assert c.test == "ratio-only" and c.verdict == "not-confirmed"  # 1.083 < 1.15


# --- the whole run, asv faked -----------------------------------------------------------------


class FakeAsv:
    """Answers like asv find / continuous; results come from a table of samples per commit."""

    def __init__(self, samples, found=None, find_out=None, cont_out=None, cells=(PARAMS,)):
        self.samples = samples  # {commit: samples}, the same for every cell in *cells*
        self.found = found
        self.find_out = find_out
        self.cont_out = cont_out
        self.cells = cells
        self.calls: list[list[str]] = []

    def __call__(self, cmd, env):
        self.calls.append(list(cmd))
        if cmd[3] == "find":
            if self.find_out is not None:
                return 1, self.find_out
            return 0, f"· Greatest regression found: {self.found[:8]} <main>\n"
        if self.cont_out is not None:
            return 1, self.cont_out
        return 0, "BENCHMARKS NOT SIGNIFICANTLY CHANGED.\n"

    def load(self, results_dir):
        assert Path(results_dir).name == "results"
        return [_rec(c, v, params=p) for c, v in self.samples.items() for p in self.cells]


def _run(repo, targets, fake, tmp_path, **kw):
    root, _ = repo
    return confirm(
        targets, machine=MACHINE, config=root / "asv.conf.json", work=tmp_path / "work",
        runner=fake, load=fake.load, **kw,
    )  # fmt: skip


def test_a_range_is_bisected_then_the_pair_re_measured_and_confirmed(repo, tmp_path):
    root, c = repo
    stale = tmp_path / "work" / "results" / MACHINE / "old.json"  # an earlier confirm's
    stale.parent.mkdir(parents=True)
    stale.write_text("{}")
    (tmp_path / "work" / WORK_MARKER).write_text("")
    slow = [x * 1.2 for x in BASE_SAMPLES]
    fake = FakeAsv({c[2]: BASE_SAMPLES, c[3]: slow}, found=c[3])
    setups = []
    t = Target(BENCH, PARAMS, c[1], c[4], tuple(c[2:]), threshold=1.03, flagged_ratio=1.2)
    out = _run(repo, [t], fake, tmp_path, setup=lambda: setups.append(1))
    assert setups == [1]
    assert not stale.exists()  # an earlier run's values are never judged
    find, cont = fake.calls
    assert find[3] == "find" and find[-2] == f"{c[1]}^..{c[4]}" and "--invert" not in find
    assert cont[3] == "continuous" and cont[-2:] == [c[2], c[3]]
    assert cont[cont.index("-b") + 1] == t.regex()
    (cell,) = out.cells
    assert (cell.verdict, cell.commit, cell.before) == ("confirmed", c[3], c[2])
    assert cell.bisected and cell.range_size == 3 and cell.subject == "c3: change 3"
    assert out.status == "confirmed" and out.exit_code == EXIT_CONFIRMED
    md = render_markdown(out)
    assert "❌ 1 of 1 cell(s) confirmed" in md
    assert f"`{c[3][:12]}` c3: change 3 (bisected from 3 commits)" in md
    assert "| 1.200 |" in md
    doc = out.to_json()
    assert doc["status"] == "confirmed" and doc["cells"][0]["commit"] == c[3]
    json.dumps(doc, allow_nan=False)


def test_cells_of_one_step_share_one_search_and_one_ab(repo, tmp_path):
    root, c = repo
    other = (("variant", "blocked_wide"), ("shape", "B1_S1024_H32_D128"))
    fake = FakeAsv({c[2]: BASE_SAMPLES, c[3]: BASE_SAMPLES}, cells=(PARAMS, other))
    ts = [
        Target(BENCH, PARAMS, c[2], c[3], (c[3],)),
        Target(BENCH, other, c[2], c[3], (c[3],)),
    ]
    out = _run(repo, ts, fake, tmp_path)
    (cont,) = fake.calls  # one commit in the range: no asv find at all
    assert cont.count("-b") == 2
    assert [(x.params, x.verdict) for x in out.cells] == [
        (PARAMS, "not-confirmed"),
        (other, "not-confirmed"),
    ]
    assert out.exit_code == EXIT_OK


def test_higher_is_better_cells_are_bisected_inverted(repo, tmp_path):
    _, c = repo
    fake = FakeAsv({}, found=c[3])
    t = Target("b.K.track_pct_copy_bandwidth", PARAMS, c[1], c[4], higher_is_better=True)
    _run(repo, [t], fake, tmp_path)
    assert "--invert" in fake.calls[0]


@pytest.mark.parametrize(
    "find_out, message",
    [
        ("· 'x' benchmark not found\n", "matches no benchmark of the suite"),
        ("· 'x' matches more than one benchmark\n", "matches more than one benchmark"),
        ("asv: Too many commits failed\n", "asv find exited 1"),
    ],
)
def test_asv_find_failures_are_errors_of_their_cell(repo, tmp_path, find_out, message):
    _, c = repo
    fake = FakeAsv({}, find_out=find_out)
    t = explicit_target("SplitRope.time_nothing", c[1], c[4])
    out = _run(repo, [t], fake, tmp_path)
    (cell,) = out.cells
    assert cell.verdict == "error" and message in cell.message
    assert out.exit_code == EXIT_ERROR and len(fake.calls) == 1


class FakeAsvWithProcessValues(FakeAsv):
    """asv continuous that also runs track_host_calibrated: every round appends each
    commit's process values where confirm's environment says, as the benchmark does."""

    def __init__(self, values, **kw):
        super().__init__({c: [statistics.median(v)] for c, v in values.items()}, **kw)
        self.values = values
        self.envs: list[dict] = []

    def __call__(self, cmd, env):
        from ltx2k.runner import process_values

        self.envs.append(dict(env))
        if cmd[3] == "continuous":
            path = env[process_values.ENV]
            for commit in cmd[-2:]:
                with open(path, "a") as f:
                    f.write(json.dumps({"commit": commit, "benchmark": HOST,
                                        "params": [v for _, v in HOST_PARAMS],
                                        "values": self.values[commit]}) + "\n")  # fmt: skip
        return super().__call__(cmd, env)

    def load(self, results_dir):
        return [_rec(c, v, benchmark=HOST, params=HOST_PARAMS) for c, v in self.samples.items()]


def test_confirm_hands_asv_a_process_values_file_per_pair_and_judges_on_it(repo, tmp_path):
    from ltx2k.runner import process_values

    _, c = repo
    fake = FakeAsvWithProcessValues({c[3]: HOST_VALUES, c[4]: [v * 1.08 for v in HOST_VALUES]})
    t = explicit_target(HOST, c[3], c[4])
    out = _run(repo, [t], fake, tmp_path)
    (cell,) = out.cells
    assert cell.verdict == "confirmed" and cell.test == "mann-whitney", cell
    (cont_env,) = [e for e, cmd in zip(fake.envs, fake.calls, strict=True) if "continuous" in cmd]
    path = Path(cont_env[process_values.ENV])
    assert path.parent == (tmp_path / "work").resolve() and path.exists()
    # A file left by an earlier, interrupted run is not read: each pair starts empty.
    path.write_text(json.dumps({"commit": c[4], "benchmark": HOST,
                                "params": [v for _, v in HOST_PARAMS],
                                "values": [9.0] * 48}) + "\n")  # fmt: skip
    again = _run(repo, [t], FakeAsvWithProcessValues(
        {c[3]: HOST_VALUES, c[4]: HOST_VALUES[::-1]}), tmp_path)  # fmt: skip
    assert again.cells[0].verdict == "not-confirmed"


def test_a_pair_without_results_is_an_error(repo, tmp_path):
    _, c = repo
    fake = FakeAsv({}, cont_out="· No benchmarks selected\n")
    t = explicit_target("SplitRope.time_nothing", c[3], c[4])
    out = _run(repo, [t], fake, tmp_path)
    (cell,) = out.cells
    assert cell.verdict == "error" and "matches no benchmark" in cell.message


def test_a_confirmed_cell_wins_over_an_error_elsewhere(repo, tmp_path):
    _, c = repo
    fake = FakeAsv({c[3]: BASE_SAMPLES, c[4]: [x * 1.5 for x in BASE_SAMPLES]}, found=c[4])
    ok = Target(BENCH, PARAMS, c[3], c[4], (c[4],))
    missing = Target(BENCH, (("variant", "gone"), ("shape", "S")), c[3], c[4], (c[4],))
    out = _run(repo, [ok, missing], fake, tmp_path)
    assert sorted(x.verdict for x in out.cells) == ["confirmed", "error"]
    assert out.exit_code == EXIT_CONFIRMED


def test_max_cells_checks_the_worst_first(repo, tmp_path):
    _, c = repo
    fake = FakeAsv({})
    ts = [
        Target(BENCH, (("variant", v), ("shape", "S")), c[3], c[4], flagged_ratio=r)
        for v, r in (("a", 1.04), ("b", 1.5), ("c", 1.1))
    ]
    out = _run(repo, ts, fake, tmp_path, max_cells=2)
    (cont,) = fake.calls
    regexes = [cont[i + 1] for i, x in enumerate(cont) if x == "-b"]
    assert regexes == [ts[1].regex(), ts[2].regex()]
    skipped = [x for x in out.cells if x.verdict == "not-checked"]
    assert [x.params[0][1] for x in skipped] == ["a"]


def test_a_bad_commit_fails_before_anything_is_measured(repo, tmp_path):
    _, c = repo
    fake = FakeAsv({})
    ts = [
        Target(BENCH, PARAMS, c[3], c[4]),
        Target(BENCH, PARAMS, "e" * 40, c[4]),
    ]
    with pytest.raises(ValueError, match="unknown to git"):
        _run(repo, ts, fake, tmp_path, source={"report": "r.json"})
    assert fake.calls == []


def test_dry_run_prints_the_commands_and_runs_nothing(repo, tmp_path, capsys):
    _, c = repo
    fake = FakeAsv({})
    out = _run(repo, [Target(BENCH, PARAMS, c[1], c[4])], fake, tmp_path, dry_run=True)
    assert fake.calls == [] and out.status == "dry-run" and out.exit_code == 0
    err = capsys.readouterr().err
    assert "-m asv find" in err and "-m asv continuous" in err
    assert not (tmp_path / "work").exists()


def test_dry_run_notes_names_the_suite_as_last_run_does_not_have(repo, tmp_path):
    root, c = repo
    results = root / "results"
    results.mkdir()
    described = {"version": 2, BENCH: {"unit": "seconds"},
                 "bench_kernels.AdaValues9.time_device_cold": {"unit": "seconds"}}  # fmt: skip
    (results / "benchmarks.json").write_text(json.dumps(described))
    typo = explicit_target("SplitRope.time_devise_cold", c[1], c[4])
    many = explicit_target("time_device_cold", c[1], c[4])
    known = explicit_target("SplitRope.time_device_cold", c[1], c[4])
    out = _run(repo, [typo, many, known], FakeAsv({}), tmp_path, dry_run=True)
    notes = "\n".join(out.notes)
    assert "SplitRope.time_devise_cold: no benchmark of this name" in notes
    assert "time_device_cold: matches 2 benchmarks" in notes and "give the full name" in notes
    assert len(out.notes) == 2  # the known name gets none
    assert "no benchmark of this name" in render_markdown(out)
    (results / "benchmarks.json").unlink()  # never run here: nothing to say, no error
    out = _run(repo, [typo], FakeAsv({}), tmp_path, dry_run=True)
    assert out.notes == [] and out.status == "dry-run"


def test_a_param_the_suite_does_not_have_is_noted(repo, tmp_path):
    """--param narrows asv's -b regex by value alone: a wrong name or value would select
    nothing, silently. Noted from benchmarks.json, dry run or not."""
    root, c = repo
    results = root / "results"
    results.mkdir()
    meta = {"unit": "seconds", "param_names": ["variant", "shape"],
            "params": [["'blocked'", "'tiled'"], ["'B1_S1024_H32_D128'"]]}  # fmt: skip
    (results / "benchmarks.json").write_text(json.dumps({"version": 2, BENCH: meta}))
    targets = [
        explicit_target("SplitRope.time_device_cold", c[1], c[4], [p])
        for p in ("nosuch=x", "variant=nosuch", "variant=tiled")
    ]
    for dry_run in (True, False):
        slow = [x * 1.2 for x in BASE_SAMPLES]
        fake = FakeAsv({c[1]: BASE_SAMPLES, c[4]: slow}, found=c[4])
        notes = "\n".join(_run(repo, targets, fake, tmp_path, dry_run=dry_run).notes)
        assert "--param nosuch: no parameter of this name" in notes, notes
        assert "--param variant=nosuch: not a value of variant" in notes and "tiled" in notes
        assert "variant=tiled" not in notes


# --- CLI --------------------------------------------------------------------------------------


def _cli(capsys, *argv):
    try:
        rc = cli.main([str(a) for a in argv])
    except SystemExit as e:  # argparse's own usage errors
        rc = e.code
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture
def home(tmp_path, monkeypatch):
    """~/.asv-machine.json lands in a scratch home, and LTX2K_MACHINE cannot rename us."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("LTX2K_MACHINE", raising=False)
    (tmp_path / "home").mkdir()
    return tmp_path / "home"


@pytest.mark.parametrize(
    "argv, message",
    [
        ([], "pass --report FILE, or all of --benchmark, --good and --bad"),
        (["--benchmark", "X.y", "--good", "HEAD"], "(missing --bad)"),
        (["--report", "r.json", "--benchmark", "X.y"], "not both"),
        (["--report", "{tmp}/nope.json"], "--report {tmp}/nope.json: no such file"),
        (["--rounds", "two"], "argument --rounds: invalid int value"),
        (["--report", "{tmp}/r.json", "--param", "variant=blocked"], "--param narrows"),
    ],
)
def test_cli_usage_errors_exit_1_with_a_message(capsys, tmp_path, home, argv, message):
    (tmp_path / "r.json").write_text("{}")
    argv = [a.format(tmp=tmp_path) for a in argv]
    rc, _, err = _cli(capsys, "confirm", *argv)
    assert rc == 1, err
    assert message.format(tmp=tmp_path) in err
    assert "Traceback" not in err


def test_cli_unknown_commit_and_bad_report(capsys, tmp_path, home, repo, monkeypatch):
    root, c = repo
    monkeypatch.chdir(root)
    rc, _, err = _cli(capsys, "confirm", "--benchmark", "X.y", "--good", "0" * 40, "--bad", c[4])
    assert rc == 1 and "--good: commit '0000" in err and "unknown to git" in err
    assert not (home / ".asv-machine.json").exists()  # nothing written before the check
    report = tmp_path / "old.json"
    _write_report(report, [_row(cells={MACHINE: {"flag": "regression"}})])
    rc, _, err = _cli(capsys, "confirm", "--report", report, "--machine", MACHINE)
    assert rc == 1 and f"--report {report}: its 1 flagged cell(s)" in err and "no 'step'" in err


def test_cli_nothing_flagged_exits_0_and_writes_both_files(
    capsys, tmp_path, home, repo, monkeypatch
):
    root, c = repo
    monkeypatch.chdir(root)
    report = _write_report(tmp_path / "r.json", [_row(cells={"h200": {"flag": "regression",
        "step": _step(c[1], c[2], [c[2]])}})])  # fmt: skip
    rc, out, err = _cli(
        capsys, "confirm", "--report", report, "--machine", MACHINE,
        "--json", tmp_path / "c.json", "--markdown", tmp_path / "c.md",
    )  # fmt: skip
    assert rc == 0, err
    assert json.loads((tmp_path / "c.json").read_text())["status"] == "nothing-flagged"
    assert "nothing flagged" in (tmp_path / "c.md").read_text()
    assert out == ""  # --markdown: the summary goes to the file only
    rc, _, err = _cli(capsys, "confirm", "--report", report, "--json", tmp_path / "no/dir/c.json")
    assert rc == 1 and "--json" in err and "does not exist; create it first" in err


def test_cli_help_documents_every_flag(capsys):
    with pytest.raises(SystemExit):
        cli.main(["confirm", "--help"])
    text = capsys.readouterr().out
    for flag in ("--report", "--benchmark", "--good", "--bad", "--param", "--machine",
                 "--config", "--work", "--rounds", "--max-cells", "--thresholds", "--markdown",
                 "--json", "--dry-run"):  # fmt: skip
        line = next(ln for ln in text.splitlines() if ln.strip().startswith(flag))
        assert len(line.split()) > 1 or flag in ("--report",), flag
    assert "2  at least one regression confirmed" in text


# --- end to end: real asv, real git, a real slowdown ---------------------------------------------


@pytest.mark.slow
def test_end_to_end_a_real_slowdown_is_bisected_and_confirmed(tmp_path):
    """A clone of this repository with three extra commits; the middle one makes the
    blocked RoPE launcher sleep (the default variant's configuration at decode sizes, the
    cell here). A report flags that cell with the three commits as its range, and an
    unchanged pair (per_head, whose launcher is untouched) as a one-commit step. confirm.sh
    (ltx2k confirm with real asv find / continuous) must bisect the first to the sleeping
    commit and confirm it, and must not confirm the second."""
    from test_ci_e2e import Stack

    from ltx2k.workload import shapes, variants

    stack = Stack(tmp_path)
    checkout = tmp_path / "confirm"
    git(tmp_path, "clone", "-q", str(stack.origin), str(checkout))
    # The scripts under test are this working tree's; the benchmarked commits are clean.
    shutil.copytree(stack.tree / "scripts", checkout / "scripts", dirs_exist_ok=True)
    base = git(checkout, "rev-parse", "HEAD")
    (checkout / "docs" / "e2e-note.txt").write_text("an unrelated change\n")
    git(checkout, "add", "docs/e2e-note.txt")
    git(checkout, "commit", "-qm", "e2e: an unrelated change")
    rope = checkout / "ltx2k" / "kernels" / "rope.py"
    src = rope.read_text()
    anchor = "def _blocked(num_heads: int, *_problem: int) -> LaunchConfig:\n"
    assert anchor in src
    # ~0.25 s per call against ~40 ms for the interpreted kernel: far past the
    # host-latency threshold (2.2), in one launcher only.
    rope.write_text(src.replace(anchor, anchor + "    __import__('time').sleep(0.25)\n", 1))
    git(checkout, "commit", "-qam", "e2e: the blocked launcher sleeps")
    (checkout / "docs" / "e2e-note.txt").write_text("another unrelated change\n")
    git(checkout, "commit", "-qam", "e2e: another unrelated change")
    c1, c2, c3 = git(checkout, "rev-list", "--reverse", f"{base}..HEAD").split()
    # Merged: confirm.sh builds only commits on the default branch.
    git(checkout, "push", "-q", "origin", "HEAD:main")
    git(checkout, "fetch", "-q", "origin")

    shape = shapes.ROPE_SHAPES_CPU[0].label
    default = variants.DEFAULT_VARIANT["split_rope"]
    bench = "bench_kernels.SplitRope.time_host_latency"
    host = "bench_kernels.SplitRope.track_host_calibrated"
    rows = [
        _row(bench, (("variant", default), ("shape", shape)), threshold=2.2, cells={
            MACHINE: {"flag": "regression", "ratio": 6.0, "step": _step(base, c3, [c1, c2, c3])},
        }),
        _row(bench, (("variant", "per_head"), ("shape", shape)), threshold=2.2, cells={
            MACHINE: {"flag": "regression", "ratio": 2.5, "step": _step(c2, c3, [c3])},
        }),
        # asv keeps one number per commit of this one; confirm judges every process.
        # It is timed for the default variant only, whose decode-size config is
        # blocked's (the sleeping launcher's).
        _row(host, (("variant", default), ("shape", shape)), threshold=1.15, cells={
            MACHINE: {"flag": "regression", "ratio": 6.0, "step": _step(c1, c2, [c2])},
        }),
    ]  # fmt: skip
    _write_report(checkout / "report.json", rows)

    t0 = time.monotonic()
    proc = stack.run(checkout, "confirm.sh", "report.json")
    took = time.monotonic() - t0
    assert proc.returncode == 0, proc.stdout[-6000:]
    out = checkout / "confirm"
    assert (out / "status").read_text().strip() == "confirmed", proc.stdout[-6000:]
    doc = json.loads((out / "confirm.json").read_text())
    assert doc["machine"] == MACHINE and doc["status"] == "confirmed"
    by_process = [c for c in doc["cells"] if c["benchmark"] == host]
    cells = {c["params"][0][1]: c for c in doc["cells"] if c["benchmark"] == bench}
    (calibrated,) = by_process
    assert calibrated["verdict"] == "confirmed", calibrated
    assert (calibrated["commit"], calibrated["before"]) == (c2, c1)
    assert calibrated["test"] == "mann-whitney" and calibrated["p_value"] < 0.002
    assert "every measuring process" in calibrated["message"]
    slow = cells[default]
    assert slow["verdict"] == "confirmed", slow
    assert (slow["commit"], slow["before"]) == (c2, c1)  # bisected to the sleeping commit
    assert slow["bisected"] and slow["range_size"] == 3
    assert slow["ratio"] > 2.2 and slow["p_value"] < 0.002
    same = cells["per_head"]
    assert same["verdict"] == "not-confirmed", same
    assert (same["commit"], same["before"], same["bisected"]) == (c3, c2, False)
    summary = (out / "summary.md").read_text()
    assert (
        "❌ 2 of 3 cell(s) confirmed" in summary and "e2e: the blocked launcher sleeps" in summary
    )
    # Measured into the private results only: the runner's history is untouched.
    assert not (checkout / "results").exists()
    private = checkout / ".asv" / "confirm" / "results" / MACHINE
    for commit in (base, c1, c2, c3):  # asv find measured last_good itself
        assert list(private.glob(f"{commit[:8]}-*.json")), commit
    print(f"confirm.sh end to end: {took:.0f} s")
