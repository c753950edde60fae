"""Property tests: ``regress``, ``publish`` and ``confirm``'s planning finish on any history
runners can leave (tests/histories.py), and what they write is whole and honest.

The example count comes from the Hypothesis profile (tests/conftest.py): ``ci`` by
default, ``--hypothesis-profile=long`` for a deliberate search of many thousands.
"""

from __future__ import annotations

import ast
import contextlib
import io
import itertools
import json
import math
import re
import tempfile
from dataclasses import replace
from pathlib import Path

import histories as H
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ltx2k.analysis.model import Report
from ltx2k.cli import main
from ltx2k.report.markdown import format_cell
from ltx2k.workload import metrics

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

_SLOW_OK = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])

# What a number must never read as ("None:" opens a sentence of the page's own).
_BAD_WORDS = re.compile(r"(?<![\w-])(None|nan|NaN|inf|Infinity)(?![\w:-])")


@pytest.fixture(scope="module")
def repo():
    with tempfile.TemporaryDirectory(prefix="ltx2k-histories-") as root:
        yield H.shared_repo(root)


def _cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(argv)
    return rc, out.getvalue(), err.getvalue()


def _strict_json(text: str):
    def refuse(token):
        raise AssertionError(f"non-RFC-8259 token {token} in the JSON")

    return json.loads(text, parse_constant=refuse)


def _modes(h: H.History, repo: H.Repo) -> tuple[list[list[str]], str]:
    """The five ways ``regress`` is run on a history, and its head."""
    head = repo.commits[h.n_commits - 1]
    base = repo.commits[max(h.n_commits - 2, 0)]
    r = ["--repo", str(repo.path)]
    modes = [["--last", "20", *r], ["--last", "5", *r], ["--last", "20"]]
    if base == head:  # one commit: no baseline but head itself, which regress refuses
        return modes, head
    return [*modes, ["--baseline", base, *r], ["--baseline", base]], head


def check_report(report: dict, markdown: str, rc: int) -> None:
    """The properties every regress report holds, whatever history it judged."""
    rep = Report.from_json(report)
    # The exit code, the status and the summary line say the same.
    first = markdown.splitlines()[0]
    regs = rep.cells("regression")
    assert rc == rep.exit_code, (rc, rep.status)
    if rep.status == "regression":
        assert rc == 2 and regs
        assert f"{len(regs)} regression(s)" in first, first
    else:
        assert not regs
        assert ("Not enough data" in first) == (rep.status == "insufficient"), first
    counted = {f: len(rep.cells(f)) for f in ("improvement", "ok", "insufficient")}
    assert f"{counted['improvement']} improvement(s), {counted['ok']} unchanged" in first
    assert f"{counted['insufficient']} without data" in first
    # No None / nan / inf where a number is shown.
    bad = _BAD_WORDS.search(markdown)
    assert bad is None, markdown[max(bad.start() - 200, 0) : bad.end() + 100]
    keys = {(r.benchmark, r.params) for r in rep.rows}
    for row in rep.rows:
        derived = metrics.METRICS.get(row.metric)
        source = (
            (f"{row.benchmark.rpartition('.')[0]}.{derived.derived_from}", row.params)
            if derived is not None and derived.derived_from
            else None
        )
        for m, c in row.cells.items():
            text = format_cell(c)
            assert "vs 0" not in text or c.base == 0, (row.benchmark, m, c)
            if _failure_verdict(c):
                # A benchmark that failed at one end: the end it failed at has no value,
                # and the cell says which failed.
                assert c.flag in ("regression", "improvement") and c.ratio is None, c
                assert (c.head is None) == (c.flag == "regression") != (c.base is None), c
                assert f"({c.why})" in text, (text, c)
            elif c.flag in ("regression", "improvement", "suspected"):
                # A judged cell has its own numbers: a head, a base and a ratio or a 0 base.
                assert c.head is not None and c.base is not None, (row.benchmark, m, c)
                assert c.ratio is not None or c.base == 0, (row.benchmark, m, c)
                if source is not None and source in keys:
                    # one verdict per measurement: the source's, never one of its own
                    assert c.verdict_of, (row.benchmark, m, c)
            for x in (c.ratio, c.head, c.base, c.p_value, c.noise):
                assert x is None or math.isfinite(x), (row.benchmark, m, c)


def _failure_verdict(c) -> bool:
    """A verdict on a benchmark that failed at head or at base (asv stored null there)."""
    return c.flag in ("regression", "improvement") and c.test == "none"


def run_regress(h: H.History, repo: H.Repo, tmp: Path) -> list[tuple[Path, int]]:
    modes, head = _modes(h, repo)
    results = tmp / "results"
    written = []
    for i, mode in enumerate(modes):
        js, md = tmp / f"r{i}.json", tmp / f"r{i}.md"
        rc, out, err = _cli(
            ["regress", "--results", str(results), "--head", head, *mode]
            + ["--json", str(js), "--markdown", str(md)]
        )
        assert rc in (0, 2, 3), (mode, rc, err[-2000:])
        assert "Traceback" not in err, err
        assert js.is_file() and md.is_file(), (mode, err)
        check_report(_strict_json(js.read_text()), md.read_text(), rc)
        written.append((js, rc))
    return written


def run_confirm_plan(h: H.History, repo: H.Repo, tmp: Path, report: Path) -> None:
    """``confirm --dry-run``, the plan up to the first GPU step, for every machine; and
    its targets and plans: each one a flagged, measured regression cell of that machine,
    planned across that cell's own step."""
    from ltx2k.confirm import targets

    data = _strict_json(report.read_text())
    for m in h.machines:
        rc, out, err = _cli(
            ["confirm", "--report", str(report), "--machine", m, "--dry-run"]
            + ["--config", str(tmp / "asv.conf.json"), "--work", str(tmp / f"confirm-{m}")]
        )
        assert "Traceback" not in err, err
        assert rc in (0, 2), (m, rc, err[-2000:])
        flagged = {
            (r["benchmark"], tuple(tuple(p) for p in r["params"])): r["cells"][m]
            for r in data["rows"]
            if (r["cells"].get(m) or {}).get("flag") == "regression"
        }
        for cell in flagged.values():
            # measured at both ends, or failed at head after a measured base
            assert cell["base"] is not None, cell
            assert cell["head"] is not None or cell["test"] == "none", cell
        chosen, _ = targets.read_report(report, m)
        assert {(t.benchmark, t.params) for t in chosen} == {
            k for k, c in flagged.items() if c.get("step")
        }
        for t in chosen:
            step = flagged[(t.benchmark, t.params)]["step"]
            plan = targets.plan(t, repo.path)
            assert plan.commits[0] == step["last_good"] and plan.commits[-1] == step["first_bad"]
            assert list(plan.commits[1:]) == step["range"]


@_SLOW_OK
@given(h=H.histories())
def test_regress_and_confirm_finish_on_any_history(h, repo):
    with tempfile.TemporaryDirectory(prefix="ltx2k-history-") as d:
        tmp = Path(d)
        H.write(h, tmp, repo)
        written = run_regress(h, repo, tmp)
        run_confirm_plan(h, repo, tmp, written[0][0])


# A whole publish draws every figure (seconds each): a tenth of the profile's examples.
# The page's own rendering, without figures, gets them all (below).
@settings(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    max_examples=max(settings.default.max_examples // 10, 3),
)
@given(h=H.histories(max_commits=4, max_machines=2))
def test_publish_finishes_on_any_history(h, repo):
    with tempfile.TemporaryDirectory(prefix="ltx2k-publish-") as d:
        tmp = Path(d)
        H.write(h, tmp, repo)
        rc, out, err = _cli(
            ["publish", "--config", str(tmp / "asv.conf.json"), "--html", str(tmp / "html")]
        )
        assert "Traceback" not in err, err
        assert rc == 0, err[-3000:]
        page = (tmp / "html" / "summary.html").read_text()
        assert (tmp / "html" / "index.html").is_file()
        text = re.sub(r"<[^>]*>", " ", page)
        bad = _BAD_WORDS.search(text)
        assert bad is None, text[max(bad.start() - 300, 0) : bad.end() + 100]


@_SLOW_OK
@given(h=H.histories())
def test_the_summary_page_renders_any_history(h, repo):
    """The summary page and its first screen, with the verdicts publish computes,
    on any history: no exception, no None / nan / inf shown."""
    from ltx2k.history.records import load_results
    from ltx2k.report import page, publish

    with tempfile.TemporaryDirectory(prefix="ltx2k-page-") as d:
        tmp = Path(d)
        results = H.write(h, tmp, repo)
        records, problems = load_results(results)
        report = publish.latest_vs_previous(results, repo=repo.path, loaded=(records, problems))
        html = page.render_summary(
            records=records, problems=problems, report=report, images={}, machines_info={}
        )
        text = re.sub(r"<[^>]*>", " ", html)
        bad = _BAD_WORDS.search(text)
        assert bad is None, text[max(bad.start() - 300, 0) : bad.end() + 100]


def test_full_run_then_cold_only_runs(repo, tmp_path):
    """A full first run, five runs of one metric, a +9% step in it: both outputs are
    written, exit 2, the step is named at its commit, and the derived metric's rows
    that have no value at head are not counted."""
    t = H.template()
    cold = t.metric_names(H.SOURCE)
    h = H.History(
        6,
        {"h200": (H.Run(0, t.names), *(H.Run(i, cold) for i in range(1, 6)))},
        steps=(H.Step("bench_kernels.SplitRope.time_device_cold", None, 4, 1.09),),
        noise=0.005,
        seed=3,
    )
    H.write(h, tmp_path, repo)
    head = repo.commits[5]
    js, md = tmp_path / "r.json", tmp_path / "r.md"
    rc, out, err = _cli(
        ["regress", "--results", str(tmp_path / "results"), "--repo", str(repo.path)]
        + ["--head", head, "--last", "20", "--json", str(js), "--markdown", str(md)]
    )
    assert rc == 2, err
    report = _strict_json(js.read_text())
    check_report(report, md.read_text(), rc)
    rep = Report.from_json(report)
    regs = rep.cells("regression")
    assert regs and all(r.metric == H.SOURCE and r.kernel == "SplitRope" for r, _, _ in regs)
    assert {c.step.first_bad for _, _, c in regs} == {repo.commits[4]}
    derived = [(r, c) for r, _, c in rep.cells() if r.metric == H.DERIVED]
    assert derived and all(c.flag == "insufficient" for _, c in derived)
    assert all(c.why == "not measured at head" for _, c in derived)


# --- each output on its own -------------------------------------------------------------------


def _history_with_step(repo, tmp_path) -> tuple[Path, str]:
    t = H.template()
    h = H.History(
        4,
        {"h200": tuple(H.Run(i, t.metric_names(H.SOURCE)) for i in range(4))},
        steps=(H.Step("bench_kernels.SplitRope.time_device_cold", None, 3, 1.3),),
        noise=0.005,
    )
    return H.write(h, tmp_path, repo), repo.commits[3]


def test_a_broken_markdown_still_writes_the_json(repo, tmp_path, monkeypatch):
    """An error inside one output (here the Markdown) is named on stderr as an internal
    error; the JSON is still written; a regression still exits 2, else exit 4."""
    from ltx2k.report import markdown

    results, head = _history_with_step(repo, tmp_path)

    def broken(report):
        raise TypeError("a bug in the Markdown")

    monkeypatch.setattr(markdown, "render_markdown", broken)
    js, md = tmp_path / "r.json", tmp_path / "r.md"
    argv = ["regress", "--results", str(results), "--head", head, "--json", str(js)]
    rc, out, err = _cli([*argv, "--markdown", str(md), "--last", "20", "--repo", str(repo.path)])
    assert rc == 2
    assert "internal error: the --markdown output was not written" in err
    assert "a bug in the Markdown" in err and "Traceback" in err
    assert js.is_file() and not md.exists()
    report = Report.from_json(_strict_json(js.read_text()))
    assert report.status == "regression"
    # Without a regression (two commits before the step) the incompleteness is the exit status.
    before = ["regress", "--results", str(results), "--head", repo.commits[2], "--json", str(js)]
    rc, out, err = _cli([*before, "--markdown", str(md), "--baseline", repo.commits[1]])
    assert rc == 4, err
    assert "the report is incomplete (exit 4)" in err


def test_a_broken_figure_leaves_the_rest_of_the_dashboard(repo, tmp_path, monkeypatch):
    """One figure that raises: named on stderr, left out of the page; asv's site, the
    summary page and the other figures are published; exit 4."""
    from ltx2k.report import plots

    results, _ = _history_with_step(repo, tmp_path)

    def broken(*args, **kwargs):
        raise ValueError("a bug in the roofline")

    monkeypatch.setattr(plots, "roofline", broken)
    rc, out, err = _cli(
        ["publish", "--config", str(tmp_path / "asv.conf.json"), "--html", str(tmp_path / "html")]
    )
    assert rc == 4, err
    assert "internal error: the figure summary/roofline_" in err
    assert "a bug in the roofline" in err
    html = tmp_path / "html"
    assert (html / "index.html").is_file() and (html / "summary.html").is_file()
    assert list((html / "summary").glob("history_*.png"))
    assert not list((html / "summary").glob("roofline_*.png"))
    assert "roofline_" not in (html / "summary.html").read_text()


@given(
    a=st.lists(st.floats(0.5, 2.0).map(lambda x: round(x, 2)), min_size=1, max_size=20),
    b=st.lists(st.floats(0.5, 2.0).map(lambda x: round(x, 2)), min_size=1, max_size=20),
)
@settings(max_examples=200, deadline=None)
def test_the_rank_test_is_asvs(a, b):
    """ltx2k's Mann-Whitney U (asv's, with a memo that is kept) gives asv's U and p,
    ties included (values rounded to two digits make many)."""
    from asv import _stats

    from ltx2k.runner import asv_compat

    _stats._mann_whitney_u_memo.clear()
    u, p = _stats.mann_whitney_u(a, b)
    assert asv_compat.mann_whitney_u(a, b) == (u, pytest.approx(p, rel=1e-12, abs=1e-15))


# How a runner's head file can come back damaged: cut off mid-write, a value of the wrong
# type or out of range, lists cut short, or the file of another commit or another machine
# under head's name.
def _truncate(text: str, data: dict, at: float) -> str:
    return text[: int(len(text) * at)]


def _set_value(value):
    def damage(text: str, data: dict, at: float) -> str:
        name = sorted(data["results"])[int(at * (len(data["results"]) - 1))]
        data["results"][name][0] = [value] * len(data["results"][name][0] or [1])
        return json.dumps(data)

    return damage


def _cut_lists(text: str, data: dict, at: float) -> str:
    for row in data["results"].values():
        if isinstance(row[0], list) and len(row[0]) > 1:
            row[0] = row[0][:1]
    return json.dumps(data)


def _other_commit(text: str, data: dict, at: float) -> str:
    data["commit_hash"] = data["commit_hash"][:4]
    return json.dumps(data)


def _other_machine(text: str, data: dict, at: float) -> str:
    data["params"]["machine"] = f"{data['params']['machine']}-b"  # another runner's file
    return json.dumps(data)


DAMAGE = {
    "truncated": _truncate,
    "another machine's file": _other_machine,
    "string value": _set_value("12.5"),
    "bool value": _set_value(True),
    "negative time": _set_value(-1.0),
    "lists cut short": _cut_lists,
    "short commit hash": _other_commit,
}


@_SLOW_OK
@given(
    h=H.histories(max_commits=5, max_machines=2),
    damage=st.sampled_from(sorted(DAMAGE)),
    at=st.floats(0.05, 0.95),
)
def test_a_damaged_head_file_never_passes_as_fine(h, damage, at, repo):
    """Whatever else the history holds, regress never exits 0 ("no regressions") when a
    judged machine's head file is damaged: what it measured could not all be read. The
    report names the file."""
    modes, head = _modes(h, repo)
    machine = next((m for m in h.machines if h.measured(m)[-1:] == (h.n_commits - 1,)), None)
    if machine is None:
        return  # no machine measured head: nothing of head's to damage
    with tempfile.TemporaryDirectory(prefix="ltx2k-damaged-") as d:
        tmp = Path(d)
        results = H.write(h, tmp, repo)
        (path,) = (results / machine).glob(f"{head[:8]}-*.json")
        text = path.read_text()
        new = DAMAGE[damage](text, json.loads(text), at)
        if new == text:
            return  # a history whose head file this damage cannot change
        path.write_text(new)
        for mode in modes:
            js, md = tmp / "r.json", tmp / "r.md"
            rc, _, err = _cli(
                ["regress", "--results", str(results), "--head", head, *mode]
                + ["--json", str(js), "--markdown", str(md)]
            )
            assert "Traceback" not in err, err
            assert rc in (2, 3), (damage, mode, rc, err[-1500:])
            report = _strict_json(js.read_text())
            check_report(report, md.read_text(), rc)
            assert any(path.name in n for n in report["notes"]), report["notes"]


@_SLOW_OK
@given(h=H.histories(max_commits=8, max_machines=2, recoded=True))
def test_a_benchmark_whose_code_changed_is_not_judged_across_the_change(h, repo):
    """A benchmark whose code changed at commit k (asv stores a new version hash; the new
    code measures other work) starts a new series there, as asv compares and draws only
    results of one version: no step of its cells (or of cells sharing their verdict) runs
    from before k to k or later, and head against a base before k has no verdict."""
    name, k, _ = h.recoded
    first_new = repo.commits[k]
    old = set(repo.commits[:k])
    derived_of = {
        f"{name.rpartition('.')[0]}.{m.name}"
        for m in metrics.METRICS.values()
        if m.derived_from == name.rpartition(".")[2]
    }
    with tempfile.TemporaryDirectory(prefix="ltx2k-recoded-") as d:
        tmp = Path(d)
        H.write(h, tmp, repo)
        modes, _ = _modes(h, repo)
        for (js, _), mode in zip(run_regress(h, repo, tmp), modes, strict=True):
            rep = Report.from_json(_strict_json(js.read_text()))
            for row, m, c in rep.cells():
                if row.benchmark != name and row.benchmark not in derived_of:
                    continue
                if "--baseline" in mode and mode[mode.index("--baseline") + 1] in old:
                    assert c.flag == "insufficient", (mode, row.benchmark, m, c)
                for s in (c.step, *c.earlier):
                    if s is not None:
                        assert not (s.last_good in old and first_new in (s.first_bad, *s.range)), (
                            mode, row.benchmark, m, s,
                        )  # fmt: skip


@st.composite
def _failing_heads(draw) -> H.History:
    """A history whose head runs stored null for some or all cells (a benchmark that
    raised, or a commit that did not build: asv stores null for every benchmark)."""
    h = draw(H.histories(max_commits=6, max_machines=2))
    share = draw(st.sampled_from((0.3, 1.0)))
    head = h.n_commits - 1
    runs = {
        m: rs[:-1] + (replace(rs[-1], failed=share, skipped=0.0),) if rs[-1].commit == head else rs
        for m, rs in h.runs.items()
    }
    return replace(h, runs=runs)


def _stored(path: Path, machine: str, param_names: dict) -> dict:
    """{(benchmark, params): (value, version)} as asv's own reader gives them: None where
    the cell failed, NaN where it was skipped."""
    from asv.results import Results

    res = Results.load(str(path), machine_name=machine)
    out = {}
    for name in res.get_all_result_keys():
        params = res.get_result_params(name)
        version = res.benchmark_version.get(name)
        values = res.get_result_value(name, params)
        for combo, v in zip(itertools.product(*params), values, strict=True):
            key = tuple(
                (n, ast.literal_eval(x)) for n, x in zip(param_names[name], combo, strict=True)
            )
            out[(name, key)] = (v, version)
    return out


@_SLOW_OK
@given(h=_failing_heads())
def test_a_benchmark_that_fails_at_head_is_never_fine(h, repo):
    """A cell with a value at the machine's previous run and none at head (asv stored
    null: it raised, or the commit did not build) is what asv compare marks "introduced a
    failure" and counts as worse, so asv continuous fails: regress flags it a regression,
    against that commit and along the history, and never exits 0."""
    head = h.n_commits - 1
    with tempfile.TemporaryDirectory(prefix="ltx2k-failing-") as d:
        tmp = Path(d)
        results = H.write(h, tmp, repo)
        bench = json.loads((results / "benchmarks.json").read_text())
        names = {k: v.get("param_names", []) for k, v in bench.items() if isinstance(v, dict)}
        broken = {}  # machine -> (its previous commit, the cells it broke)
        for m, rs in h.runs.items():
            if len(rs) < 2 or rs[-1].commit != head:
                continue
            (now_file,) = (results / m).glob(f"{repo.commits[head][:8]}-*.json")
            (then_file,) = (results / m).glob(f"{repo.commits[rs[-2].commit][:8]}-*.json")
            now, then = _stored(now_file, m, names), _stored(then_file, m, names)
            cells = set()
            for key, (v, version) in now.items():
                old, old_version = then.get(key, (None, None))
                if v is not None or old is None or math.isnan(old):
                    continue
                if version is None or old_version is None or version == old_version:
                    cells.add(key)
            if cells:
                broken[m] = (rs[-2].commit, cells)
        if not broken:
            return
        r = ["--repo", str(repo.path)]
        modes = [["--last", "20", *r]]
        base = h.n_commits - 2
        modes.append(["--baseline", repo.commits[base], *r])
        for mode in modes:
            js, md = tmp / "r.json", tmp / "r.md"
            rc, _, err = _cli(
                ["regress", "--results", str(results), "--head", repo.commits[head], *mode]
                + ["--json", str(js), "--markdown", str(md)]
            )
            assert "Traceback" not in err, err
            report = _strict_json(js.read_text())
            check_report(report, md.read_text(), rc)
            rep = Report.from_json(report)
            judged = 0
            for m, (prev, cells) in broken.items():
                if "--baseline" in mode and prev != base:
                    continue
                for row in rep.rows:
                    if (row.benchmark, row.params) in cells:
                        judged += 1
                        c = row.cells[m]
                        assert c.flag == "regression", (mode, row.benchmark, row.params, m, c)
                        assert c.why and c.why.startswith("failed "), c
            if judged:
                assert rc == 2, (mode, rc, err[-1500:])


@pytest.mark.parametrize("prefix", ["00000000", "ffffffff"])
def test_a_renamed_copy_of_heads_file_does_not_replace_it(prefix, repo, tmp_path):
    """A copy of head's result file under another name, holding other values (asv reads
    the commit from the field, so both files are head's): the file named as asv names it is
    judged, whether the copy's name sorts before or after it; the copy is a load problem."""
    t = H.template()
    cold = t.metric_names(H.SOURCE)
    h = H.History(5, {"h200": tuple(H.Run(i, cold) for i in range(5))}, noise=0.005, seed=4)
    results = H.write(h, tmp_path, repo)
    head = repo.commits[4]
    (path,) = (results / "h200").glob(f"{head[:8]}-*.json")
    data = json.loads(path.read_text())
    for row in data["results"].values():
        row[0] = [None if v is None or v != v else v * 2.0 for v in row[0]]
        for i, col in enumerate(data["result_columns"]):
            if col.startswith("stats_") or col == "samples":
                row[i] = None
    copy = path.with_name(prefix + path.name[8:])
    copy.write_text(json.dumps(data))
    js, md = tmp_path / "r.json", tmp_path / "r.md"
    for mode in (["--last", "20", "--repo", str(repo.path)], ["--baseline", repo.commits[3]]):
        rc, _, err = _cli(
            ["regress", "--results", str(results), "--head", head, *mode]
            + ["--json", str(js), "--markdown", str(md)]
        )
        assert rc == 0, (mode, err[-2000:])
        assert "commit-mismatch" in err and copy.name in err
