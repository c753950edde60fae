"""One series per GPU per benchmark cell: a run per commit along the mainline.

A :class:`Series` is what the change-point detector judges: for one machine,
benchmark and parameter combination, the runs of the commits that machine
measured, oldest first, ending at the head commit. Runs that failed, were
skipped or are missing keep their place with ``value=None`` and a status
saying which; nothing is interpolated.

A series is of one version of the benchmark, head's: asv stores with each result the
version of the benchmark's code, and a result of another version measured other code
(``asv compare`` calls the two "not comparable", ``asv publish`` draws one version).
Runs of another version keep their place without a value, as ``OTHER_VERSION``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ltx2k.history.records import Record

# Why a point has no value.
OK, FAILED, MISSING = "ok", "failed", "missing"
OTHER_VERSION = "other-version"  # a result of another version of the benchmark than head's


@dataclass(frozen=True)
class Point:
    commit: str
    value: float | None
    samples: tuple[float, ...] | None
    # OK | FAILED (a result without a value) | MISSING (no result for this cell) |
    # OTHER_VERSION (a result of other benchmark code than head's: its value is left out)
    status: str
    record: Record | None


@dataclass(frozen=True)
class Series:
    machine: str
    benchmark: str
    params: tuple[tuple[str, str], ...]
    unit: str
    points: tuple[Point, ...]  # oldest first; the last one is the head commit

    @property
    def values(self) -> list[float | None]:
        return [p.value for p in self.points]

    @property
    def samples(self) -> list[tuple[float, ...] | None]:
        return [p.samples for p in self.points]

    @property
    def commits(self) -> list[str]:
        return [p.commit for p in self.points]


def index_records(records: Iterable[Record]) -> dict:
    """(machine, commit) -> {(benchmark, params): Record}; refuses ambiguous environments.

    Two files of one machine, commit and environment (a copy under another name, which
    asv reads by its ``commit_hash`` field) give one cell twice: the file named as asv
    names it (``<commit[:8]>-<env>.json``, the one ``asv run`` updates and ``asv compare``
    reads) is kept, whatever order the names sort in; the other is a "commit-mismatch"
    load problem."""
    index: dict = {}
    for r in records:
        slot = index.setdefault((r.machine, r.commit), {})
        key = (r.benchmark, r.params)
        prev = slot.get(key)
        if prev is not None and prev.env != r.env:
            raise ValueError(
                f"machine {r.machine!r} has results of commit {r.commit[:8]} in several "
                f"environments ({prev.env!r}, {r.env!r}); pass --env to pick one"
            )
        if prev is not None and _asv_named(prev) and not _asv_named(r):
            continue
        slot[key] = r
    return index


def _asv_named(r: Record) -> bool:
    """Whether *r* comes from a file named for its commit, as asv names result files."""
    return os.path.basename(r.path).startswith(f"{r.commit[:8]}-")


def machine_commits(index: dict, machine: str, order: Sequence[str], head: str, last: int):
    """The *last* commits before head that *machine* has results for, then head; oldest first."""
    pos = {c: i for i, c in enumerate(order)}
    measured = [c for c in order if (machine, c) in index and c != head]
    if head in pos:
        measured = [c for c in measured if pos[c] < pos[head]]
    return measured[-last:] + [head]


def same_version(a: str | None, b: str | None) -> bool:
    """Whether results of benchmark versions *a* and *b* measured the same code: asv's rule
    (Results.get_result_keys), where a result without a version matches any."""
    return a is None or b is None or a == b


def build(index: dict, machine: str, commits: Sequence[str], key) -> Series:
    """The series of one cell (*key* = (benchmark, params)) over *commits* on *machine*,
    the last one head: runs of another benchmark version than head's (than the newest
    stored one's, where head's result stores none) have no value."""
    benchmark, params = key
    points, unit = [], ""
    # Head's version; where head's result stores none (it matches any), the newest that
    # does, so that the runs before head are still of one version.
    version = None
    for c in reversed(commits):
        rec = index.get((machine, c), {}).get(key)
        if rec is not None and rec.bench_version is not None:
            version = rec.bench_version
            break
    for c in commits:
        rec = index.get((machine, c), {}).get(key)
        if rec is None:
            points.append(Point(c, None, None, MISSING, None))
            continue
        unit = rec.unit or unit
        if not same_version(rec.bench_version, version):
            points.append(Point(c, None, None, OTHER_VERSION, rec))
            continue
        status = OK if rec.value is not None else FAILED
        points.append(Point(c, rec.value, rec.samples, status, rec))
    return Series(machine, benchmark, params, unit, tuple(points))


def other_version(s: Series) -> str | None:
    """The newest commit before head whose result is of another benchmark version than
    head's (None: every result is of head's version)."""
    for p in reversed(s.points[:-1]):
        if p.status == OTHER_VERSION:
            return p.commit
    return None
