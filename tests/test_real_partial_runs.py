"""Result files real ``asv run``s left, judged by ``ltx2k regress`` and by ``asv compare``.

``tests/data/cpu-partial-results`` (its README says how it was made) holds three commits
of one CPU-interpreter runner: one measured whole, the next with one parameter
combination of split RoPE's ``per_head`` raising (asv stores null for it), and one whose
package did not build (asv stores null for every benchmark). Where asv compare has an
opinion on a cell measured at both ends, a failure introduced ("!", counted as worse:
asv continuous fails) or fixed ("*", better), regress gives the same one.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ltx2k.analysis.model import Report
from ltx2k.cli import main

DATA = Path(__file__).parent / "data" / "cpu-partial-results"
MACHINE = "cpu-interpreter"
# Each commit's result file, by the prefix asv names it with.
WHOLE, RAISES, UNBUILT = "7e69bce9", "e4e2edb4", "458ce307"


def _commit(prefix: str) -> str:
    (path,) = (DATA / MACHINE).glob(f"{prefix}-*.json")
    return json.loads(path.read_text())["commit_hash"]


@pytest.fixture(scope="module")
def conf(tmp_path_factory) -> Path:
    """An asv config whose results are the data; its repository has none of their commits
    (asv compare then takes the hashes as given)."""
    root = tmp_path_factory.mktemp("asv-compare")
    repo = root / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    path = root / "asv.conf.json"
    path.write_text(
        json.dumps(
            {
                "version": 1,
                "project": "ltx2k",
                "repo": str(repo),
                "branches": ["main"],
                "environment_type": "existing",
                "results_dir": str(DATA),
                "html_dir": str(root / "html"),
            }
        )
    )
    return path


def _asv_marks(conf: Path, before: str, after: str) -> dict[str, tuple[str, str, str]]:
    """{"bench(params)": (mark, before, after)} of every row asv compare marks."""
    proc = subprocess.run(
        [sys.executable, "-m", "asv", "compare", "--config", str(conf), "--machine", MACHINE]
        + [before, after],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    marks = {}
    for line in proc.stdout.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[0] and re.fullmatch(r"[-+!*x]", cells[0]):
            marks[cells[4]] = (cells[0], cells[1], cells[2])
    return marks


def _regress(head: str, base: str, tmp_path: Path) -> tuple[int, Report, str]:
    js = tmp_path / "r.json"
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(
            ["regress", "--results", str(DATA), "--head", head, "--baseline", base]
            + ["--json", str(js)]
        )
    assert "Traceback" not in err.getvalue(), err.getvalue()
    return rc, Report.from_json(json.loads(js.read_text())), out.getvalue()


def _asv_name(row) -> str:
    return f"{row.benchmark}({', '.join(repr(v) for _, v in row.params)})"


@pytest.mark.parametrize(
    ("before", "after", "n_broken"),
    [(WHOLE, RAISES, 3), (RAISES, UNBUILT, 11)],
    ids=["one-combination-raises", "commit-does-not-build"],
)
def test_a_failure_asv_compare_counts_as_worse_is_a_regression(
    conf, tmp_path, before, after, n_broken
):
    before, after = _commit(before), _commit(after)
    marks = _asv_marks(conf, before, after).items()
    # asv's "!" also takes a cell skipped at base (NaN: not selected by --bench, or not
    # applicable), of which nothing says it ever worked: regress leaves those unjudged.
    introduced = {k for k, (mark, was, _) in marks if mark == "!" and was != "n/a"}
    assert len(introduced) == n_broken
    rc, report, markdown = _regress(after, before, tmp_path)
    flagged = {_asv_name(row): c for row, m, c in report.cells("regression") if m == MACHINE}
    assert set(flagged) == introduced
    for c in flagged.values():
        assert c.head is None and c.base is not None and c.why == "failed at head, measured at base"
    assert rc == 2 and report.status == "regression"
    assert "(failed at head, measured at base) ❌" in markdown
    # A commit that did not build is named as one cause, not only as N regressions.
    whole_failure = [n for n in report.notes if "every benchmark failed at head" in n]
    assert len(whole_failure) == (1 if n_broken == 11 else 0), report.notes


def test_a_failure_fixed_is_an_improvement_as_in_asv_compare(conf, tmp_path):
    before, after = _commit(UNBUILT), _commit(RAISES)
    marks = _asv_marks(conf, before, after).items()
    # asv's "*" also takes a cell skipped at head (NaN), which has no value to be better.
    fixed = {k for k, (mark, _, now) in marks if mark == "*" and now != "n/a"}
    rc, report, _ = _regress(after, before, tmp_path)
    better = {_asv_name(row) for row, m, c in report.cells("improvement") if m == MACHINE}
    assert fixed and better == fixed
    # what failed at both ends has no verdict, and says so
    both = [c for row, m, c in report.cells("insufficient") if "per_head" in _asv_name(row)]
    assert any(c.why == "failed at head" for c in both)
    assert rc == 0 and report.status == "ok"


def test_the_first_screen_shows_a_failure_at_head_as_the_regression_it_is():
    """A benchmark that failed at head after a value at base: its first-screen cell carries
    the report's verdict and says why, with the anchor the status line links to."""
    from ltx2k.analysis import regress
    from ltx2k.history.records import load_results
    from ltx2k.report import firstscreen

    records, problems = load_results(DATA)
    # The three commits were made in one go (one stored date): order them as made.
    rank = {_commit(p): i for i, p in enumerate((WHOLE, RAISES, UNBUILT))}
    records = [dataclasses.replace(r, date=r.date + rank[r.commit]) for r in records]
    report = regress.compare(records, _commit(UNBUILT), baseline=_commit(WHOLE), problems=problems)
    flagged = {(row.benchmark, row.params) for row, m, c in report.cells("regression")}
    (view,) = firstscreen.build_views(records, report, [MACHINE])
    shown = [c for t in view.tables for _, cells in t.rows for c in cells if c.flag == "regression"]
    assert shown
    for c in shown:
        assert c.value is None and c.title.startswith("failed at head"), c
        assert c.cell_id and any(
            c.cell_id == firstscreen.anchor("fs", MACHINE, *k) for k in flagged
        )
