"""Surviving a kill of a push or pull: files written atomically, a dead run's leftovers found.

A leftover names its owner (pid and host) or is old: :func:`stale` tells the
temporary checkouts :mod:`ltx2k.history.store` may remove, :func:`sweep_tmp_files`
removes the half-written files of a killed pull.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path

TMP_SUFFIX = ".ltx2k-tmp"  # a file being written: ".<name>.<pid>.<host>.ltx2k-tmp"
# Leftovers of a killed run. A checkout or file whose owner is alive on this host is
# never touched before STALE_HOURS (a pid can be reused); one without an owner file
# (killed before writing it) after ORPHAN_MINUTES; one of another host (a container
# sharing /tmp, whose pids we cannot check) after STALE_HOURS.
STALE_HOURS = 24.0
ORPHAN_MINUTES = 10.0
# The kill tests stop a run at a named point (see pause_point) to signal it there.
PAUSE_ENV = "LTX2K_STORE_PAUSE_AT"


def pause_point(name: str) -> None:
    """Wait here forever when the kill tests ask for this point (PAUSE_ENV)."""
    if os.environ.get(PAUSE_ENV) == name:
        print(f"ltx2k store: paused at {name}", file=sys.stderr, flush=True)
        while True:
            time.sleep(60)


def this_process() -> str:
    """This process as an owner: "<pid> <hostname>"."""
    return f"{os.getpid()} {socket.gethostname()}"


def owner_alive(owner: str) -> bool | None:
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


def stale(owner: str | None, age_s: float) -> bool:
    if age_s > STALE_HOURS * 3600:
        return True
    if owner is None:
        return age_s > ORPHAN_MINUTES * 60
    return owner_alive(owner) is False


def tmp_name(path: Path) -> Path:
    host = socket.gethostname().replace(".", "_")
    return path.with_name(f".{path.name}.{os.getpid()}.{host}{TMP_SUFFIX}")


def atomic_write(path: Path, data: bytes) -> None:
    """Write under a temporary name in *path*'s folder, then rename: never half a file.

    The temporary name starts with a dot and does not end in .json, so asv and
    load_results never read it.
    """
    tmp = tmp_name(path)
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        pause_point("replace")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_whole(path, text: str) -> None:
    """Write a command's output file so that a kill, a full disk or a reader never sees half
    of it: the old file stays whole until the new one is (:func:`atomic_write`). A path
    that exists and is not a regular file (``/dev/stdout``, a pipe, ``/dev/null``) is
    written directly: there is no file to replace, and renaming onto it would replace the
    device itself. A symbolic link keeps pointing where it did."""
    # A link's target is the file to replace: renaming onto the link would unlink it.
    p = Path(os.path.realpath(os.fspath(path)))
    if p.exists() and not p.is_file():
        with open(p, "w", encoding="utf-8") as f:
            f.write(text)
        return
    atomic_write(p, text.encode("utf-8"))


def sweep_tmp_files(root: Path, log: Callable[[str], None]) -> None:
    """Remove files a killed pull left half-written under *root*."""
    if not root.is_dir():
        return
    host = socket.gethostname()
    now = time.time()
    for p in root.rglob(f".*{TMP_SUFFIX}"):
        # ".<file>.<pid>.<host>.ltx2k-tmp", the host with its dots as underscores
        _, pid, tmp_host = ("", "", "", *p.name[: -len(TMP_SUFFIX)].rsplit(".", 2))[-3:]
        alive = owner_alive(f"{pid} {host}") if tmp_host == host.replace(".", "_") else None
        try:
            age = now - p.lstat().st_mtime
        except FileNotFoundError:
            continue
        if alive is False or age > STALE_HOURS * 3600:
            p.unlink(missing_ok=True)
            log(f"removed {p}: left by a pull that was killed")
