"""Commit names and order: git where a repository is given, asv's stored dates otherwise.

asv results carry a commit's full sha and its commit date, not its parents,
so the order of a history comes from ``git rev-list --first-parent`` (the
mainline, as ``asv publish`` and ``asv find`` walk it) when the repository
is at hand, and from the stored dates when it is not.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping

# commits.git(repo, ...): stdout, or None where git says no (an unknown ref, no repo).
from ltx2k.git import output_or_none as git
from ltx2k.git import run as run_git

_HEX = re.compile(r"[0-9a-fA-F]{4,40}")


def check_repo(repo, flag: str = "--repo") -> None:
    """ValueError where *repo* (None: no repository) is not a folder git opens.

    A folder git does not know cannot go unnoticed: every git question about it
    answers "no", so a sha would be looked up among the results' commits alone and
    the order taken from the stored dates, with nothing said; and a branch name would
    be reported as unknown rather than the repository as wrong."""
    if repo is None:
        return
    path = os.fspath(repo)
    if not os.path.isdir(path):
        raise ValueError(f"{flag} {path!r} is not a directory")
    try:
        proc = run_git(path, "rev-parse", "--git-dir")
    except OSError as e:  # no git at all: nothing about any repository can be answered
        raise ValueError(f"{flag} {path!r}: git cannot be run ({e.strerror or e})") from None
    if proc.returncode != 0:
        # git's own reason: no repository there, or one it refuses to open (its owner)
        why = next((ln for ln in reversed(proc.stderr.splitlines()) if ln.strip()), "")
        why = why.strip().removeprefix("fatal: ")
        raise ValueError(
            f"{flag} {path!r} is not a git repository"
            + (f" (git: {why})" if why and "not a git repository" not in why else "")
        )


def resolve(ref, known: Iterable[str], repo, what: str) -> tuple[str | None, str]:
    """(full sha, kind) of *ref*: kind "commit" or "branch".

    The sha is None when no result has that commit and no repository knows it.
    *what* names the flag in error messages (``--head``).
    """
    if not isinstance(ref, str) or not ref.strip():
        raise ValueError(f"{what} must be a commit sha or branch name, got {ref!r}")
    ref = ref.strip()
    is_hex = bool(_HEX.fullmatch(ref))
    if repo is not None:
        sha = git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
        if sha:
            return sha, ("commit" if is_hex and sha.startswith(ref.lower()) else "branch")
        if not is_hex:
            raise ValueError(f"{what} {ref!r} is not a commit or branch in repo {repo!r}")
    if not is_hex:
        raise ValueError(
            f"{what} {ref!r} is not a commit sha; to use a branch name, pass --repo PATH "
            "so that `git rev-parse` can resolve it"
        )
    matches = sorted(c for c in set(known) if c.lower().startswith(ref.lower()))
    if len(matches) > 1:
        raise ValueError(f"{what} {ref!r} is ambiguous: it prefixes {', '.join(matches)}")
    if matches:
        return matches[0], "commit"
    return (ref.lower() if len(ref) == 40 else None), "commit"


def is_before(a: str | None, b: str | None, repo, dates: Mapping[str, int]) -> bool:
    """Whether commit *a* is an ancestor of *b* (with *repo*), or dated before it (without);
    False where either is unknown."""
    if not a or not b or a == b:
        return False
    if repo is not None:
        return git(repo, "merge-base", "--is-ancestor", a, b) is not None
    return a in dates and b in dates and dates[a] < dates[b]


def mainline(head: str, repo, dates: Mapping[str, int]) -> list[str]:
    """Commits up to and including *head*, oldest first.

    With *repo*: git's first-parent history of head, every commit (measured or
    not, so a step's range can name the commits nobody benchmarked). Without:
    the commits of *dates* (sha -> asv commit date) dated before head, then
    head; commits dated the same instant as head cannot be ordered against it
    and are left out.
    """
    if repo is not None:
        out = git(repo, "rev-list", "--first-parent", head)
        if out is None:
            raise ValueError(f"head {head} is not in repo {os.fspath(repo)!r}")
        return list(reversed(out.split()))
    if head not in dates:
        return [head]
    before = sorted((c for c in dates if dates[c] < dates[head]), key=lambda c: (dates[c], c))
    return before + [head]


def newest(
    dates: Mapping[str, int], repo=None, branch: str | None = None
) -> tuple[str | None, bool]:
    """(the commit a dashboard judges and draws up to, whether git orders its history).

    With *repo*: the newest commit of *branch*'s first-parent history (default ``HEAD``)
    that *dates* holds, as ``asv publish`` walks that branch. Not the newest stored date:
    asv stores a commit's author date, and a rebase-merged or cherry-picked commit keeps
    its older one, so the branch tip can be dated before commits it follows. Where the
    branch has none of them (or git does not answer): the newest by date, ordered by git
    if git knows it, else by date (``False``). None for no commits.
    """
    if not dates:
        return None, False
    if repo is not None:
        out = git(repo, "rev-list", "--first-parent", branch or "HEAD")
        for sha in (out or "").split():
            if sha in dates:
                return sha, True
    head = max(dates, key=lambda c: (dates[c], c))
    known = repo is not None and git(repo, "rev-parse", "--verify", "--quiet", f"{head}^{{commit}}")
    return head, bool(known)
