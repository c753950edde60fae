"""Which commits a judgement or a dashboard reads: ``load_results(select=Window(...))``.

A long history costs what its window costs, not what the whole store holds: the
loader parses every result file once for its commit and date (its
:data:`~ltx2k.history.records.FileIndex`), a :class:`Window` chooses from that
index the commits the caller will use, and only their files are loaded and checked.
The choice is the same one :func:`ltx2k.analysis.regress.compare` makes, so a
windowed load judges exactly what a full one would.
"""

from __future__ import annotations

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

    *head* is a sha, a prefix of one, or (with *repo*) a branch; None is the newest
    commit by commit date (the dashboard). With *env*, only that environment's files
    count. After the load, :attr:`commits` holds every commit the history has, so
    that a caller can tell a typo from a commit not measured yet.
    """

    def __init__(
        self,
        head: str | None = None,
        *,
        last: int | None = None,
        baseline: str | None = None,
        repo=None,
        env: str | None = None,
    ):
        if (baseline is None) == (last is None):
            raise ValueError(
                f"a window takes exactly one of last or baseline, got last={last!r}, "
                f"baseline={baseline!r}"
            )
        if last is not None and (isinstance(last, bool) or not isinstance(last, int) or last < 1):
            raise ValueError(f"last must be a whole number >= 1, got {last!r}")
        self.head, self.last, self.baseline, self.repo, self.env = head, last, baseline, repo, env
        self.commits: set[str] = set()

    def __call__(self, index: FileIndex) -> set[tuple[str, str]]:
        if self.env is not None:
            index = {k: v for k, v in index.items() if self.env in v[1]}
        dates = {commit: date for (_, commit), (date, _) in index.items()}
        self.commits = set(dates)
        if self.head is None:
            if not dates:
                return set()
            head = max(dates, key=lambda c: (dates[c], c))
        else:
            head, _ = git_commits.resolve(self.head, dates, self.repo, "--head")
        if head is None:
            return set()  # nothing of it: the caller reports a typo or "no data"
        if self.baseline is not None:
            base, _ = git_commits.resolve(self.baseline, dates, self.repo, "--baseline")
            return {key for key in index if key[1] in (head, base)}
        order = git_commits.mainline(head, self.repo, dates)
        machines = {machine for machine, _ in index}
        return {
            (m, c)
            for m in machines
            for c in hseries.machine_commits(index, m, order, head, self.last)
        }
