"""The git side of the results store: URL and branch checked, tip checked out, fast-forward push."""

from __future__ import annotations

import os
import re
from pathlib import Path

from ltx2k import git

# LC_ALL=C: we read git's messages to tell a moved tip from a real error.
# GIT_ALLOW_PROTOCOL: a store is a path or a plain git URL; transports that run
# a command (ext::, fd::) or a remote helper named by the URL are refused by git.
_GIT_ENV = {
    "LC_ALL": "C",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_ALLOW_PROTOCOL": "file:git:http:https:ssh",
}

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


def check_url(store_url) -> str:
    """*store_url* as git gets it (a local path made absolute); ValueError if git misreads it."""
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


def check_branch(branch) -> str:
    """*branch* if git takes it as a branch name, else ValueError."""
    if not isinstance(branch, str) or not branch:
        raise ValueError(f"branch must be a branch name, got {branch!r}")
    proc = git.run(None, "check-ref-format", "--branch", branch, env=_GIT_ENV)
    if proc.returncode != 0 or branch.startswith("-"):
        raise ValueError(f"branch={branch!r} is not a valid git branch name")
    return branch


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


def checkout_tip(work: Path, store_url: str, branch: str) -> str | None:
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


def commit(work: Path, paths: list[str], message: str) -> str:
    """Commit *paths* of the checkout in *work*; the new commit's sha."""
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


def push(work: Path, store_url: str, branch: str):
    # A plain refspec (no '+') and no --force: the server refuses anything
    # but a fast-forward, which is what keeps other runners' commits safe.
    return git.run(work, "push", "-q", "--", store_url, f"HEAD:refs/heads/{branch}", env=_GIT_ENV)


def moved_tip(err: str) -> bool:
    """Whether git's push output says only that the tip moved (retry), not a refusal."""
    reasons = _REJECTION.findall(err)
    if reasons:
        return all(_MOVED_TIP.search(r) for r in reasons)
    return bool(_MOVED_TIP.search(err))
