"""Series assembly (one cell's runs along the mainline) and commit names and order.

The git tests build a small repository with fixed dates, so its shas are the
same on every machine.
"""

from __future__ import annotations

import os
import subprocess

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ltx2k.history import commits
from ltx2k.history import series as hseries
from ltx2k.history.records import Record

BENCH = "bench_kernels.SplitRope.time_device_cold"
PARAMS = (("variant", "blocked"),)
KEY = (BENCH, PARAMS)


def rec(
    commit: str,
    value: float | None = 1.0,
    *,
    machine: str = "h200",
    env: str = "env-a",
    benchmark: str = BENCH,
    samples: tuple[float, ...] | None = None,
    unit: str = "seconds",
) -> Record:
    return Record(
        machine=machine,
        commit=commit,
        date=0,
        benchmark=benchmark,
        params=PARAMS,
        value=value,
        ci_99=None,
        q_25=None,
        q_75=None,
        samples=samples,
        number=None,
        repeat=None,
        unit=unit,
        env=env,
    )


# --- index_records ------------------------------------------------------------------------


def test_index_records_groups_by_machine_and_commit():
    a, b = rec("c1"), rec("c1", machine="a100")
    other = rec("c1", benchmark="bench_kernels.SplitRope.time_device_warm")
    index = hseries.index_records([a, b, other])
    assert set(index) == {("h200", "c1"), ("a100", "c1")}
    assert index[("h200", "c1")] == {KEY: a, (other.benchmark, PARAMS): other}
    assert index[("a100", "c1")] == {KEY: b}


def test_index_records_refuses_two_envs_for_one_cell():
    with pytest.raises(ValueError, match="--env") as err:
        hseries.index_records([rec("abcdef0123", env="py3.11"), rec("abcdef0123", env="py3.12")])
    # The message names the machine, the commit and both environments.
    msg = str(err.value)
    assert "'h200'" in msg and "abcdef01" in msg and "py3.11" in msg and "py3.12" in msg


def test_index_records_same_env_twice_is_not_ambiguous():
    first, second = rec("c1", 1.0), rec("c1", 2.0)
    index = hseries.index_records([first, second])
    assert index[("h200", "c1")][KEY] is second


# --- machine_commits ----------------------------------------------------------------------


def test_machine_commits_takes_the_last_measured_before_head():
    order = ["c0", "c1", "c2", "c3", "c4", "c5", "c6"]
    # h200 measured c0, c2, c3, c5 and c6 (c6 comes after head); a100 measured c1.
    index = hseries.index_records(
        [rec(c) for c in ("c0", "c2", "c3", "c5", "c6")] + [rec("c1", machine="a100")]
    )
    assert hseries.machine_commits(index, "h200", order, "c5", 2) == ["c2", "c3", "c5"]
    assert hseries.machine_commits(index, "h200", order, "c5", 10) == ["c0", "c2", "c3", "c5"]
    # Head is always the last point, measured or not.
    assert hseries.machine_commits(index, "h200", order, "c4", 10) == ["c0", "c2", "c3", "c4"]
    assert hseries.machine_commits(index, "a100", order, "c5", 10) == ["c1", "c5"]
    # A head outside the order cannot place anything after it: every measured commit counts.
    assert hseries.machine_commits(index, "h200", order, "zz", 3) == ["c3", "c5", "c6", "zz"]


def test_machine_commits_follows_the_given_order():
    index = hseries.index_records([rec(c) for c in ("a", "b", "c", "h")])
    assert hseries.machine_commits(index, "h200", ["c", "a", "b", "h"], "h", 5) == [
        "c",
        "a",
        "b",
        "h",
    ]


# --- build --------------------------------------------------------------------------------


def test_build_marks_missing_and_failed_and_keeps_order():
    ok1 = rec("c0", 2.0, samples=(1.9, 2.0, 2.1))
    failed = rec("c2", None)
    ok2 = rec("c3", 3.0, unit="")
    index = hseries.index_records([ok1, failed, ok2, rec("c1", 9.0, machine="a100")])
    s = hseries.build(index, "h200", ["c0", "c1", "c2", "c3"], KEY)
    assert (s.machine, s.benchmark, s.params) == ("h200", BENCH, PARAMS)
    assert s.commits == ["c0", "c1", "c2", "c3"]
    assert s.values == [2.0, None, None, 3.0]
    assert [p.status for p in s.points] == [
        hseries.OK,
        hseries.MISSING,  # another machine's result does not count
        hseries.FAILED,
        hseries.OK,
    ]
    assert s.samples == [(1.9, 2.0, 2.1), None, None, None]
    assert [p.record for p in s.points] == [ok1, None, failed, ok2]
    # The unit is the last one a record knew; an empty unit does not erase it.
    assert s.unit == "seconds"


def test_build_of_an_unmeasured_cell_is_all_missing():
    index = hseries.index_records([rec("c0")])
    s = hseries.build(index, "h200", ["c0", "c1"], ("other.bench", PARAMS))
    assert s.values == [None, None] and s.unit == ""
    assert {p.status for p in s.points} == {hseries.MISSING}


# --- commits: a temporary repository ------------------------------------------------------

_GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
}


def _git(root, *args: str, date: int = 0) -> str:
    stamp = f"{1_700_000_000 + date} +0000"
    env = {**os.environ, **_GIT_ENV, "GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp}
    out = subprocess.run(
        ["git", "-C", str(root), *args], env=env, capture_output=True, text=True, check=True
    )
    return out.stdout.strip()


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    """main: m1 - m2 - merge(m2, side) - m3; side: branched at m2 with one commit s1."""
    root = tmp_path_factory.mktemp("repo")
    _git(root, "init", "-q", "-b", "main")
    shas = {}

    def commit(name: str, t: int) -> None:
        _git(root, "commit", "-q", "--allow-empty", "-m", name, date=t)
        shas[name] = _git(root, "rev-parse", "HEAD")

    commit("m1", 1)
    commit("m2", 2)
    _git(root, "checkout", "-q", "-b", "side")
    commit("s1", 3)
    _git(root, "checkout", "-q", "main")
    _git(root, "merge", "-q", "--no-ff", "-m", "merge", "side", date=4)
    shas["merge"] = _git(root, "rev-parse", "HEAD")
    commit("m3", 5)
    _git(root, "branch", "cafe", shas["m1"])  # a branch whose name looks like a sha
    return root, shas


def test_resolve_branch_name(repo):
    root, shas = repo
    assert commits.resolve("main", [], root, "--head") == (shas["m3"], "branch")
    assert commits.resolve(" side ", [], root, "--head") == (shas["s1"], "branch")
    # Hex-looking, but git knows it as a branch pointing elsewhere.
    assert not shas["m1"].startswith("cafe")
    assert commits.resolve("cafe", [], root, "--head") == (shas["m1"], "branch")


def test_resolve_short_sha(repo):
    root, shas = repo
    full = shas["m2"]
    assert commits.resolve(full[:7], [], root, "--head") == (full, "commit")
    assert commits.resolve(full[:7].upper(), [], root, "--head") == (full, "commit")
    assert commits.resolve(full, [], root, "--head") == (full, "commit")
    # Without a repository, the results' own commits name it.
    assert commits.resolve(full[:8], [full, shas["m1"]], None, "--head") == (full, "commit")


def test_resolve_ambiguous_prefix(repo):
    root, shas = repo
    a, b = "abcdef12" + "0" * 32, "abcdef12" + "1" * 32
    assert not any(s.startswith("abcdef12") for s in shas.values())
    for where in (None, root):
        with pytest.raises(ValueError, match="--base 'abcdef12' is ambiguous") as err:
            commits.resolve("abcdef12", [a, b, "f" * 40], where, "--base")
        assert a in str(err.value) and b in str(err.value)


def test_resolve_unknown_ref_names_the_flag(repo):
    root, _ = repo
    with pytest.raises(ValueError, match="--head 'no-such-branch' is not a commit or branch"):
        commits.resolve("no-such-branch", [], root, "--head")
    # Without a repository a branch name cannot be resolved; the message says what to pass.
    with pytest.raises(ValueError, match=r"--base 'main' is not a commit sha.*--repo"):
        commits.resolve("main", [], None, "--base")
    for bad in ("", "   ", None, 12):
        with pytest.raises(ValueError, match="--head must be a commit sha or branch name"):
            commits.resolve(bad, [], root, "--head")


def test_resolve_unknown_sha(repo):
    root, _ = repo
    # A full sha nobody has is still a name (lower case); a short one is not.
    full = "D" * 40
    assert commits.resolve(full, [], root, "--head") == ("d" * 40, "commit")
    assert commits.resolve("deadbee", [], root, "--head") == (None, "commit")
    assert commits.resolve("deadbee", [], None, "--head") == (None, "commit")


def test_mainline_with_repo_is_the_first_parent_history(repo):
    root, shas = repo
    expected = [shas["m1"], shas["m2"], shas["merge"], shas["m3"]]
    assert commits.mainline(shas["m3"], root, {}) == expected  # the side commit is not on it
    assert commits.mainline(shas["m2"], root, {}) == expected[:2]
    with pytest.raises(ValueError, match="is not in repo"):
        commits.mainline("f" * 40, root, {})


def test_mainline_without_repo_orders_by_date():
    dates = {"b": 2, "a": 2, "c": 1, "head": 5, "tie": 5, "later": 9}
    # Oldest first, same-date commits by sha; the head's tie and later commits are left out.
    assert commits.mainline("head", None, dates) == ["c", "a", "b", "head"]
    assert commits.mainline("unknown", None, dates) == ["unknown"]


def test_git_and_check_repo(repo, tmp_path):
    root, shas = repo
    assert commits.git(root, "rev-parse", "HEAD") == shas["m3"]
    assert commits.git(root, "rev-parse", "--verify", "--quiet", "nope") is None
    assert commits.git(tmp_path / "absent", "status") is None
    commits.check_repo(None)
    commits.check_repo(root)
    f = tmp_path / "file"
    f.write_text("")
    with pytest.raises(ValueError, match="--git-dir .* is not a directory"):
        commits.check_repo(f, "--git-dir")


def test_a_head_without_a_version_does_not_join_two_older_versions():
    """Head's result stores no version (it matches any, asv's rule); the runs before it are
    of two versions: only the newer version's runs keep their values, so a series never
    joins two codes."""
    from dataclasses import replace

    versions = ["v1", "v1", "v2", "v2", None]
    records = [
        replace(rec(f"c{i}", 10.0 if v == "v1" else 20.0), bench_version=v)
        for i, v in enumerate(versions)
    ]
    index = hseries.index_records(records)
    s = hseries.build(index, "h200", [f"c{i}" for i in range(5)], (BENCH, PARAMS))
    assert [p.status for p in s.points] == [hseries.OTHER_VERSION] * 2 + [hseries.OK] * 3
    assert s.values == [None, None, 20.0, 20.0, 20.0]
    assert hseries.other_version(s) == "c1"


@given(
    st.lists(
        st.one_of(st.none(), st.tuples(st.sampled_from([None, "v1", "v2", "v3"]), st.booleans())),
        min_size=1,
        max_size=12,
    )
)
def test_series_and_figures_keep_the_same_runs_of_a_changed_benchmark(runs):
    """Along one cell's commits (some without a result, some failed, versions changing back
    and forth or not stored): the regress series and the figures
    (:func:`ltx2k.report.plots.current_version`) leave out exactly the same runs, so a
    dashboard line and a verdict are always of one code."""
    from dataclasses import replace

    from ltx2k.report.plots import current_version

    commits = [f"c{i:02d}" for i in range(len(runs))]
    records = [
        replace(rec(c, 1.0 + i if ok else None), bench_version=v, date=i)
        for i, (c, run) in enumerate(zip(commits, runs, strict=True))
        if run is not None
        for v, ok in [run]
    ]
    s = hseries.build(hseries.index_records(records), "h200", commits, KEY)
    left_out = {p.commit for p in s.points if p.status == hseries.OTHER_VERSION}
    drawn = {r.commit for r in current_version(records)}
    assert left_out == {r.commit for r in records} - drawn
    kept = {r.bench_version for r in records if r.commit in drawn} - {None}
    assert len(kept) <= 1
