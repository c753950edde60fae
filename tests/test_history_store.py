"""The git-branch results store: concurrent runners, no lost commits, no force-push."""

from __future__ import annotations

import io
import json
import subprocess
import threading
from pathlib import Path

import pytest

from ltx2k.history import store_git, store_tree
from ltx2k.history.store import pull_results, push_results

BRANCH = "asv-results"


def git(cwd, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout.strip()


@pytest.fixture
def bare(tmp_path: Path) -> Path:
    path = tmp_path / "store.git"
    git(tmp_path, "init", "-q", "--bare", str(path))
    # The server refuses any non-fast-forward update: if push_results ever
    # rewrote history (force-push), the tests below would fail.
    git(path, "config", "receive.denyNonFastForwards", "true")
    git(path, "config", "receive.denyDeletes", "true")
    return path


class Runner:
    """A GPU runner's local asv results directory."""

    def __init__(self, root: Path, machine: str):
        self.dir = root / f"results-{machine}"
        self.machine = machine
        (self.dir / machine).mkdir(parents=True)
        (self.dir / machine / "machine.json").write_text(
            json.dumps({"machine": machine, "version": 1})
        )
        (self.dir / "benchmarks.json").write_text(
            json.dumps(
                {
                    "bench.Shared.time_x": {"unit": "seconds", "from": machine},
                    f"bench.Only_{machine.replace('-', '_')}.time_y": {"unit": "seconds"},
                    "version": 2,
                }
            )
        )
        self.files: list[str] = []

    def run_commit(self, i: int) -> str:
        name = f"{i:08x}-env.json"
        (self.dir / self.machine / name).write_text(
            json.dumps({"commit_hash": f"{i:040x}", "machine": self.machine, "version": 2})
        )
        self.files.append(f"{self.machine}/{name}")
        return name

    def push(self, url: Path, **kw):
        return push_results(str(url), self.dir, branch=BRANCH, machine=self.machine, log=None, **kw)


def store_files(bare: Path, tmp_path: Path) -> set[str]:
    out = tmp_path / "check"
    res = pull_results(str(bare), out, branch=BRANCH, log=None)
    assert res.kept_local == ()
    return {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()}


def assert_linear(bare: Path) -> list[str]:
    lines = git(bare, "rev-list", "--parents", BRANCH).splitlines()
    assert all(len(line.split()) <= 2 for line in lines), "a merge commit in the store"
    assert sum(len(line.split()) == 1 for line in lines) == 1, "more than one root commit"
    return lines


def test_fresh_bare_repo_gets_an_orphan_branch(bare: Path, tmp_path: Path):
    r = Runner(tmp_path, "h200")
    r.run_commit(1)
    err = io.StringIO()
    res = push_results(str(bare), r.dir, branch=BRANCH, log=err)
    assert res.pushed and res.attempts == 1
    assert git(bare, "rev-parse", BRANCH) == res.commit
    assert len(assert_linear(bare)) == 1
    tree = set(git(bare, "ls-tree", "-r", "--name-only", BRANCH).split())
    assert tree == {
        "results/benchmarks.json",
        "results/h200/machine.json",
        "results/h200/00000001-env.json",
        f"results/h200/{store_tree.RUNNER_FILE}",  # which runner owns the machine name
    }
    assert "creating it as an orphan branch" in err.getvalue()
    assert all(line.startswith("ltx2k store: ") for line in err.getvalue().splitlines())


def test_same_files_twice_is_a_no_op(bare: Path, tmp_path: Path):
    r = Runner(tmp_path, "h200")
    r.run_commit(1)
    first = r.push(bare)
    second = r.push(bare)
    assert first.pushed and not second.pushed and second.files == ()
    assert git(bare, "rev-parse", BRANCH) == first.commit
    r.run_commit(2)
    third = r.push(bare)
    assert third.pushed and third.files == ("results/h200/00000002-env.json",)
    assert len(assert_linear(bare)) == 2


def test_concurrent_runners_lose_nothing(bare: Path, tmp_path: Path):
    runners = [Runner(tmp_path, "h200"), Runner(tmp_path, "a100-sxm4-80gb")]
    rounds = 6
    barrier = threading.Barrier(len(runners))
    results: dict[str, list] = {r.machine: [] for r in runners}
    errors: list[BaseException] = []

    def work(r: Runner, offset: int):
        try:
            for i in range(rounds):
                r.run_commit(offset + i)
                barrier.wait(timeout=30)  # both push at the same moment
                results[r.machine].append(r.push(bare, backoff=0.02, retries=20))
        except BaseException as e:  # surfaced below, in the test thread
            errors.append(e)
            barrier.abort()

    threads = [threading.Thread(target=work, args=(r, 100 * k)) for k, r in enumerate(runners)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    assert all(res.pushed for rs in results.values() for res in rs)

    expected = {f for r in runners for f in r.files}
    expected |= {f"{r.machine}/machine.json" for r in runners} | {"benchmarks.json"}
    assert store_files(bare, tmp_path) == expected
    # One commit per push, none lost to a race, no merges.
    assert len(assert_linear(bare)) == rounds * len(runners)
    pushed = {res.commit for rs in results.values() for res in rs}
    assert pushed == set(git(bare, "rev-list", BRANCH).split())
    bench = json.loads(git(bare, "show", f"{BRANCH}:results/benchmarks.json"))
    assert {"bench.Only_h200.time_y", "bench.Only_a100_sxm4_80gb.time_y"} <= set(bench)


def test_rejected_push_is_reapplied_on_the_new_tip(bare, tmp_path, monkeypatch):
    """Runner B lands a commit between A's fetch and A's push, even on branch creation."""
    a, b = Runner(tmp_path, "h200"), Runner(tmp_path, "h100-80gb-hbm3")
    a.run_commit(1)
    b.run_commit(2)
    real_push = store_git.push
    interleaved = []
    raced = threading.Event()

    def push_after_b(work, url, branch):
        if not raced.is_set():
            raced.set()
            interleaved.append(b.push(bare))  # B wins the race (via real_push)
        return real_push(work, url, branch)

    monkeypatch.setattr(store_git, "push", push_after_b)
    res_a = a.push(bare, backoff=0.0)
    assert interleaved[0].pushed and interleaved[0].attempts == 1
    assert res_a.pushed and res_a.attempts == 2
    lines = assert_linear(bare)
    assert len(lines) == 2 and lines[0].split()[1] == interleaved[0].commit
    assert store_files(bare, tmp_path) >= {
        "h200/00000001-env.json",
        "h100-80gb-hbm3/00000002-env.json",
    }


def test_gives_up_with_a_clear_error(bare, tmp_path, monkeypatch):
    a = Runner(tmp_path, "h200")
    a.run_commit(1)
    rejected = subprocess.CompletedProcess([], 1, "", " ! [rejected] HEAD -> x (fetch first)")
    monkeypatch.setattr(store_git, "push", lambda *args: rejected)
    with pytest.raises(RuntimeError, match="still rejected after 3 attempts"):
        a.push(bare, retries=2, backoff=0.0)


def test_non_retryable_push_error_is_raised_at_once(bare, tmp_path, monkeypatch):
    a = Runner(tmp_path, "h200")
    a.run_commit(1)
    calls = []

    def denied(*args):
        calls.append(args)
        return subprocess.CompletedProcess([], 128, "", "fatal: Authentication failed")

    monkeypatch.setattr(store_git, "push", denied)
    with pytest.raises(RuntimeError, match="Authentication failed"):
        a.push(bare, retries=5, backoff=0.0)
    assert len(calls) == 1


def test_corrupt_local_file_is_not_pushed(bare, tmp_path):
    a = Runner(tmp_path, "h200")
    a.run_commit(1)
    (a.dir / "h200" / "deadbeef-env.json").write_text('{"commit_hash": "de')
    res = a.push(bare)
    assert res.pushed and res.skipped == (str(a.dir / "h200" / "deadbeef-env.json"),)
    assert "h200/deadbeef-env.json" not in store_files(bare, tmp_path)


def test_pull_keeps_differing_local_files_unless_overwrite(bare, tmp_path):
    a = Runner(tmp_path, "h200")
    name = a.run_commit(1)
    a.push(bare)
    dest = tmp_path / "dest"
    (dest / "h200").mkdir(parents=True)
    (dest / "h200" / name).write_text('{"local": "not pushed yet"}')
    (dest / "benchmarks.json").write_text(json.dumps({"bench.Local.t": {}, "version": 2}))
    res = pull_results(str(bare), dest, branch=BRANCH, log=None)
    assert res.kept_local == (f"h200/{name}",)
    assert json.loads((dest / "h200" / name).read_text()) == {"local": "not pushed yet"}
    merged = json.loads((dest / "benchmarks.json").read_text())
    assert {"bench.Local.t", "bench.Shared.time_x", "bench.Only_h200.time_y"} <= set(merged)
    res = pull_results(str(bare), dest, branch=BRANCH, overwrite=True, log=None)
    assert f"h200/{name}" in res.written
    assert (dest / "h200" / name).read_bytes() == (a.dir / "h200" / name).read_bytes()


def test_pull_from_store_without_branch(bare, tmp_path):
    with pytest.raises(RuntimeError, match="no branch 'asv-results'"):
        pull_results(str(bare), tmp_path / "dest", branch=BRANCH, log=None)


@pytest.mark.parametrize(
    "kwargs, arg",
    [
        ({"store_url": ""}, "store_url"),
        ({"store_url": None}, "store_url"),
        ({"results_dir": "/nonexistent/results"}, "results_dir"),
        ({"branch": "bad..name"}, "branch"),
        ({"branch": ""}, "branch"),
        ({"machine": "v100"}, "machine"),
        ({"machine": "../etc"}, "machine"),
        ({"machine": []}, "machine"),
        ({"retries": -1}, "retries"),
        ({"retries": 1.5}, "retries"),
        ({"backoff": -0.1}, "backoff"),
        ({"message": ""}, "message"),
    ],
)
def test_malformed_arguments_name_the_argument(bare, tmp_path, kwargs, arg):
    r = Runner(tmp_path, "h200")
    r.run_commit(1)
    call = {"store_url": str(bare), "results_dir": r.dir, "log": None, **kwargs}
    with pytest.raises(ValueError, match=arg):
        push_results(**call)


def test_several_machines_push_only_this_runners_own(bare, tmp_path):
    """After `store pull` the results dir holds every GPU; a push must send only its own."""
    r = Runner(tmp_path, "h200")
    r.run_commit(1)
    (r.dir / "a100-sxm4-80gb").mkdir()
    (r.dir / "a100-sxm4-80gb" / "machine.json").write_text("{}")
    machine_file = tmp_path / "asv-machine.json"
    machine_file.write_text(json.dumps({"cpu-interpreter": {}, "version": 1}))
    with pytest.raises(ValueError, match="machine="):
        push_results(str(bare), r.dir, machine_file=machine_file, log=None)
    # asv's machine file (ltx2k machine --write) says which one this runner is
    machine_file.write_text(json.dumps({"h200": {"machine": "h200"}, "version": 1}))
    res = push_results(str(bare), r.dir, machine_file=machine_file, log=None)
    assert res.pushed and res.files
    assert all(f.startswith("results/h200/") or f.endswith("benchmarks.json") for f in res.files)
    r.run_commit(2)
    res = push_results(str(bare), r.dir, machine=["h200"], log=None)
    assert res.files == ("results/h200/00000002-env.json",)


def test_cli_push_then_pull(bare, tmp_path, capsys):
    from ltx2k import cli

    r = Runner(tmp_path, "h200")
    r.run_commit(7)
    argv = ["store", "push", "--store", str(bare), "--results", str(r.dir), "--branch", BRANCH]
    assert cli.main(argv) == 0
    assert cli.main(argv) == 0  # a no-op the second time
    assert "nothing to push" in capsys.readouterr().err
    dest = tmp_path / "pulled"
    assert cli.main(["store", "pull", "--store", str(bare), "--dest", str(dest)]) == 0
    assert (dest / "h200" / "00000007-env.json").read_bytes() == (
        r.dir / "h200" / "00000007-env.json"
    ).read_bytes()
    assert cli.main(["store", "push", "--store", "", "--results", str(r.dir)]) == 1
    err = capsys.readouterr().err
    assert "--store" in err and "store_url" not in err  # the flag, not the parameter


def test_relative_store_path(bare, tmp_path, monkeypatch):
    """git runs in a temporary checkout; a relative store path must still mean the caller's."""
    r = Runner(tmp_path, "h200")
    r.run_commit(1)
    monkeypatch.chdir(bare.parent)
    res = push_results(bare.name, r.dir.relative_to(bare.parent), branch=BRANCH, log=None)
    assert res.pushed and git(bare, "rev-parse", BRANCH) == res.commit
    pulled = pull_results(bare.name, "pulled", branch=BRANCH, log=None)
    assert "h200/00000001-env.json" in pulled.written
    assert (bare.parent / "pulled" / "h200" / "00000001-env.json").exists()
