"""A long history costs its window: ``load_results(select=Window(...))`` loads only the
commits a judgement or a dashboard uses, and judges exactly what a full load would."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from ltx2k.analysis import regress
from ltx2k.history import records as history_records
from ltx2k.history.records import load_results
from ltx2k.history.window import Window
from ltx2k.report import publish
from tools.synthetic_history import generate_history

A100, H100, H200 = "a100-sxm4-80gb", "h100-80gb-hbm3", "h200"
N = 12


@pytest.fixture(scope="module")
def hist(tmp_path_factory):
    return generate_history(
        tmp_path_factory.mktemp("synth") / "h",
        n_commits=N,
        steps=[
            f"{A100}:SplitRope.time_device_cold:blocked:*:commit=9:+12%",
            f"{H200}:AdaLN.time_device_cold:slab:*:commit=4:-20%",
        ],
        drop=[f"{A100}:commit=7", f"{H100}:commit=10"],
        seed=5,
    )


@pytest.fixture
def results(hist, tmp_path):
    """A private copy of the results that a test may damage."""
    dest = tmp_path / "results"
    shutil.copytree(hist.results_dir, dest)
    return dest


@pytest.fixture
def loaded_files(monkeypatch):
    """The result files whose records the loader built."""
    seen: list[str] = []
    real = history_records._records_of

    def spy(res, path, *args, **kwargs):
        seen.append(Path(path).name)
        return real(res, path, *args, **kwargs)

    monkeypatch.setattr(history_records, "_records_of", spy)
    return seen


JUDGEMENTS = [
    # (head index, compare's arguments, with the repository)
    (N - 1, {"last": 5}, False),
    (N - 1, {"last": 5}, True),
    (9, {"last": 3, "recent": 2}, True),  # a head before the newest commit
    (10, {"last": 20}, False),  # a window wider than the history
    (N - 1, {"baseline": 2}, False),
    (N - 1, {"baseline": 2}, True),
]


@pytest.mark.parametrize(("head", "kwargs", "with_repo"), JUDGEMENTS)
def test_a_windowed_judgement_is_the_full_one(hist, head, kwargs, with_repo):
    kwargs = dict(kwargs)
    if "baseline" in kwargs:
        kwargs["baseline"] = hist.commits[kwargs["baseline"]]
    repo = hist.repo if with_repo else None
    full_records, full_problems = load_results(hist.results_dir)
    full = regress.compare(
        full_records, hist.commits[head], problems=full_problems, repo=repo, **kwargs
    )
    windowed = regress.triage(hist.results_dir, hist.commits[head], repo=repo, **kwargs)
    assert windowed.to_json() == full.to_json()
    if head >= 9 and "baseline" not in kwargs:
        assert windowed.status == "regression"  # the A100 step is in every such window


def test_a_window_loads_only_its_commits(hist, loaded_files):
    head = hist.commits[N - 1]
    window = Window(head, last=3, repo=hist.repo)
    records, _ = load_results(hist.results_dir, select=window)
    # per GPU its last 3 measured commits before head, and head: A100 skipped 7, H100 10
    want = {
        A100: {8, 9, 10, 11},
        H100: {7, 8, 9, 11},
        H200: {8, 9, 10, 11},
    }
    got: dict[str, set[int]] = {}
    for r in records:
        got.setdefault(r.machine, set()).add(hist.commits.index(r.commit))
    assert got == want
    assert len(loaded_files) == sum(len(v) for v in want.values())
    assert window.commits == set(hist.commits)  # the whole history, for a typo check


def test_a_file_outside_the_window_is_not_checked_but_an_unreadable_one_is_reported(hist, results):
    old = next(p for p in (results / H200).glob(f"{hist.commits[1][:8]}-*.json"))
    data = json.loads(old.read_text())
    name = next(iter(data["results"]))
    data["results"][name][0] = "many"  # a wrong type in an old file
    old.write_text(json.dumps(data))
    head = hist.commits[N - 1]
    _, problems = load_results(results, select=Window(head, last=3))
    assert not [p for p in problems if p.path == str(old)]
    _, problems = load_results(results)  # the whole history still says it
    assert [p for p in problems if p.path == str(old)]

    # Whatever the window, a file whose commit and date cannot be read is reported.
    cut = next(p for p in (results / A100).glob(f"{hist.commits[2][:8]}-*.json"))
    cut.write_text(cut.read_text()[:500])
    fifo = results / H100 / "0123abcd-fifo.json"
    os.mkfifo(fifo)
    _, problems = load_results(results, select=Window(head, last=3))
    kinds = {p.path: p.kind for p in problems}
    assert kinds.get(str(cut)) == "truncated"
    assert kinds.get(str(fifo)) == "not-a-file"


def test_a_typo_head_is_refused_whatever_the_window(hist):
    with pytest.raises(ValueError, match="--head 'deadbeef'"):
        regress.triage(hist.results_dir, "deadbeef", last=5)
    with pytest.raises(ValueError, match="--head must be a commit sha"):
        regress.triage(hist.results_dir, "", last=5)
    # a full sha nobody measured: no data, not an error
    report = regress.triage(hist.results_dir, "0" * 40, last=5)
    assert report.status == "insufficient"


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({}, "exactly one of last or baseline"),
        ({"last": 3, "baseline": "abc"}, "exactly one"),
        ({"last": 0}, "last must be a whole number >= 1"),
        ({"last": True}, "last must be"),
    ],
)
def test_window_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Window("abc", **kwargs)


def test_env_window_counts_only_that_environment(hist):
    records, _ = load_results(hist.results_dir)
    env = records[0].env
    with pytest.raises(ValueError, match="--env 'another-env': no results in that environment"):
        Window(hist.commits[N - 1], last=2, env="another-env")(
            {(r.machine, r.commit): (r.date, frozenset({r.env})) for r in records}
        )
    chosen = Window(hist.commits[N - 1], last=2, env=env)(
        {(r.machine, r.commit): (r.date, frozenset({r.env})) for r in records}
    )
    assert {c for m, c in chosen if m == H200} == set(hist.commits[-3:])
    assert {hist.commits.index(c) for m, c in chosen if m == H100} == {8, 9, 11}


def test_the_dashboard_draws_each_gpus_last_commits(hist, tmp_path):
    def revisions_drawn(html: Path) -> dict[str, int]:
        """machine -> the number of commits on asv's graph of one benchmark."""
        out = {}
        for graph in (html / "graphs").rglob("bench_kernels.SplitRope.time_device_cold.json"):
            machine = next(
                (p[len("machine-") :] for p in graph.parts if p.startswith("machine-")), None
            )
            if machine is not None:
                out[machine] = len(json.loads(graph.read_text()))
        return out

    res = publish.publish_dashboard(hist.conf, html_dir=tmp_path / "last4", last=4)
    assert res.error is None
    assert revisions_drawn(res.html_dir) == {m: 4 for m in hist.machines}
    res = publish.publish_dashboard(hist.conf, html_dir=tmp_path / "all", last=None)
    assert res.error is None
    drawn = revisions_drawn(res.html_dir)
    assert drawn == {A100: N - 1, H100: N - 1, H200: N}
