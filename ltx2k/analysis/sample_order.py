"""Where a cell's slow samples fall in the order asv took them.

asv takes a benchmark's samples one after another in one process and keeps them in that
order. A cell whose samples are exchangeable has its slow ones anywhere; a clock that
is not yet steady when sampling starts has them first. Which of the two a suite's cells
show says whether a cell's spread is the kernel's or the clock's, and whether the median
asv reports has moved because of it (docs/measurement.md, "The first samples of a cell").

Three readings of the time metrics (``time_*``: lower is better) of any set of records:

- :func:`position_profile`: per metric, the share of cells whose sample *i* lies more
  than ``high`` above the cell's settled value, for the first few positions.
- :func:`moved_cells`: the cells whose reported median lies more than ``tol`` above
  their settled value.
- :func:`slow_processes`: across runs (result files) of one GPU model, the cells whose
  settled value in one run lies more than ``tol`` above the cell's median over the runs:
  a process slow from its first sample to its last, which no reading inside one cell sees.

A cell's settled value is the median of the later half of its samples, by position
(:func:`settled`). Samples that are missing or not finite keep their position and count
as neither fast nor slow: a runner that lost a sample has not reordered the others.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from ltx2k.history.records import Record

HIGH = 0.10  # a sample this far above the settled value is a slow one
TOL = 0.03  # a reported median this far above the settled value has moved
LEVEL = 0.05  # a run's settled value this far above the cell's median over the runs is slow
MIN_SAMPLES = 6  # fewer finite samples than this: no later half to settle on


def _finite(x) -> bool:
    return isinstance(x, int | float) and math.isfinite(x)


def metric_of(rec: Record) -> str:
    """The benchmark's method name (``time_device_cold``)."""
    return rec.benchmark.rsplit(".", 1)[-1]


def is_time(rec: Record) -> bool:
    return metric_of(rec).startswith("time_")


def settled(samples) -> float | None:
    """The median of the later half of *samples* by position (finite ones only); None
    where fewer than :data:`MIN_SAMPLES` are finite or the value is not positive."""
    if not samples:
        return None
    if sum(1 for x in samples if _finite(x)) < MIN_SAMPLES:
        return None
    later = [x for x in samples[len(samples) // 2 :] if _finite(x)]
    if not later:
        return None
    value = statistics.median(later)
    return value if value > 0 else None


def _settled_cells(records: Iterable[Record]) -> Iterator[tuple[Record, float]]:
    """``(record, settled value)`` of the time cells that have one."""
    for rec in records:
        if is_time(rec):
            base = settled(rec.samples)
            if base is not None:
                yield rec, base


@dataclass(frozen=True)
class Profile:
    """One metric's cells, and per position the share of them with a slow sample there."""

    metric: str
    cells: int
    share_high: tuple[float, ...]


def position_profile(
    records: Iterable[Record], positions: int = 5, high: float = HIGH
) -> dict[str, Profile]:
    """Per time metric, the share of its cells whose sample at position ``i`` (``i <
    positions``) is more than *high* above the cell's :func:`settled` value. Cells
    without a settled value are not counted; a cell shorter than a position counts as
    not slow there."""
    if positions < 1:
        raise ValueError(f"positions must be at least 1, got {positions}")
    if not high > 0:
        raise ValueError(f"high must be a positive fraction, got {high}")
    cells: dict[str, int] = {}
    slow: dict[str, list[int]] = {}
    for rec, base in _settled_cells(records):
        m = metric_of(rec)
        cells[m] = cells.get(m, 0) + 1
        counts = slow.setdefault(m, [0] * positions)
        for i, x in enumerate(rec.samples[:positions]):
            if _finite(x) and x > (1 + high) * base:
                counts[i] += 1
    return {m: Profile(m, n, tuple(c / n for c in slow[m])) for m, n in sorted(cells.items())}


def moved_cells(records: Iterable[Record], tol: float = TOL) -> list[tuple[float, Record]]:
    """``(value / settled, record)`` of the time cells whose reported value lies more than
    *tol* above their settled value, largest first."""
    if not tol > 0:
        raise ValueError(f"tol must be a positive fraction, got {tol}")
    out = []
    for rec, base in _settled_cells(records):
        if _finite(rec.value) and rec.value > (1 + tol) * base:
            out.append((rec.value / base, rec))
    out.sort(key=lambda t: -t[0])
    return out


def slow_processes(
    records: Iterable[Record], tol: float = LEVEL, min_runs: int = 6
) -> tuple[list[Record], list[tuple[float, Record]]]:
    """``(compared, slow)`` over the time cells seen in at least *min_runs* runs.

    A run is one result file (``Record.path``; records without one count as one run per
    commit); a cell is one machine x benchmark x parameters, across commits as well, so
    only compare runs where the cell's code did not change. *compared* holds the records
    whose settled values were compared, *slow* holds ``(settled / median over the runs,
    record)`` of those more than *tol* above that median, largest first."""
    if not tol > 0:
        raise ValueError(f"tol must be a positive fraction, got {tol}")
    if min_runs < 2:
        raise ValueError(f"min_runs must be at least 2, got {min_runs}")
    cells: dict[tuple, dict[str, tuple[float, Record]]] = {}
    for rec, base in _settled_cells(records):
        run = rec.path or rec.commit
        cells.setdefault((rec.machine, rec.benchmark, rec.params), {})[run] = (base, rec)
    compared, slow = [], []
    for runs in cells.values():
        if len(runs) < min_runs:
            continue
        median = statistics.median(v for v, _ in runs.values())
        compared += [r for _, r in runs.values()]
        slow += [(v / median, r) for v, r in runs.values() if v > (1 + tol) * median]
    slow.sort(key=lambda t: -t[0])
    return compared, slow
