"""Which commits a judgement or a dashboard reads: ``load_results(select=Window(...))``.

A long history costs what its window costs, not what the whole store holds: the
loader parses every result file once for its commit and date (its
:data:`~ltx2k.history.records.FileIndex`), a :class:`Window` chooses from that
index the commits the caller will use, and only their files are loaded and checked.
The choice is the same one :func:`ltx2k.analysis.regress.compare` makes, so a
windowed load judges exactly what a full one would.
"""

from __future__ import annotations

from collections.abc import Mapping

from ltx2k.history import commits as git_commits
from ltx2k.history import series as hseries
from ltx2k.history.records import FileIndex

# The dashboard draws each GPU's last DRAWN commits, on asv's pages and the summary's
# plots alike, so that its time and memory follow that window and not the store's age
# (docs/history.md, "Cost at scale"); ``ltx2k publish --all`` draws the whole history.
DRAWN = 100


class Window:
    """A ``select`` for :func:`~ltx2k.history.records.load_results`.

    - ``last=N``: for each machine, the last N commits before head that it has
      results for, and head (``regress --last N``; the dashboard's history);
    - ``baseline=REF``: head and the baseline commit (``regress --baseline REF``).

    *head* is a sha, a prefix of one, or (with *repo*) a branch; None is the dashboard's
    head, :func:`ltx2k.history.commits.newest` (the newest measured commit of *branch*
    with *repo*). With *env*, only that environment's files count on the machines that
    ran it; a machine that did not keeps its own. After the load, :attr:`commits` holds
    every commit the history has, so that a caller can tell a typo from a commit not
    measured yet, and :attr:`order` the history the window was taken along (oldest
    first; empty in baseline mode).
    """

    def __init__(
        self,
        head: str | None = None,
        *,
        last: int | None = None,
        baseline: str | None = None,
        repo=None,
        env: str | None = None,
        branch: str | None = None,
    ):
        if (baseline is None) == (last is None):
            raise ValueError(
                f"a window takes exactly one of last or baseline, got last={last!r}, "
                f"baseline={baseline!r}"
            )
        if last is not None and (isinstance(last, bool) or not isinstance(last, int) or last < 1):
            raise ValueError(f"last must be a whole number >= 1, got {last!r}")
        self.head, self.last, self.baseline, self.repo, self.env = head, last, baseline, repo, env
        self.branch = branch
        self.commits: set[str] = set()
        self.order: list[str] = []

    def __call__(self, index: FileIndex) -> set[tuple[str, str]]:
        if self.env is not None:
            index = only_env(index, self.env)
        dates = {commit: date for (_, commit), (date, _) in index.items()}
        self.commits = set(dates)
        repo = self.repo
        if self.head is None:
            head, in_git = git_commits.newest(dates, repo, self.branch)
            if not in_git:
                repo = None  # a head git does not know is ordered by date
        else:
            head, _ = git_commits.resolve(self.head, dates, repo, "--head")
        if head is None:
            return set()  # nothing of it: the caller reports a typo or "no data"
        if self.baseline is not None:
            base, _ = git_commits.resolve(self.baseline, dates, repo, "--baseline")
            return {key for key in index if key[1] in (head, base)}
        order = self.order = git_commits.mainline(head, repo, dates)
        machines = {machine for machine, _ in index}
        return {
            (m, c)
            for m in machines
            for c in hseries.machine_commits(index, m, order, head, self.last)
        }


def only_env(index: Mapping, env: str) -> dict:
    """*index* (a :data:`FileIndex`) with *env* chosen on each machine that ran it; the
    machines that never did keep theirs (one runner's environment name says nothing
    about another's)."""
    ran = {machine for (machine, _), (_, envs) in index.items() if env in envs}
    if index and not ran:
        held = sorted({e for _, envs in index.values() for e in envs})
        raise ValueError(f"--env {env!r}: no results in that environment; the results hold {held}")
    return {k: v for k, v in index.items() if k[0] not in ran or env in v[1]}
