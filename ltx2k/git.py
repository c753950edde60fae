"""Running git: the one place that builds a git command line.

Callers differ only in what a failure means to them, so each picks one of:
:func:`run` (the finished process, for a caller that reads the exit status
itself), :func:`output` (stdout, a failure raised) and :func:`output_or_none`
(stdout, None on any failure: a question whose answer may be "no").
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence


def run(
    repo,
    *args: str,
    check: bool = False,
    config: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess:
    """``git [-C repo] [-c config]... args``, text output captured.

    *repo* None runs git in the current directory (commands that take a URL or
    a path of their own). *env* is added to this process's environment.
    With *check*, a non-zero exit raises RuntimeError with the command and git's
    own message, one line a user can act on.
    """
    cmd = ["git"]
    if repo is not None:
        cmd += ["-C", os.fspath(repo)]
    for item in config:
        cmd += ["-c", item]
    proc = subprocess.run(
        [*cmd, *args],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, **env} if env else None,
    )
    if check and proc.returncode != 0:
        raise RuntimeError(
            f"`git {' '.join(args)}` failed (exit {proc.returncode}): "
            f"{(proc.stderr or proc.stdout).strip()}"
        )
    return proc


def output(repo, *args: str, **kwargs) -> str:
    """stdout of ``git args`` in *repo*, stripped; RuntimeError when git fails."""
    return run(repo, *args, check=True, **kwargs).stdout.strip()


def output_or_none(repo, *args: str) -> str | None:
    """stdout of ``git args`` in *repo*, stripped, or None when git fails or is missing."""
    try:
        proc = run(repo, *args)
    except OSError:
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None
