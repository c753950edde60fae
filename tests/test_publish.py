"""``ltx2k publish``'s checks and defaults (:func:`ltx2k.report.publish.publish_dashboard`),
and publish's asv access going through :mod:`ltx2k.runner.asv_compat`.

The site itself (asv's pages, the summary) is tested in test_report.py.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from ltx2k import cli
from ltx2k.report import publish
from ltx2k.runner import asv_compat
from tools.synthetic_history import generate_history

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    return generate_history(tmp_path_factory.mktemp("synth") / "h", n_commits=3, seed=3)


@pytest.fixture
def calls(monkeypatch):
    """What publish_dashboard hands to publish() and latest_vs_previous(), without asv running."""
    seen: dict = {}

    def fake_publish(asv_conf, results_dir, html_dir, **kw):
        seen["publish"] = (Path(results_dir), Path(html_dir), kw)
        return publish.PublishResult(Path(html_dir), Path(html_dir) / "summary.html")

    def fake_latest(results_dir, *, repo=None, loaded=None, branch=None):
        seen["latest"] = (Path(results_dir), repo)
        assert loaded is not None  # the results are read once, by publish_dashboard
        return "latest-report"

    monkeypatch.setattr(publish, "publish", fake_publish)
    monkeypatch.setattr(publish, "latest_vs_previous", fake_latest)
    return seen


def _conf(tmp_path: Path, **fields) -> Path:
    conf = tmp_path / "asv.conf.json"
    conf.write_text(json.dumps({"version": 1, "repo": ".", **fields}))
    return conf


def test_missing_results_dir_is_refused_and_named_by_who_chose_it(tmp_path, calls):
    conf = _conf(tmp_path, results_dir="res", html_dir="site")
    with pytest.raises(ValueError, match=r"^results_dir='.*/nope' is not a directory \(asv run"):
        publish.publish_dashboard(conf, tmp_path / "nope")
    # from the conf: not a parameter the caller passed, so not named as one
    with pytest.raises(ValueError, match=r"^results dir '.*/res' is not a directory"):
        publish.publish_dashboard(conf)
    assert calls == {}


def test_empty_results_dir_leaves_the_site_alone(tmp_path, calls):
    conf = _conf(tmp_path)
    (tmp_path / "results" / "somegpu").mkdir(parents=True)
    html = tmp_path / "html"
    html.mkdir()
    (html / "index.html").write_text("the previous site")
    with pytest.raises(ValueError) as e:
        publish.publish_dashboard(conf, html_dir=html)
    msg = str(e.value)
    assert msg.startswith(f"results dir {str(tmp_path / 'results')!r} holds no asv results (")
    assert "problem(s)); nothing published" in msg and repr(str(html)) in msg
    assert calls == {} and (html / "index.html").read_text() == "the previous site"


def test_without_a_report_the_newest_commit_is_judged(history, tmp_path, calls):
    html = tmp_path / "html"
    res = publish.publish_dashboard(history.conf, history.results_dir, html, repo=history.repo)
    assert calls["latest"] == (Path(history.results_dir).resolve(), Path(history.repo).resolve())
    results, got_html, kw = calls["publish"]
    assert (results, got_html) == (Path(history.results_dir).resolve(), html.resolve())
    assert kw["regress_json"] == "latest-report" and kw["repo"] == Path(history.repo).resolve()
    assert res.error is None

    # a repo that is not a directory (a URL, a typo) cannot order commits: no git order
    calls.clear()
    publish.publish_dashboard(
        history.conf, history.results_dir, html, repo=tmp_path / "not-a-repo", last=4
    )
    assert calls["latest"][1] is None
    assert calls["publish"][2]["repo"] == (tmp_path / "not-a-repo").resolve()
    assert calls["publish"][2]["last"] == 4


def test_a_given_report_is_used_as_is(history, tmp_path, calls):
    publish.publish_dashboard(
        history.conf, history.results_dir, tmp_path / "html", regress_json="r.json"
    )
    assert "latest" not in calls and calls["publish"][2]["regress_json"] == "r.json"


def test_publish_result_error_only_when_asv_failed(tmp_path):
    ok = publish.PublishResult(tmp_path / "html", tmp_path / "html" / "summary.html")
    assert ok.error is None
    failed = publish.PublishResult(ok.html_dir, ok.summary, asv_ok=False)
    assert failed.error == (
        f"asv publish failed (problems above): wrote {ok.summary}, "
        f"but no new {ok.html_dir / 'index.html'}"
    )


def test_cli_exits_1_when_asv_failed(history, tmp_path, monkeypatch, capsys):
    html = tmp_path / "html"
    failed = publish.PublishResult(html, html / "summary.html", asv_ok=False)
    monkeypatch.setattr(publish, "publish_dashboard", lambda *a, **kw: failed)
    rc = cli.main(["publish", "--config", str(history.conf), "--html", str(html)])
    err = capsys.readouterr().err
    assert rc == cli.EXIT_ERROR and f"ltx2k: error: {failed.error}" in err and "wrote" in err
    ok = publish.PublishResult(html, html / "summary.html")
    monkeypatch.setattr(publish, "publish_dashboard", lambda *a, **kw: ok)
    rc = cli.main(["publish", "--config", str(history.conf), "--html", str(html)])
    assert rc == cli.EXIT_OK and "error" not in capsys.readouterr().err


def test_cli_names_the_results_flag(tmp_path, capsys):
    conf = _conf(tmp_path)
    rc = cli.main(["publish", "--config", str(conf), "--results", str(tmp_path / "nope")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == cli.EXIT_ERROR
    assert len(err) == 1
    assert err[0].startswith(f"ltx2k: error: --results {str(tmp_path / 'nope')!r}: no such ")


def test_publish_reaches_asv_only_through_asv_compat():
    """No module of ltx2k/report imports asv itself: its internals are asv_compat's."""
    modules = sorted((ROOT / "ltx2k" / "report").rglob("*.py"))
    assert {"publish.py", "staging.py", "asv_site.py"} <= {p.name for p in modules}
    direct = [
        f"{path.name}: {ast.unparse(node)}"
        for path in modules
        for node in ast.walk(ast.parse(path.read_text()))
        if (isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "asv")
        or (isinstance(node, ast.Import) and any(a.name.split(".")[0] == "asv" for a in node.names))
    ]
    assert direct == []


def test_asv_compat_publish_wrappers(history, tmp_path):
    conf = asv_compat.load_json(history.conf)
    cfg = asv_compat.config_from_dict(dict(conf, results_dir=str(history.results_dir)))
    assert cfg.results_dir == str(history.results_dir)
    benchmarks = asv_compat.load_benchmarks(cfg)
    assert len(benchmarks) > 0
    path = next(
        p for p in sorted((history.results_dir / "h200").glob("*.json")) if p.name != "machine.json"
    )
    assert asv_compat.load_result(path, machine_name="h200").commit_hash in history.commits
    with pytest.raises(ValueError):
        asv_compat.load_result(path, machine_name="another-gpu")
    empty = tmp_path / "no-benchmarks"
    empty.mkdir()
    with pytest.raises(ValueError):
        asv_compat.load_benchmarks(asv_compat.config_from_dict(dict(conf, results_dir=str(empty))))
    repo = asv_compat.open_repo(
        asv_compat.config_from_dict(dict(conf, repo=str(history.repo), results_dir=str(empty)))
    )
    assert set(repo.get_revisions(set(history.commits))) == set(history.commits)
