"""The store's benchmarks.json describes the newest results, whoever pushes last.

asv publish shows only the results whose benchmark version matches benchmarks.json. Runners
on different suite revisions push to one store; one that lags (benchmarking older commits
with the older suite) must not hide the others' newer results by pushing after them.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ltx2k.history.store import pull_results, push_results
from ltx2k.history.store_tree import merge_benchmarks, newest_versions

BENCH = "bench_kernels.SplitRope.time_device_cold"
COLUMNS = ["result", "params", "version", "started_at", "duration"]
T0 = 1_767_600_000_000  # ms


def _desc(version: str) -> dict:
    return {
        "name": BENCH,
        "type": "time",
        "unit": "seconds",
        "params": [["'x'"]],
        "param_names": ["shape"],
        "version": version,
    }


def _runner(root: Path, machine: str, commits: list[int], version: str) -> Path:
    """A runner's results folder: *commits* (indices: commit i is dated T0 + i hours) of
    one benchmark, measured with the suite of *version*."""
    res = root / f"local-{machine}"
    (res / machine).mkdir(parents=True)
    (res / "benchmarks.json").write_text(json.dumps({BENCH: _desc(version), "version": 2}))
    (res / machine / "machine.json").write_text(json.dumps({"machine": machine, "version": 1}))
    for i in commits:
        sha = f"{i + 1:08x}" * 5
        data = {
            "commit_hash": sha,
            "env_name": "e",
            "date": T0 + 3_600_000 * i,
            "params": {"machine": machine},
            "python": "3.12",
            "requirements": {},
            "env_vars": {},
            "result_columns": COLUMNS,
            "results": {BENCH: [[1e-5], [["'x'"]], version, 0, 1.0]},
            "durations": {},
            "version": 2,
        }
        (res / machine / f"{sha[:8]}-e.json").write_text(json.dumps(data))
    return res


def test_merge_keeps_the_version_of_the_newest_results():
    old, new = {BENCH: _desc("v1")}, {BENCH: _desc("v2")}
    assert merge_benchmarks(new, old, lambda: {BENCH: "v2"})[BENCH]["version"] == "v2"
    assert merge_benchmarks(old, new, lambda: {BENCH: "v2"})[BENCH]["version"] == "v2"
    assert merge_benchmarks(new, old)[BENCH]["version"] == "v1"  # no dates: incoming wins
    calls = []
    merge_benchmarks(new, new, lambda: calls.append(1) or {})
    assert calls == []  # equal versions: the results are never read


# runner -> (its commits, its suite's version); the newest commit's version must win.
RUNNERS = st.lists(
    st.tuples(
        st.lists(st.integers(0, 30), min_size=1, max_size=4, unique=True),
        st.sampled_from(["v1", "v2", "v3"]),
    ),
    min_size=2,
    max_size=3,
)


@settings(deadline=None, max_examples=5, suppress_health_check=[HealthCheck.too_slow])
@given(runners=RUNNERS, order=st.randoms(use_true_random=False))
def test_any_push_order_leaves_the_newest_suite_in_the_store(runners, order):
    newest = max(((max(commits), version) for commits, version in runners))
    ties = {version for commits, version in runners if max(commits) == newest[0]}
    with tempfile.TemporaryDirectory(prefix="ltx2k-suite-") as d:
        root = Path(d)
        store = root / "store.git"
        subprocess.run(["git", "init", "-q", "--bare", str(store)], check=True)
        locals_ = [
            (f"gpu{i}", _runner(root, f"gpu{i}", commits, version))
            for i, (commits, version) in enumerate(runners)
        ]
        order.shuffle(locals_)
        for machine, res in locals_:
            push_results(str(store), res, machine=machine, runner=machine, log=False)
        dest = root / "site" / "results"
        pull_results(str(store), dest, log=False)
        got = json.loads((dest / "benchmarks.json").read_text())[BENCH]["version"]
        assert got in ties, (got, newest, runners)
        assert newest_versions(dest)[BENCH] in ties
