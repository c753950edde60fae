"""Where the dashboard's links point: commit pages and asv's graph for one cell.

Commit links follow asv's ``show_commit_url`` convention: a base URL to which
the full hash is appended. The base is the config value when it is an
absolute http(s) URL; otherwise it is derived from ``git remote get-url
origin`` when that remote is on GitHub. Without either, commits are shown as
plain hashes: a link that leads nowhere is worse than none.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterable, Mapping
from urllib.parse import quote, urlsplit

# Hosts whose commit pages live at https://HOST/OWNER/REPO/commit/SHA.
GITHUB_HOSTS = ("github.com", "www.github.com")

_SCP_LIKE = re.compile(r"^(?:[\w.+-]+@)?(?P<host>[\w.-]+):(?P<path>(?!/)[^\s]+)$")


def _owner_repo(path: str) -> str | None:
    parts = [p for p in path.strip("/").split("/") if p]
    if len(parts) != 2:
        return None
    owner, repo = parts
    repo = repo[: -len(".git")] if repo.endswith(".git") else repo
    if not owner or not repo:
        return None
    return f"{owner}/{repo}"


def github_commit_base(remote: str | None) -> str | None:
    """``https://github.com/OWNER/REPO/commit/`` for a GitHub remote URL, else None.

    Accepts the forms git prints for ``remote get-url``: ``git@github.com:O/R.git``,
    ``ssh://git@github.com[:22]/O/R.git``, ``https://[user[:token]@]github.com/O/R[.git]``
    and ``git://github.com/O/R.git``. Credentials in the URL never reach the page.
    """
    if not remote or not isinstance(remote, str):
        return None
    remote = remote.strip()
    if "://" in remote:
        parts = urlsplit(remote)
        if parts.scheme not in ("https", "http", "ssh", "git", "git+ssh"):
            return None
        host, path = (parts.hostname or "").lower(), parts.path
    else:
        m = _SCP_LIKE.match(remote)
        if m is None:
            return None
        host, path = m.group("host").lower(), m.group("path")
    if host not in GITHUB_HOSTS:
        return None
    owner_repo = _owner_repo(path)
    return f"https://github.com/{owner_repo}/commit/" if owner_repo else None


def git_remote_url(repo: str | os.PathLike | None, remote: str = "origin") -> str | None:
    """``git remote get-url REMOTE`` in *repo*, or None when git or the remote is missing."""
    if repo is None:
        return None
    try:
        proc = subprocess.run(
            ["git", "-C", os.fspath(repo), "remote", "get-url", remote],
            capture_output=True,
            text=True,
            timeout=20,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if proc.returncode != 0:
        return None
    return proc.stdout.strip() or None


def commit_url_base(conf_value: str | None, repo: str | os.PathLike | None) -> str | None:
    """The base URL of commit links: the config's, else the GitHub remote's, else None.

    asv's own default (``"#"``) and relative values (``"../commit/"``) do not
    lead to a commit page from a published site, so only absolute URLs count.
    """
    if isinstance(conf_value, str) and re.match(r"^https?://", conf_value.strip()):
        return conf_value.strip()
    return github_commit_base(git_remote_url(repo))


def commit_url(base: str | None, sha: str) -> str | None:
    return f"{base}{sha}" if base and sha else None


def _component(text: str) -> str:
    # JavaScript's encodeURIComponent, which asv's hash parser undoes.
    return quote(text, safe="!~*'()")


def asv_graph_url(
    benchmark: str,
    params: Mapping[str, str] | Iterable[tuple[str, str]],
    *,
    machine: str | None = None,
    commits: tuple[str, str] | str | None = None,
    page: str = "index.html",
) -> str:
    """A link into asv's graph page with one cell selected.

    asv 0.6 keeps the page state in the URL hash: ``#BENCHMARK?K=V&...``, where
    benchmark parameters are ``p-NAME`` with the value as asv stores it (the
    Python repr), ``machine`` selects a machine and ``commits`` highlights a
    commit or a ``first-last`` range (asv's graphdisplay.js).
    """
    items = list(params.items() if isinstance(params, Mapping) else params)
    query = [f"p-{_component(k)}={_component(repr(str(v)))}" for k, v in items]
    if machine:
        query.insert(0, f"machine={_component(machine)}")
    if commits:
        sel = commits if isinstance(commits, str) else f"{commits[0]}-{commits[1]}"
        query.append(f"commits={_component(sel)}")
    return f"{page}#{_component(benchmark)}?{'&'.join(query)}"
