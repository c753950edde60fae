"""``ltx2k store push`` and ``pull`` killed at known points: the store and the results dir
hold the old state or the new one, never a mix, and no temporary checkout outlives the
run (after SIGKILL: the next run removes it).

Each run is a real ``ltx2k`` process stopped at a named point (the store's pause hook)
and then signalled, as a CI cancel (SIGTERM), a terminal (SIGINT) or the OOM killer
(SIGKILL) would.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import default_sigint

from ltx2k.history import store, store_kills, store_tree

pytestmark = pytest.mark.slow

BRANCH = "asv-results"
MACHINE = "h200"
ROOT = Path(__file__).resolve().parent.parent


def git(*args: str) -> str:
    return subprocess.run(["git", *args], check=True, capture_output=True, text=True).stdout


class World:
    """A bare store, a runner's results dir, a results dir to pull into, a private TMPDIR."""

    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.bare = tmp / "store.git"
        git("init", "-q", "--bare", str(self.bare))
        self.results = tmp / "runner"
        self.dest = tmp / "pulled"
        self.tmpdir = tmp / "tmpdir"
        self.tmpdir.mkdir()
        (self.results / MACHINE).mkdir(parents=True)
        self._json(self.results / MACHINE / "machine.json", {"machine": MACHINE, "version": 1})
        self.bench(["a"])

    @staticmethod
    def _json(path: Path, data) -> None:
        path.write_text(json.dumps(data, indent=1))

    def bench(self, names) -> None:
        data = {f"bench.K.time_{n}": {"unit": "seconds"} for n in names}
        self._json(self.results / "benchmarks.json", {**data, "version": 2})

    def result(self, i: int, size: int = 1) -> None:
        # size: padding, so that a file takes more than one write
        data = {"commit_hash": f"{i:040x}", "version": 2, "pad": "x" * size}
        self._json(self.results / MACHINE / f"{i:08x}-env.json", data)

    def env(self, pause: str | None = None) -> dict:
        env = {k: v for k, v in os.environ.items() if k != store_kills.PAUSE_ENV}
        env["TMPDIR"] = str(self.tmpdir)
        env["GIT_CONFIG_GLOBAL"] = os.devnull
        env["GIT_AUTHOR_NAME"] = env["GIT_COMMITTER_NAME"] = "t"
        env["GIT_AUTHOR_EMAIL"] = env["GIT_COMMITTER_EMAIL"] = "t@localhost"
        if pause:
            env[store_kills.PAUSE_ENV] = pause
        return env

    def argv(self, action: str) -> list[str]:
        base = [sys.executable, "-m", "ltx2k.cli", "store", action, "--store", str(self.bare)]
        if action == "push":
            return [*base, "--results", str(self.results), "--machine", MACHINE]
        return [*base, "--dest", str(self.dest)]

    def run(self, action: str) -> None:
        proc = subprocess.run(
            self.argv(action), env=self.env(), cwd=ROOT, capture_output=True, text=True
        )
        assert proc.returncode == 0, proc.stderr

    def start(self, action: str, pause: str) -> tuple[subprocess.Popen, Path]:
        log = self.tmp / f"{action}-{pause}.log"
        with open(log, "w") as f:
            proc = subprocess.Popen(
                self.argv(action),
                env=self.env(pause),
                cwd=ROOT,
                stderr=f,
                stdout=f,
                preexec_fn=default_sigint,
            )
        deadline = time.monotonic() + 120
        while f"paused at {pause}" not in log.read_text():
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        return proc, log

    def store_tree(self) -> dict[str, bytes]:
        names = git("--git-dir", str(self.bare), "ls-tree", "-r", "--name-only", BRANCH).split()
        return {
            n: subprocess.run(
                ["git", "--git-dir", str(self.bare), "show", f"{BRANCH}:{n}"],
                check=True,
                capture_output=True,
            ).stdout
            for n in names
        }

    def dest_files(self) -> dict[str, bytes]:
        return {
            p.relative_to(self.dest).as_posix(): p.read_bytes()
            for p in self.dest.rglob("*")
            if p.is_file() and not p.name.endswith(store_kills.TMP_SUFFIX)  # asv never reads these
        }

    def checkouts(self) -> list[str]:
        return [p.name for p in self.tmpdir.iterdir() if p.name.startswith(store.CHECKOUT_PREFIX)]

    def tmp_files(self) -> list[str]:
        return [p.name for p in self.dest.rglob(f"*{store_kills.TMP_SUFFIX}")]


def _kill(proc: subprocess.Popen, sig: int, log: Path) -> None:
    proc.send_signal(sig)
    rc = proc.wait(timeout=60)
    expected = {
        signal.SIGTERM: 128 + signal.SIGTERM,
        signal.SIGINT: 130,
        signal.SIGKILL: -signal.SIGKILL,
    }[sig]
    assert rc == expected, log.read_text()
    assert "Traceback" not in log.read_text()


SIGNALS = [signal.SIGTERM, signal.SIGINT, signal.SIGKILL]
SIG_IDS = ["SIGTERM", "SIGINT", "SIGKILL"]


@pytest.fixture
def world(tmp_path: Path) -> World:
    w = World(tmp_path)
    w.result(1)
    w.run("push")
    return w


@pytest.mark.parametrize("sig", SIGNALS, ids=SIG_IDS)
@pytest.mark.parametrize("point", ["push", "pushed"])
def test_killed_push_leaves_the_old_or_the_new_store(world: World, point: str, sig: int):
    old = world.store_tree()
    world.result(2)
    world.result(3)
    world.bench(["a", "b"])
    proc, log = world.start("push", point)
    _kill(proc, sig, log)

    now = world.store_tree()
    if point == "push":  # committed in the checkout, not pushed: the store is as it was
        assert now == old
    else:
        assert set(now) == set(old) | {f"results/{MACHINE}/{i:08x}-env.json" for i in (2, 3)}
        assert "bench.K.time_b" in json.loads(now["results/benchmarks.json"])
    if sig == signal.SIGKILL:
        assert len(world.checkouts()) == 1  # nothing could clean up ...
        world.run("push")  # ... until the next run
    assert world.checkouts() == []
    world.run("push")
    assert len(world.store_tree()) == len(old) + 2


@pytest.mark.parametrize("sig", SIGNALS, ids=SIG_IDS)
@pytest.mark.parametrize("point", ["fetched", "replace", "written"])
def test_killed_pull_leaves_each_file_old_or_new(world: World, point: str, sig: int):
    world.run("pull")
    old = world.dest_files()
    for i in range(2, 6):
        world.result(i, size=200_000)
    world.bench(["a", "b"])
    world.run("push")
    new = {
        k.removeprefix("results/"): v
        for k, v in world.store_tree().items()
        if not k.endswith(store_tree.RUNNER_FILE)  # store bookkeeping, never pulled
    }
    proc, log = world.start("pull", point)
    _kill(proc, sig, log)

    got = world.dest_files()
    for name, data in got.items():
        assert isinstance(json.loads(data), dict), name  # never half a file
        assert data in (old.get(name), new[name]), name
    if point == "fetched":
        assert got == old
    if point == "written":
        assert got != old
    if sig == signal.SIGKILL:
        assert world.checkouts() != []
        if point == "replace":
            assert len(world.tmp_files()) == 1  # the file being written when killed
    else:
        assert world.tmp_files() == []
    world.run("pull")
    assert world.checkouts() == [] and world.tmp_files() == []
    assert world.dest_files() == new


def test_truncated_local_file_is_replaced_from_the_store(world: World):
    world.run("pull")
    name = f"{MACHINE}/{1:08x}-env.json"
    good = (world.dest / name).read_bytes()
    (world.dest / name).write_bytes(good[: len(good) // 2])
    res = store.pull_results(str(world.bare), world.dest, log=None)
    assert name in res.written and res.kept_local == ()
    assert (world.dest / name).read_bytes() == good


def test_a_valid_local_file_that_differs_is_still_kept(world: World):
    world.run("pull")
    name = f"{MACHINE}/{1:08x}-env.json"
    mine = json.dumps({"commit_hash": "mine", "version": 2}).encode()
    (world.dest / name).write_bytes(mine)
    res = store.pull_results(str(world.bare), world.dest, log=None)
    assert res.kept_local == (name,)
    assert (world.dest / name).read_bytes() == mine


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_sweep_removes_only_checkouts_of_dead_or_old_runs(tmp_path: Path):
    import socket

    host = socket.gethostname()

    def checkout(name: str, owner: str | None, age_s: float = 0) -> Path:
        d = tmp_path / f"{store.CHECKOUT_PREFIX}{name}"
        d.mkdir()
        if owner is not None:
            (d / store.OWNER_FILE).write_text(owner)
        t = time.time() - age_s
        os.utime(d, (t, t))
        return d

    live = checkout("live", f"{os.getpid()} {host}")
    dead = checkout("dead", f"{_dead_pid()} {host}")
    young_orphan = checkout("young", None, age_s=60)
    old_orphan = checkout("orphan", None, age_s=store_kills.ORPHAN_MINUTES * 60 + 60)
    other_host = checkout("other", f"{os.getpid()} not-{host}", age_s=3600)
    ancient = checkout("ancient", f"1 not-{host}", age_s=store_kills.STALE_HOURS * 3600 + 60)
    unrelated = tmp_path / "someone-else"
    unrelated.mkdir()

    removed = store.sweep_checkouts(tmp_path)
    assert sorted(removed) == sorted([dead, old_orphan, ancient])
    for d in (live, young_orphan, other_host, unrelated):
        assert d.is_dir()


def test_sigterm_during_git_cleans_up(world: World):
    """No pause point: SIGTERM while git fetches still removes the checkout."""
    for i in range(2, 40):
        world.result(i, size=50_000)
    world.run("push")
    for delay in (0.6, 0.9, 1.2):
        proc = subprocess.Popen(
            world.argv("pull"),
            env=world.env(),
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        time.sleep(delay)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode in (0, 128 + signal.SIGTERM), err
        assert "Traceback" not in err
        assert world.checkouts() == [] and world.tmp_files() == []
        for p in world.dest.rglob("*.json"):
            assert isinstance(json.loads(p.read_text()), dict), p


# --- a signal at the edges of the checkout's life, in this process ----------------------


def _signal_self():
    """A SIGTERM to this process, delivered to Python before this returns (the handler
    runs between bytecodes, so give it the chance)."""
    os.kill(os.getpid(), signal.SIGTERM)
    for _ in range(1000):
        time.sleep(0)


def _signal_self_before(fn):
    def wrapped(*args, **kwargs):
        _signal_self()
        return fn(*args, **kwargs)

    return wrapped


def _signal_self_after(fn):
    def wrapped(*args, **kwargs):
        result = fn(*args, **kwargs)
        _signal_self()
        return result

    return wrapped


@pytest.fixture
def sigterm_default():
    if signal.getsignal(signal.SIGTERM) != signal.SIG_DFL:
        pytest.skip("SIGTERM already has a handler in this process")


@pytest.mark.parametrize("edge", ["mkdtemp", "rmtree"])
def test_sigterm_at_the_checkouts_creation_or_removal_leaves_no_checkout(
    edge, tmp_path, monkeypatch, sigterm_default
):
    """A SIGTERM just after the checkout directory is made (before the code that removes it
    is armed), or just as its removal starts, still ends with the directory gone and exit
    status 143: the signal waits for the creation or the removal to finish."""
    real_mkdtemp = store.tempfile.mkdtemp

    def mkdtemp(prefix):
        return real_mkdtemp(prefix=prefix, dir=tmp_path)

    if edge == "mkdtemp":
        monkeypatch.setattr(store.tempfile, "mkdtemp", _signal_self_after(mkdtemp))
    else:
        monkeypatch.setattr(store.tempfile, "mkdtemp", mkdtemp)
        monkeypatch.setattr(store.shutil, "rmtree", _signal_self_before(store.shutil.rmtree))
    with pytest.raises(SystemExit) as exc, store._temp_checkout(store._Log(None)) as tmp:
        assert (tmp / store.OWNER_FILE).is_file()
        time.sleep(0.01)
    assert exc.value.code == 128 + signal.SIGTERM
    assert list(tmp_path.glob(f"{store.CHECKOUT_PREFIX}*")) == []
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL


def test_signals_deferred_acts_once_at_the_blocks_end(sigterm_default):
    ran = []
    with pytest.raises(SystemExit) as exc, store.exit_on_signals():
        with store.signals_deferred():
            _signal_self()
            ran.append("after the signal")
            with store.signals_deferred():  # nested: still waits for the outer end
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(0.01)
            ran.append("after the inner block")
        ran.append("never")
    assert exc.value.code == 128 + signal.SIGTERM
    assert ran == ["after the signal", "after the inner block"]
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
