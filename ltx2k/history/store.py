"""One results store for many GPU runners: a git branch holding asv's results tree.

Layout (what pandas, numpy and astropy host for their asv runs): one branch,
``asv-results`` by default, of any git repository, containing::

    results/benchmarks.json
    results/<machine>/machine.json
    results/<machine>/<commit[:8]>-<env>.json

exactly as ``asv run`` writes them. Each runner calls :func:`push_results`
after ``asv run``; whoever builds the dashboard calls :func:`pull_results`
and then ``asv publish``.

Concurrency: runners push to the same branch at the same moment. A push only
ever fast-forwards (never ``--force``, never a ``+`` refspec): when the tip
moved under us, the runner fetches the new tip, re-applies its files on top
of it in a fresh checkout, and pushes again after a randomized exponential
backoff. Runners only write inside their own ``results/<machine>/`` and merge
``benchmarks.json`` by key, so re-applying never conflicts and no runner's
files are lost. The history stays linear: one commit per push that changed
something, no merges.

Kills: a pull writes each file under a temporary name in its folder and
renames it into place, so a killed pull leaves every file old or new, never
half-written; a local file that is not valid JSON (a write cut short before
this) is replaced from the store. The temporary checkout of a push or pull is
removed on SIGTERM, SIGHUP and SIGINT; one left by SIGKILL is removed by the
next push or pull (its owner process is gone, or it is hours old).

Its parts: the git commands are :mod:`ltx2k.history.store_git`, the results files
offered and landed :mod:`ltx2k.history.store_tree`, what survives a kill
:mod:`ltx2k.history.store_kills`.
"""

from __future__ import annotations

import contextlib
import math
import os
import random
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from ltx2k.history import store_git, store_kills, store_tree

DEFAULT_BRANCH = "asv-results"
CHECKOUT_PREFIX = "ltx2k-store-"
OWNER_FILE = "owner"  # "<pid> <hostname>" of the process using a checkout


@dataclass(frozen=True)
class PushResult:
    pushed: bool  # False: the store already held every file (a no-op)
    commit: str | None  # the commit now at the branch tip that holds our files
    files: tuple[str, ...]  # store paths this push added or changed
    attempts: int  # pushes tried (1 + retries used)
    skipped: tuple[str, ...] = ()  # local files not pushed because they are not JSON


@dataclass(frozen=True)
class PullResult:
    commit: str
    written: tuple[str, ...]  # paths (relative to dest) created or replaced
    unchanged: int
    kept_local: tuple[str, ...]  # local files that differ from the store and were kept
    # store paths that are not regular files (a symlink, a submodule): never followed or copied
    refused: tuple[str, ...] = ()


class _Log:
    """Progress lines: *stream* True = the current sys.stderr, None/False = silent."""

    def __init__(self, stream):
        self.stream = stream

    def __call__(self, msg: str) -> None:
        stream = sys.stderr if self.stream is True else self.stream
        if stream:
            print(f"ltx2k store: {msg}", file=stream, flush=True)


def _check_int(name: str, value, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")
    return value


# --- temporary checkouts ------------------------------------------------------------------


def sweep_checkouts(tmp_root: str | os.PathLike | None = None, log=None) -> list[Path]:
    """Remove temporary checkouts (``ltx2k-store-*``) that a killed push or pull left.

    A checkout is removed when its owner process (pid and host in its owner
    file) is gone, or it has no owner file and is ORPHAN_MINUTES old, or it is
    STALE_HOURS old. A live run's checkout is never removed.
    """
    say = _Log(log)
    root = Path(tmp_root or tempfile.gettempdir())
    removed = []
    now = time.time()
    for d in root.glob(f"{CHECKOUT_PREFIX}*"):
        try:
            if not d.is_dir() or d.is_symlink():
                continue
            owner_file = d / OWNER_FILE
            owner = owner_file.read_text() if owner_file.is_file() else None
            age = now - d.lstat().st_mtime
        except OSError:
            continue
        if store_kills.stale(owner, age):
            shutil.rmtree(d, ignore_errors=True)
            if not d.exists():
                removed.append(d)
                say(f"removed {d}: a checkout left by a push or pull that was killed")
    return removed


_CLEANUP_SIGNALS = tuple(getattr(signal, n) for n in ("SIGTERM", "SIGHUP") if hasattr(signal, n))


class _Terminated(SystemExit):
    """Raised by the signal handler so that ``finally`` blocks run."""


class _SignalState:
    """The main thread's handling of SIGTERM/SIGHUP (signal handlers run only there)."""

    fired: int | None = None  # the signal being acted on: later ones are ignored
    held = 0  # depth of signals_deferred blocks
    pending: int | None = None  # a signal that arrived inside one


_SIGNALS = _SignalState()


@contextlib.contextmanager
def exit_on_signals() -> Iterator[None]:
    """SIGTERM/SIGHUP raise (exit status 128 + signal) instead of ending the process at once.

    Python's default for them runs no ``finally``; SIGINT already raises
    KeyboardInterrupt. Handlers a caller installed are left alone, and only the
    main thread can install one. Inside :func:`signals_deferred` the raise waits for
    the block's end.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        if _SIGNALS.fired is not None:
            return  # already on the way out; a second signal must not cut the clean-up
        if _SIGNALS.held:
            _SIGNALS.pending = _SIGNALS.pending or signum
            return
        _SIGNALS.fired = signum
        raise _Terminated(128 + signum)

    previous = {}
    for sig in _CLEANUP_SIGNALS:
        if signal.getsignal(sig) == signal.SIG_DFL:
            previous[sig] = signal.signal(sig, handler)
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
        if previous:
            _SIGNALS.fired = _SIGNALS.pending = None


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """Under :func:`exit_on_signals`, a SIGTERM/SIGHUP that arrives inside this block is
    acted on when the block ends, not in the middle of it: for a clean-up that must not
    stop half-way (an ``rmtree``, a swap of two directories) and for creating what a
    ``finally`` removes (a signal between ``mkdtemp`` returning and its ``try`` would leak
    the directory)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _SIGNALS.held += 1
    try:
        yield
    finally:
        _SIGNALS.held -= 1
        if not _SIGNALS.held and _SIGNALS.pending is not None and _SIGNALS.fired is None:
            signum = _SIGNALS.fired = _SIGNALS.pending
            _SIGNALS.pending = None
            raise _Terminated(128 + signum)


@contextlib.contextmanager
def _temp_checkout(log: _Log) -> Iterator[Path]:
    """A private temporary directory for git, gone however the run ends but SIGKILL."""
    sweep_checkouts(log=log.stream)
    with exit_on_signals():
        tmp = None
        try:
            with signals_deferred():
                tmp = Path(tempfile.mkdtemp(prefix=CHECKOUT_PREFIX))
                (tmp / OWNER_FILE).write_text(store_kills.this_process())
            yield tmp
        finally:
            if tmp is not None:
                with signals_deferred():
                    shutil.rmtree(tmp, ignore_errors=True)


# --- push ------------------------------------------------------------------------------------


def push_results(
    store_url,
    results_dir,
    branch: str = DEFAULT_BRANCH,
    machine: str | Sequence[str] | None = None,
    message: str | None = None,
    retries: int = 8,
    backoff: float = 0.5,
    *,
    machine_file=None,
    runner: str | None = None,
    log=True,
) -> PushResult:
    """Add this runner's ``results/<machine>/`` files to the store branch.

    *machine* names the runner's own machine directory (or several); when
    None, it is the only machine directory in *results_dir*, or else the one
    machine that asv's machine file (*machine_file*, default
    ``~/.asv-machine.json``, as written by ``ltx2k machine --write``) names.
    Other machines' files are never pushed. Creates the branch as an
    orphan if the store has none. Retries up to *retries* times when other
    runners moved the tip, sleeping ``backoff * 2**attempt`` seconds
    (randomized +-50%, capped at 30 s). Pushing files the store already has
    is a no-op (``pushed=False``).

    *runner* (default :func:`~ltx2k.history.store_tree.runner_identity`) is
    recorded per machine in the store on its first push; a push that would
    replace one of that machine's files with different content from another
    runner raises RuntimeError and pushes nothing (two runners under one
    machine name).
    """
    store_url = store_git.check_url(store_url)
    root = Path(os.fspath(results_dir)) if isinstance(results_dir, (str, os.PathLike)) else None
    if root is None or not root.is_dir():
        raise ValueError(f"results_dir={results_dir!r} is not a directory")
    branch = store_git.check_branch(branch)
    say = _Log(log)
    machines = store_tree.check_machines(root, machine, machine_file, say)
    retries = _check_int("retries", retries, 0)
    if (
        isinstance(backoff, bool)
        or not isinstance(backoff, (int, float))
        or not math.isfinite(backoff)  # NaN passes `< 0`, and sleeps no number of seconds
        or backoff < 0
    ):
        raise ValueError(f"backoff must be a finite number of seconds >= 0, got {backoff!r}")
    if message is not None and (not isinstance(message, str) or not message.strip()):
        raise ValueError(f"message must be a non-empty str, got {message!r}")
    runner = store_tree.runner_identity() if runner is None else runner
    if not isinstance(runner, str) or not runner.strip() or not runner.isprintable():
        raise ValueError(f"runner must be a non-empty printable str, got {runner!r}")
    runner = runner.strip()

    files, bench, skipped = store_tree.collect(root, machines, say)
    if not files:
        raise ValueError(
            f"machine={machines!r}: no readable result files under {str(root)!r} to push"
        )
    msg = message or f"results: {', '.join(machines)} ({len(files)} file(s) offered)"

    with _temp_checkout(say) as tmp:
        for attempt in range(retries + 1):
            # A fresh checkout per attempt: re-applying onto the new tip is a
            # plain copy, with no rebase state to clean up.
            work = Path(tmp) / f"attempt{attempt}"
            say(f"fetching {branch!r} from {store_url} (attempt {attempt + 1}/{retries + 1})")
            tip = store_git.checkout_tip(work, store_url, branch)
            if tip is None:
                say(f"branch {branch!r} does not exist yet; creating it as an orphan branch")
            owners = store_tree.check_runner(work, files, machines, runner)
            changed = store_tree.apply(work, files, bench)
            if not changed:
                say(f"nothing to push: the store already holds these {len(files)} file(s)")
                return PushResult(False, tip, (), attempt, tuple(skipped))
            changed += owners
            say(f"committing {len(changed)} changed file(s) for {', '.join(machines)}")
            commit = store_git.commit(work, changed, msg)
            store_kills.pause_point("push")
            proc = store_git.push(work, store_url, branch)
            if proc.returncode == 0:
                store_kills.pause_point("pushed")
                say(f"pushed {commit[:12]} to {store_url} {branch}")
                return PushResult(True, commit, tuple(changed), attempt + 1, tuple(skipped))
            err = (proc.stderr or proc.stdout).strip()
            if not store_git.moved_tip(err):
                # git's whole output: a hook's refusal is in its "remote:" lines.
                raise RuntimeError(f"push to {store_url!r} ({branch}) was refused: {err}")
            if attempt == retries:
                break
            delay = min(backoff * 2**attempt, 30.0) * random.uniform(0.5, 1.5)
            say(f"push rejected (another runner moved {branch!r}); retrying in {delay:.2f} s")
            time.sleep(delay)
    raise RuntimeError(
        f"push to {store_url!r} ({branch}) still rejected after {retries + 1} attempts; "
        "other runners keep moving the tip -- raise retries= or backoff="
    )


# --- pull -------------------------------------------------------------------------------------


def pull_results(
    store_url,
    dest_results_dir,
    branch: str = DEFAULT_BRANCH,
    *,
    overwrite: bool = False,
    log=True,
) -> PullResult:
    """Assemble the store into a local asv results directory, for ``asv publish``.

    New files are written; identical ones are left alone; a local file that
    differs from the store's is kept (and listed) unless *overwrite*, so a
    pull never destroys results not yet pushed. A local file that is not a
    JSON object (cut short by a kill, or corrupt) is no result of anyone's and
    is replaced. ``benchmarks.json`` is merged by benchmark name, the store's
    entries winning. Each file is written under a temporary name and renamed
    into place.
    """
    store_url = store_git.check_url(store_url)
    if not isinstance(dest_results_dir, (str, os.PathLike)) or not os.fspath(dest_results_dir):
        raise ValueError(f"dest_results_dir must be a path, got {dest_results_dir!r}")
    dest = Path(os.fspath(dest_results_dir))
    if dest.exists() and not dest.is_dir():
        raise ValueError(f"dest_results_dir={str(dest)!r} exists and is not a directory")
    branch = store_git.check_branch(branch)
    say = _Log(log)

    store_kills.sweep_tmp_files(dest, say)
    with _temp_checkout(say) as tmp:
        work = Path(tmp) / "store"
        say(f"fetching {branch!r} from {store_url}")
        tip = store_git.checkout_tip(work, store_url, branch)
        if tip is None:
            raise RuntimeError(
                f"store {store_url!r} has no branch {branch!r}; no runner has pushed results yet"
            )
        store_kills.pause_point("fetched")
        written, kept, unchanged, refused = store_tree.assemble(
            work / store_tree.STORE_ROOT, dest, overwrite, say
        )
    if kept:
        say(
            f"kept {len(kept)} local file(s) that differ from the store "
            f"(pass overwrite=True / --overwrite to replace them): {', '.join(kept[:5])}"
        )
    say(f"pulled {tip[:12]}: {len(written)} written, {unchanged} unchanged into {dest}")
    return PullResult(tip, tuple(written), unchanged, tuple(kept), tuple(refused))
