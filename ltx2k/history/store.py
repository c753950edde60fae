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
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import shutil
import signal
import socket
import stat
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from ltx2k import git

DEFAULT_BRANCH = "asv-results"
STORE_ROOT = "results"  # folder inside the branch, so `asv publish` can point at it
BENCHMARKS_JSON = "benchmarks.json"
_BENCHMARKS_API_VERSION = 2

# Reasons git gives, in the parentheses of a " ! [rejected]" or
# " ! [remote rejected]" line, when the ref moved between our fetch and our push
# or another push holds the ref lock right now: worth a fetch and a retry. Any
# other reason (a pre-receive or update hook declining, an unpacker error from
# a full disk, a permission) fails at once with the server's own words.
_MOVED_TIP = re.compile(
    r"non-fast-forward|fetch first|cannot lock ref|failed to update ref|failed to lock|"
    r"incorrect old value|stale info"
)
_REJECTION = re.compile(r"\[(?:remote )?rejected\][^\n]*?\(([^\n]*)\)\s*$", re.MULTILINE)

# results/<machine>/.runner names the runner that first pushed that machine (not
# .json, so neither asv nor the loader reads it). Another runner replacing one
# of its files with different content is two runners sharing one machine name.
RUNNER_FILE = ".runner"

CHECKOUT_PREFIX = "ltx2k-store-"
OWNER_FILE = "owner"  # "<pid> <hostname>" of the process using a checkout
TMP_SUFFIX = ".ltx2k-tmp"  # a file being written: ".<name>.<pid>.<host>.ltx2k-tmp"
# Leftovers of a killed run. A checkout or file whose owner is alive on this host is
# never touched before STALE_HOURS (a pid can be reused); one without an owner file
# (killed before writing it) after ORPHAN_MINUTES; one of another host (a container
# sharing /tmp, whose pids we cannot check) after STALE_HOURS.
STALE_HOURS = 24.0
ORPHAN_MINUTES = 10.0
# The kill tests stop a run at a named point (see _pause_point) to signal it there.
PAUSE_ENV = "LTX2K_STORE_PAUSE_AT"


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


# LC_ALL=C: we read git's messages to tell a moved tip from a real error.
# GIT_ALLOW_PROTOCOL: a store is a path or a plain git URL; transports that run
# a command (ext::, fd::) or a remote helper named by the URL are refused by git.
_GIT_ENV = {
    "LC_ALL": "C",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_ALLOW_PROTOCOL": "file:git:http:https:ssh",
}


# --- validation -------------------------------------------------------------------------


def _check_url(store_url) -> str:
    if isinstance(store_url, os.PathLike):
        store_url = os.fspath(store_url)
    if not isinstance(store_url, str) or not store_url.strip():
        raise ValueError(f"store_url must be a git URL or path, got {store_url!r}")
    store_url = store_url.strip()
    # git would read "--upload-pack=..." as an option and run its command; every
    # call also passes "--" before the URL, so this is the clear error, not the guard.
    if store_url.startswith("-") or any(c in store_url for c in "\0\n\r"):
        raise ValueError(
            f"store_url={store_url!r} is not a git URL or path (it starts with '-' or "
            "holds a control character); write ./ before a local path that starts with '-'"
        )
    # git runs inside a temporary checkout: a relative local path must not
    # be resolved against that.
    return os.path.abspath(store_url) if os.path.exists(store_url) else store_url


def _check_branch(branch) -> str:
    if not isinstance(branch, str) or not branch:
        raise ValueError(f"branch must be a branch name, got {branch!r}")
    proc = git.run(None, "check-ref-format", "--branch", branch, env=_GIT_ENV)
    if proc.returncode != 0 or branch.startswith("-"):
        raise ValueError(f"branch={branch!r} is not a valid git branch name")
    return branch


def _own_machines(machine_file) -> set[str]:
    """Machine names in asv's machine file (~/.asv-machine.json): this runner's own."""
    from ltx2k import asv_compat

    path = Path(machine_file or asv_compat.machine_file_path())
    data = _read_json_object(path) if path.is_file() else None
    return {k for k, v in (data or {}).items() if k != "version" and isinstance(v, dict)}


def _check_machines(results_dir: Path, machine, machine_file, log: _Log) -> list[str]:
    present = sorted(
        p.name
        for p in results_dir.iterdir()
        if p.is_dir() and not p.name.startswith(".") and any(p.glob("*.json"))
    )
    if machine is None:
        if len(present) == 1:
            return present
        if not present:
            raise ValueError(
                f"results_dir={str(results_dir)!r} holds no <machine>/ directory with results"
            )
        # Several machines, e.g. after `store pull` into the same folder. Pushing
        # them all could overwrite other runners' newer files with stale copies,
        # so push only the one asv itself would run as (its machine file entry).
        own = sorted(_own_machines(machine_file) & set(present))
        if len(own) == 1:
            log(f"pushing {own[0]!r}: this runner's machine in asv's machine file")
            return own
        raise ValueError(
            f"machine=None but results_dir={str(results_dir)!r} holds several machines "
            f"{present} and asv's machine file names {len(own)} of them; pass machine= "
            "to name this runner's own"
        )
    names = [machine] if isinstance(machine, str) else list(machine)
    if not names:
        raise ValueError(f"machine must be a name or a non-empty list of names, got {machine!r}")
    for name in names:
        if not isinstance(name, str) or name in ("", ".", "..") or "/" in name or "\\" in name:
            raise ValueError(f"machine={name!r} is not a machine directory name")
        if name not in present:
            raise ValueError(
                f"machine={name!r} has no result files in results_dir={str(results_dir)!r} "
                f"(machines there: {present})"
            )
    return names


def _check_int(name: str, value, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")
    return value


# --- benchmarks.json -----------------------------------------------------------------------


def merge_benchmarks(base: dict | None, incoming: dict | None) -> dict:
    """Union of two asv benchmarks.json mappings; *incoming* wins on a shared name.

    The newest writer's description of a benchmark is the one asv should use
    (its version hash decides which results ``asv publish`` shows); names
    only the other side knows are kept, so runners on different suite
    revisions never erase each other's benchmarks.
    """
    out = {k: v for k, v in (base or {}).items() if k != "version"}
    out.update({k: v for k, v in (incoming or {}).items() if k != "version"})
    return out


def _is_regular(path: Path) -> bool:
    """A regular file itself, not through a link: what push and pull ever read."""
    try:
        return stat.S_ISREG(path.lstat().st_mode)
    except OSError:
        return False


def _store_files(src_root: Path) -> tuple[list[Path], list[str]]:
    """(regular files, everything else) under *src_root*, links never followed.

    A symlink in the store branch would make a pull copy whatever it points at
    on the puller's machine (and the next push publish it), so it is refused.
    """
    files, refused = [], []
    for top, dirs, names in os.walk(src_root):
        for name in sorted(dirs):
            if os.path.islink(os.path.join(top, name)):
                refused.append(os.path.join(top, name))
        for name in names:
            p = Path(top, name)
            (files if _is_regular(p) else refused).append(p)
    return sorted(files), sorted(str(Path(r).relative_to(src_root).as_posix()) for r in refused)


def _read_json_object(path: Path) -> dict | None:
    if path.exists() and not _is_regular(path):
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def _write_benchmarks(path: Path, data: dict, *, atomic: bool = False) -> None:
    from ltx2k import asv_compat

    if not atomic:
        # asv's own writer (sorted, indented): identical content gives identical bytes.
        asv_compat.write_json(path, data, api_version=_BENCHMARKS_API_VERSION)
        return
    tmp = _tmp_name(path)
    try:
        asv_compat.write_json(tmp, data, api_version=_BENCHMARKS_API_VERSION)
        _pause_point("replace")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


# --- kills: atomic files, temporary checkouts, leftovers -----------------------------------


def _pause_point(name: str) -> None:
    """Wait here forever when the kill tests ask for this point (PAUSE_ENV)."""
    if os.environ.get(PAUSE_ENV) == name:
        print(f"ltx2k store: paused at {name}", file=sys.stderr, flush=True)
        while True:
            time.sleep(60)


def _owner() -> str:
    return f"{os.getpid()} {socket.gethostname()}"


def _owner_alive(owner: str) -> bool | None:
    """True/False for a process of this host; None when it cannot be told."""
    pid, _, host = owner.strip().partition(" ")
    if host != socket.gethostname() or not pid.isdigit():
        return None
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's live process
    return True


def _stale(owner: str | None, age_s: float) -> bool:
    if age_s > STALE_HOURS * 3600:
        return True
    if owner is None:
        return age_s > ORPHAN_MINUTES * 60
    return _owner_alive(owner) is False


def _tmp_name(path: Path) -> Path:
    host = socket.gethostname().replace(".", "_")
    return path.with_name(f".{path.name}.{os.getpid()}.{host}{TMP_SUFFIX}")


def _atomic_write(path: Path, data: bytes) -> None:
    """Write under a temporary name in *path*'s folder, then rename: never half a file.

    The temporary name starts with a dot and does not end in .json, so asv and
    load_results never read it.
    """
    tmp = _tmp_name(path)
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        _pause_point("replace")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _sweep_tmp_files(root: Path, log: _Log) -> None:
    """Remove files a killed pull left half-written under *root*."""
    if not root.is_dir():
        return
    host = socket.gethostname()
    now = time.time()
    for p in root.rglob(f".*{TMP_SUFFIX}"):
        # ".<file>.<pid>.<host>.ltx2k-tmp", the host with its dots as underscores
        _, pid, tmp_host = ("", "", "", *p.name[: -len(TMP_SUFFIX)].rsplit(".", 2))[-3:]
        alive = _owner_alive(f"{pid} {host}") if tmp_host == host.replace(".", "_") else None
        try:
            age = now - p.lstat().st_mtime
        except FileNotFoundError:
            continue
        if alive is False or age > STALE_HOURS * 3600:
            p.unlink(missing_ok=True)
            log(f"removed {p}: left by a pull that was killed")


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
        if _stale(owner, age):
            shutil.rmtree(d, ignore_errors=True)
            if not d.exists():
                removed.append(d)
                say(f"removed {d}: a checkout left by a push or pull that was killed")
    return removed


_CLEANUP_SIGNALS = tuple(getattr(signal, n) for n in ("SIGTERM", "SIGHUP") if hasattr(signal, n))


class _Terminated(SystemExit):
    """Raised by the signal handler so that ``finally`` blocks run."""


@contextlib.contextmanager
def exit_on_signals() -> Iterator[None]:
    """SIGTERM/SIGHUP raise (exit status 128 + signal) instead of ending the process at once.

    Python's default for them runs no ``finally``; SIGINT already raises
    KeyboardInterrupt. Handlers a caller installed are left alone, and only the
    main thread can install one.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    fired = []

    def handler(signum, frame):
        if fired:
            return  # already on the way out; a second signal must not cut the clean-up
        fired.append(signum)
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


@contextlib.contextmanager
def _temp_checkout(log: _Log) -> Iterator[Path]:
    """A private temporary directory for git, gone however the run ends but SIGKILL."""
    sweep_checkouts(log=log.stream)
    with exit_on_signals():
        tmp = Path(tempfile.mkdtemp(prefix=CHECKOUT_PREFIX))
        try:
            (tmp / OWNER_FILE).write_text(_owner())
            yield tmp
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


# --- push ------------------------------------------------------------------------------------


def _collect(results_dir: Path, machines: list[str], log: _Log):
    files, skipped = [], []
    for m in machines:
        for src in sorted((results_dir / m).glob("*.json")):
            if not _is_regular(src):
                if src.is_symlink() or src.exists():
                    log(f"skipping {src}: not a regular file (a link, FIFO or device)")
                    skipped.append(str(src))
                continue
            if _read_json_object(src) is None:
                log(f"skipping {src}: not a JSON object (truncated or corrupt)")
                skipped.append(str(src))
                continue
            files.append((src, f"{STORE_ROOT}/{m}/{src.name}"))
    bench = None
    bench_path = results_dir / BENCHMARKS_JSON
    if os.path.lexists(bench_path):
        bench = _read_json_object(bench_path)
        if bench is None:
            log(f"skipping {bench_path}: not a JSON object (truncated or corrupt)")
            skipped.append(str(bench_path))
    return files, bench, skipped


def _remote_tip(store_url: str, branch: str) -> str | None:
    proc = git.run(
        None, "ls-remote", "--heads", "--", store_url, f"refs/heads/{branch}", env=_GIT_ENV
    )
    if proc.returncode != 0:
        # git's first complaint is the reason; the rest is advice about access rights.
        why = next((ln for ln in proc.stderr.splitlines() if ln.strip()), "git ls-remote failed")
        raise RuntimeError(f"cannot reach store {store_url!r}: {why.removeprefix('fatal: ')}")
    line = proc.stdout.strip()
    return line.split()[0] if line else None


def _checkout_tip(work: Path, store_url: str, branch: str) -> str | None:
    """A fresh checkout of the branch tip in *work* (or an empty orphan branch)."""
    git.run(None, "init", "-q", str(work), check=True, env=_GIT_ENV)
    tip = _remote_tip(store_url, branch)
    if tip is None:
        git.run(work, "checkout", "-q", "--orphan", branch, check=True, env=_GIT_ENV)
        return None
    # Only the tip is needed to add a commit on top of it.
    git.run(
        work,
        "fetch",
        "-q",
        "--depth=1",
        "--no-tags",
        "--",
        store_url,
        f"refs/heads/{branch}",
        check=True,
        env=_GIT_ENV,
    )
    fetched = git.output(work, "rev-parse", "FETCH_HEAD", env=_GIT_ENV)
    git.run(work, "checkout", "-q", "-B", branch, fetched, check=True, env=_GIT_ENV)
    return fetched


def runner_identity() -> str:
    """This runner's name: GitHub Actions' RUNNER_NAME, else the host name."""
    return (os.environ.get("RUNNER_NAME") or "").strip() or socket.gethostname()


def _check_runner(work: Path, files, machines: list[str], runner: str) -> list[str]:
    """Refuse to replace another runner's files; return the .runner files to add."""
    added = []
    for m in machines:
        ident = work / STORE_ROOT / m / RUNNER_FILE
        owner = (
            ident.read_text(encoding="utf-8", errors="replace").strip()
            if _is_regular(ident)
            else None
        )
        if owner is None:
            ident.parent.mkdir(parents=True, exist_ok=True)
            ident.write_text(runner + "\n", encoding="utf-8")
            added.append(f"{STORE_ROOT}/{m}/{RUNNER_FILE}")
            continue
        if owner == runner:
            continue
        clash = [
            rel
            for src, rel in files
            # machine.json describes the machine; the newest writer may update it
            if rel.startswith(f"{STORE_ROOT}/{m}/")
            and not rel.endswith("/machine.json")
            and _is_regular(work / rel)
            and (work / rel).read_bytes() != src.read_bytes()
        ]
        if clash:
            raise RuntimeError(
                f"machine {m!r} in the store belongs to runner {owner!r}, and this runner "
                f"({runner!r}) would replace {len(clash)} of its file(s) with different "
                f"results ({', '.join(clash[:3])}): two runners share one machine name. "
                "Nothing was pushed; give each runner its own machine name "
                "(ltx2k machine --write)"
            )
    return added


def _apply(work: Path, files, bench: dict | None) -> list[str]:
    """Copy this runner's files into the checkout; return the store paths that changed."""
    changed = []
    for src, rel in files:
        dst = work / rel
        data = src.read_bytes()
        if dst.exists() and dst.read_bytes() == data:
            continue
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_bytes(data)
        changed.append(rel)
    if bench is not None:
        rel = f"{STORE_ROOT}/{BENCHMARKS_JSON}"
        dst = work / rel
        current = _read_json_object(dst) if dst.exists() else None
        merged = merge_benchmarks(current, bench)
        if current is None or merge_benchmarks(None, current) != merged:
            dst.parent.mkdir(parents=True, exist_ok=True)
            _write_benchmarks(dst, merged)
            changed.append(rel)
    return changed


def _commit(work: Path, paths: list[str], message: str) -> str:
    git.run(work, "add", "--", *paths, check=True, env=_GIT_ENV)
    identity = []
    if not git.run(work, "config", "user.email", env=_GIT_ENV).stdout.strip():
        identity = ["user.name=ltx2k store", "user.email=ltx2k-store@localhost"]
    git.run(
        work,
        "commit",
        "-q",
        "--no-verify",
        "-m",
        message,
        check=True,
        config=identity,
        env=_GIT_ENV,
    )
    return git.output(work, "rev-parse", "HEAD", env=_GIT_ENV)


def _push(work: Path, store_url: str, branch: str):
    # A plain refspec (no '+') and no --force: the server refuses anything
    # but a fast-forward, which is what keeps other runners' commits safe.
    return git.run(work, "push", "-q", "--", store_url, f"HEAD:refs/heads/{branch}", env=_GIT_ENV)


def _moved_tip(err: str) -> bool:
    """Whether git's push output says only that the tip moved (retry), not a refusal."""
    reasons = _REJECTION.findall(err)
    if reasons:
        return all(_MOVED_TIP.search(r) for r in reasons)
    return bool(_MOVED_TIP.search(err))


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

    *runner* (default :func:`runner_identity`) is recorded per machine in the
    store on its first push; a push that would replace one of that machine's
    files with different content from another runner raises RuntimeError and
    pushes nothing (two runners under one machine name).
    """
    store_url = _check_url(store_url)
    root = Path(os.fspath(results_dir)) if isinstance(results_dir, (str, os.PathLike)) else None
    if root is None or not root.is_dir():
        raise ValueError(f"results_dir={results_dir!r} is not a directory")
    branch = _check_branch(branch)
    say = _Log(log)
    machines = _check_machines(root, machine, machine_file, say)
    retries = _check_int("retries", retries, 0)
    if isinstance(backoff, bool) or not isinstance(backoff, (int, float)) or backoff < 0:
        raise ValueError(f"backoff must be a number of seconds >= 0, got {backoff!r}")
    if message is not None and (not isinstance(message, str) or not message.strip()):
        raise ValueError(f"message must be a non-empty str, got {message!r}")
    runner = runner_identity() if runner is None else runner
    if not isinstance(runner, str) or not runner.strip() or not runner.isprintable():
        raise ValueError(f"runner must be a non-empty printable str, got {runner!r}")
    runner = runner.strip()

    files, bench, skipped = _collect(root, machines, say)
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
            tip = _checkout_tip(work, store_url, branch)
            if tip is None:
                say(f"branch {branch!r} does not exist yet; creating it as an orphan branch")
            owners = _check_runner(work, files, machines, runner)
            changed = _apply(work, files, bench)
            if not changed:
                say(f"nothing to push: the store already holds these {len(files)} file(s)")
                return PushResult(False, tip, (), attempt, tuple(skipped))
            changed += owners
            say(f"committing {len(changed)} changed file(s) for {', '.join(machines)}")
            commit = _commit(work, changed, msg)
            _pause_point("push")
            proc = _push(work, store_url, branch)
            if proc.returncode == 0:
                _pause_point("pushed")
                say(f"pushed {commit[:12]} to {store_url} {branch}")
                return PushResult(True, commit, tuple(changed), attempt + 1, tuple(skipped))
            err = (proc.stderr or proc.stdout).strip()
            if not _moved_tip(err):
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
    store_url = _check_url(store_url)
    if not isinstance(dest_results_dir, (str, os.PathLike)) or not os.fspath(dest_results_dir):
        raise ValueError(f"dest_results_dir must be a path, got {dest_results_dir!r}")
    dest = Path(os.fspath(dest_results_dir))
    if dest.exists() and not dest.is_dir():
        raise ValueError(f"dest_results_dir={str(dest)!r} exists and is not a directory")
    branch = _check_branch(branch)
    say = _Log(log)

    _sweep_tmp_files(dest, say)
    with _temp_checkout(say) as tmp:
        work = Path(tmp) / "store"
        say(f"fetching {branch!r} from {store_url}")
        tip = _checkout_tip(work, store_url, branch)
        if tip is None:
            raise RuntimeError(
                f"store {store_url!r} has no branch {branch!r}; no runner has pushed results yet"
            )
        _pause_point("fetched")
        src_root = work / STORE_ROOT
        written, kept, unchanged = [], [], 0
        regular, refused = _store_files(src_root)
        for rel in refused:
            say(
                f"refusing {STORE_ROOT}/{rel} of the store: not a regular file (a symlink "
                "or a submodule); it is not followed or copied"
            )
        for src in regular:
            rel = src.relative_to(src_root)
            if rel.name == RUNNER_FILE:
                continue  # the store's own bookkeeping, not a result
            dst = dest / rel
            if rel.as_posix() == BENCHMARKS_JSON:
                local = _read_json_object(dst) if dst.exists() else None
                merged = merge_benchmarks(local, _read_json_object(src))
                if local is not None and merge_benchmarks(None, local) == merged:
                    unchanged += 1
                    continue
                dst.parent.mkdir(parents=True, exist_ok=True)
                _write_benchmarks(dst, merged, atomic=True)
                written.append(rel.as_posix())
                _pause_point("written")
                continue
            data = src.read_bytes()
            if dst.exists():
                if dst.read_bytes() == data:
                    unchanged += 1
                    continue
                if _read_json_object(dst) is None:
                    say(f"replacing {dst}: not a JSON object (truncated or corrupt)")
                elif not overwrite:
                    kept.append(rel.as_posix())
                    continue
            dst.parent.mkdir(parents=True, exist_ok=True)
            _atomic_write(dst, data)
            written.append(rel.as_posix())
            _pause_point("written")
    if kept:
        say(
            f"kept {len(kept)} local file(s) that differ from the store "
            f"(pass overwrite=True / --overwrite to replace them): {', '.join(kept[:5])}"
        )
    say(f"pulled {tip[:12]}: {len(written)} written, {unchanged} unchanged into {dest}")
    return PullResult(tip, tuple(written), unchanged, tuple(kept), tuple(refused))
