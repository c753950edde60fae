"""Which commit the dashboard judges, and in what order histories are read, on the data
runners leave: dates that disagree with git (asv stores author dates, which a rebase-merge
keeps), runs killed before their first benchmark, files of another format, one machine's
results in several environments, a commit force-pushed away.
"""

from __future__ import annotations

import io
import json
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path

import histories as H
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ltx2k.analysis import regress
from ltx2k.history import commits as git_commits
from ltx2k.history.records import load_results
from ltx2k.history.window import only_env
from ltx2k.report import publish
from ltx2k.report.plots import data as plot_data

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

_SLOW_OK = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
BENCH = "bench_kernels.AdaValues9.time_device_cold"
A, B = "h200", "h100-80gb-hbm3"


@pytest.fixture(scope="module")
def repo():
    with tempfile.TemporaryDirectory(prefix="ltx2k-order-") as root:
        yield H.shared_repo(root)


def _history(n: int, step_at: int | None, machines=(A,)) -> H.History:
    names = H.template().names
    runs = {m: tuple(H.Run(i, names) for i in range(n)) for m in machines}
    steps = (H.Step(BENCH, None, step_at, 1.3),) if step_at is not None else ()
    return H.History(n, runs, steps, 0.01, None, None, 1)


def _rebased(repo: H.Repo, n: int, moved: int, before: int) -> H.Repo:
    """*repo*'s first *n* commits, the last *moved* of them stored with dates older than
    commit *before*'s: a pull request authored earlier and rebase-merged last."""
    dates = list(repo.dates[:n])
    for i in range(n - moved, n):
        dates[i] = repo.dates[before] - 60_000 * (n - i)
    return replace(repo, commits=repo.commits[:n], dates=tuple(dates))


@st.composite
def rebase_merges(draw):
    n = draw(st.integers(4, 12))
    moved = draw(st.integers(1, min(3, n - 2)))
    before = draw(st.integers(0, n - moved - 1))
    return n, moved, before


@_SLOW_OK
@given(case=rebase_merges())
def test_the_dashboard_judges_and_draws_the_branch_tip_whatever_the_dates(case, repo):
    n, moved, before = case
    stored = _rebased(repo, n, moved, before)
    tip = repo.commits[n - 1]
    with tempfile.TemporaryDirectory(prefix="ltx2k-order-") as d:
        results = H.write(_history(n, n - 1), Path(d), stored)
        records, problems = publish.load_drawn(results, 100, repo.path, "main")
        assert tip in {r.commit for r in records}
        report = publish.latest_vs_previous(
            results, repo=repo.path, loaded=(records, problems), branch="main"
        )
        assert report.head == tip
        assert report.status == "regression"  # the tip's own +30% step
        flagged = {row.benchmark for row, _, _ in report.cells("regression")}
        assert BENCH in flagged
        # the figures place commits in git's order, the tip last
        order = publish.drawn_order(records, repo.path, "main")
        assert plot_data.commit_order(records, order)[-1] == tip
        assert plot_data.latest_per_machine(records, order) == {A: tip}
        drawn = publish._drawn_files(records, 3, order)
        assert {p for p in drawn if Path(p).name.startswith(tip[:8])}


def test_commit_order_puts_git_order_in_the_places_dates_gave(repo):
    commits = repo.commits[:5]
    dates = [5, 1, 2, 3, 4]  # the newest commit dated first
    records = [H_record(c, d) for c, d in zip(commits, dates, strict=True)]
    records.append(H_record("f" * 40, 3))  # a commit off the branch keeps its date's place
    order = list(commits)
    got = plot_data.commit_order(records, order)
    assert got[-1] == commits[-1]
    assert [c for c in got if c in order] == order
    assert got.index("f" * 40) == 3  # by date: after 1, 2 and the first 3 (ties by sha)
    assert plot_data.commit_order(records) == sorted(
        {r.commit: r.date for r in records},
        key=lambda c: ({r.commit: r.date for r in records}[c], c),
    )


def H_record(commit: str, date: int):
    from ltx2k.history.records import Record

    return Record(
        machine=A,
        commit=commit,
        date=date,
        benchmark=BENCH,
        params=(("shape", "x"),),
        value=1.0,
        ci_99=None,
        q_25=None,
        q_75=None,
        samples=None,
        number=None,
        repeat=None,
        unit="seconds",
        env="e",
    )


def test_the_machines_table_names_the_latest_commit_in_git_order(repo):
    from ltx2k.report import page

    old, tip = repo.commits[0], repo.commits[4]
    day = 86_400_000
    # The old commit re-run after the tip: newest by date, not the GPU's latest commit.
    records = [H_record(tip, 1 * day), H_record(old, 2 * day)]
    html = page.render_summary(
        records=records, problems=[], report=None, images={}, order=list(repo.commits[:5])
    )
    row = html[html.index(f'<tr data-machine="{A}"') :].split("</tr>")[0]
    assert f"<code>{tip[:8]}</code> 1970-01-02" in row and old[:8] not in row
    by_date = page.render_summary(records=records, problems=[], report=None, images={})
    row = by_date[by_date.index(f'<tr data-machine="{A}"') :].split("</tr>")[0]
    assert f"<code>{old[:8]}</code> 1970-01-03" in row  # without git: the dates' order


def test_without_git_the_order_by_dates_is_said(repo, tmp_path):
    results = H.write(_history(6, 5), tmp_path, _rebased(repo, 6, 1, 2))
    report = regress.triage(results, repo.commits[5], last=20, log=io.StringIO())
    assert any("ordered by the dates asv stores" in n for n in report.notes)
    report = regress.triage(results, repo.commits[5], last=20, repo=repo.path, log=io.StringIO())
    assert not any("ordered by the dates" in n for n in report.notes)
    assert report.status == "regression"


@pytest.mark.parametrize("kind", ["killed", "version-1", "other-machine"])
def test_a_file_that_cannot_give_results_does_not_count_as_measured(repo, tmp_path, kind):
    """Head's three predecessors' files are a run killed before its first benchmark, an
    older asv format, or a file of another machine: a window counts them as the full
    load does, not measured, and both judge the same."""
    n = 8
    results = H.write(_history(n, n - 1), tmp_path, repo)
    for i in (n - 4, n - 3, n - 2):
        path = next((results / A).glob(f"{repo.commits[i][:8]}-*.json"))
        data = json.loads(path.read_text())
        if kind == "killed":
            data["results"] = {}
        elif kind == "version-1":
            data["version"] = 1
        else:
            data["params"]["machine"] = B
        path.write_text(json.dumps(data))
    head = repo.commits[n - 1]
    full_records, full_problems = load_results(results)
    full = regress.compare(full_records, head, problems=full_problems, last=3, repo=repo.path)
    windowed = regress.triage(results, head, last=3, repo=repo.path, log=io.StringIO())
    # the same verdicts; the problems of files outside the window are not looked for
    assert {**windowed.to_json(), "problems": []} == {**full.to_json(), "problems": []}
    assert windowed.status == "regression"
    bad = {str(p) for p in (results / A).glob("*-*.json")} - {r.path for r in full_records}
    assert len(bad) == 3
    assert bad <= {p.path for p in windowed.problems}


def _copy_as_env(results: Path, machine: str, commit: str, env: str) -> None:
    src = next((results / machine).glob(f"{commit[:8]}-*.json"))
    data = json.loads(src.read_text())
    data["env_name"] = env
    (results / machine / f"{commit[:8]}-{env}.json").write_text(json.dumps(data))


def test_env_picks_among_the_machines_that_ran_it(repo, tmp_path):
    n = 6
    results = H.write(_history(n, n - 1, machines=(A, B)), tmp_path, repo)
    head = repo.commits[n - 1]
    _copy_as_env(results, A, head, "py3.13")  # A re-ran head under another name
    with pytest.raises(ValueError, match="several environments"):
        regress.triage(results, head, last=5, repo=repo.path, log=io.StringIO())
    env = json.loads(next((results / B).glob("*.json")).read_text())["env_name"]
    report = regress.triage(results, head, last=5, repo=repo.path, env="py3.13", log=io.StringIO())
    # A is judged in py3.13 (head only: not enough history), B in its own environment
    assert set(report.machines) == {A, B}
    assert any(n.startswith(f"{B}: no results in environment 'py3.13'") for n in report.notes)
    assert {m for _, m, _ in report.cells("regression")} == {B}
    report = regress.triage(results, head, last=5, repo=repo.path, env=env, log=io.StringIO())
    assert {m for _, m, _ in report.cells("regression")} == {A, B}
    with pytest.raises(ValueError, match="--env 'nosuch': no results in that environment"):
        regress.triage(results, head, last=5, repo=repo.path, env="nosuch")


def test_the_dashboard_judges_the_other_gpus_when_one_has_several_environments(repo, tmp_path):
    n = 6
    results = H.write(_history(n, n - 1, machines=(A, B)), tmp_path, repo)
    _copy_as_env(results, A, repo.commits[n - 1], "py3.13")
    report = publish.latest_vs_previous(results, repo=repo.path)
    assert {m for _, m, _ in report.cells("regression")} == {B}
    assert any(n.startswith(f"{A}: not judged here") and "--env" in n for n in report.notes)


def test_a_newest_result_of_a_commit_git_lost_does_not_cost_the_verdicts(repo, tmp_path):
    n = 6
    results = H.write(_history(n, n - 1), tmp_path, repo)
    src = next((results / A).glob(f"{repo.commits[n - 1][:8]}-*.json"))
    data = json.loads(src.read_text())
    data["commit_hash"] = "a" * 40  # force-pushed away
    data["date"] += 3_600_000
    (results / A / f"{'a' * 8}-{data['env_name']}.json").write_text(json.dumps(data))
    report = publish.latest_vs_previous(results, repo=repo.path, branch="main")
    assert report.head == repo.commits[n - 1]
    assert report.status == "regression"
    records, _ = publish.load_drawn(results, 100, repo.path, "main")
    assert repo.commits[n - 1] in {r.commit for r in records}


def test_newest_prefers_the_branch_then_a_commit_git_knows(repo):
    dates = {c: d for c, d in zip(repo.commits[:4], repo.dates[:4], strict=True)}
    dates["b" * 40] = repo.dates[3] + 1  # newest by date, unknown to git
    assert git_commits.newest(dates, repo.path, "main") == (repo.commits[3], True)
    assert git_commits.newest(dates, None) == ("b" * 40, False)
    assert git_commits.newest(dates, repo.path, "no-such-branch") == ("b" * 40, False)
    assert git_commits.newest({}, repo.path) == (None, False)


def test_window_env_keeps_machines_without_it():
    index = {(A, "c1"): (1, frozenset({"x"})), (B, "c1"): (1, frozenset({"y"}))}
    assert only_env(index, "x") == index
    index[(A, "c2")] = (2, frozenset({"z"}))
    assert (A, "c2") not in only_env(index, "x")


def test_publish_refuses_a_site_folder_it_did_not_make(repo, tmp_path):
    results = H.write(_history(3, None), tmp_path, repo)
    conf = tmp_path / "asv.conf.json"
    keep = tmp_path / "notes"
    keep.mkdir()
    (keep / "notes.txt").write_text("precious")
    a_file = tmp_path / "a-file"
    a_file.write_text("precious")
    for html, match in (
        (keep, "holds files but no dashboard"),
        (a_file, "is not a folder"),
        (results, "is or holds the results folder"),
        (tmp_path, "is or holds"),
    ):
        with pytest.raises(ValueError, match=match):
            publish.publish_dashboard(conf, html_dir=html)
    assert (keep / "notes.txt").read_text() == "precious"
    assert a_file.read_text() == "precious"
    assert any((results / A).glob("*.json"))
    shutil.rmtree(tmp_path / "html", ignore_errors=True)
