"""When in a run each cell's process ran, and what the GPU's clocks did meanwhile.

asv keeps a cell's samples but not when its process ran. Two logs a validation pass writes
next to the results give that (``tools/gpu_validation.sh`` with ``CELL_COST=1``):

- the per-cell timestamps of ``tools/asv_cell_cost.py``: one JSON array per setup call,
  ``[name, arguments, start, end, pid, error]``, times in seconds since the epoch;
- nvidia-smi's clock log, ``--query-gpu=timestamp,clocks.sm,clocks.mem,<reasons>,...
  --format=csv,nounits -lms 250``, its timestamps in the runner's local time.

Both are what a runner left behind: a line cut short by a killed run, ``[N/A]`` fields, a
process whose setup failed before it logged. What cannot be read is skipped and counted,
never guessed.

Readings: :func:`process_spans` places each cell's process in time, :func:`clocks_during`
summarizes the clock rows inside a span, and :func:`clustering` asks whether a run's slow
readings fall closer together in time than the same number placed at random among its
readings would (docs/kernels/attention_prologue.md, "When in the run the slow processes
fall").
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import random
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

CellKey = tuple[str, str, str, str]  # kernel, metric, variant, shape: _prepare's arguments

# nvidia-smi's clocks event ("throttle") reason bits (nvml.h, nvmlClocksEventReason*).
REASONS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
# Bits that say nothing about a busy GPU's speed: idle between processes, a clock the
# administrator set.
BENIGN = 0x1 | 0x2 | 0x100


@dataclass(frozen=True)
class Span:
    """One cell's process: from its first setup call to the next process's first one."""

    key: CellKey
    start: float
    end: float
    pid: int


def process_spans(lines: Iterable[str]) -> tuple[dict[CellKey, Span], int]:
    """``(spans, skipped)`` from the lines of a per-cell timestamp log.

    A process's span runs from its first logged call to the next process's first call
    (the last process: to the end of its last call), so it covers what the cell cost:
    setup, samples, exit. Only processes with a ``_prepare`` call name a cell; a cell
    seen in two processes keeps the first. *skipped* counts lines that are not a
    well-formed entry."""
    calls: dict[int, list[tuple[float, float, str, list]]] = {}
    skipped = 0
    for line in lines:
        if not line.strip():
            continue
        try:
            name, args, start, end, pid, _err = json.loads(line)
            start, end, pid = float(start), float(end), int(pid)
            if not (isinstance(name, str) and isinstance(args, list)):
                raise TypeError(name)
            if not (math.isfinite(start) and math.isfinite(end)):
                raise ValueError(start)
        except (ValueError, TypeError):
            skipped += 1
            continue
        calls.setdefault(pid, []).append((start, end, name, args))
    order = sorted(calls.items(), key=lambda kv: (min(c[0] for c in kv[1]), kv[0]))
    spans: dict[CellKey, Span] = {}
    for i, (pid, cs) in enumerate(order):
        start = min(c[0] for c in cs)
        end = min(c[0] for c in order[i + 1][1]) if i + 1 < len(order) else max(c[1] for c in cs)
        prep = [c for c in sorted(cs) if c[2] == "_prepare" and len(c[3]) >= 4]
        if not prep:
            continue
        key = tuple(str(a) for a in prep[0][3][:4])
        spans.setdefault(key, Span(key, start, max(start, end), pid))
    return spans, skipped


@dataclass(frozen=True)
class ClockRow:
    t: float  # seconds since the epoch
    sm_mhz: float | None
    mem_mhz: float | None
    reasons: int | None  # the clocks event reason bits
    power_w: float | None


_COLUMNS = {
    "timestamp": "t",
    "clocks.current.sm": "sm_mhz",
    "clocks.sm": "sm_mhz",
    "clocks.current.memory": "mem_mhz",
    "clocks.mem": "mem_mhz",
    "clocks_event_reasons.active": "reasons",
    "clocks_throttle_reasons.active": "reasons",
    "power.draw": "power_w",
}


def _number(text: str) -> float | None:
    try:
        x = float(text.split()[0])
    except (ValueError, IndexError):
        return None  # "[N/A]", "[Not Supported]", cut short
    return x if math.isfinite(x) else None


def read_clocks(lines: Iterable[str], utc_offset_s: float = 0.0) -> tuple[list[ClockRow], int]:
    """``(rows, skipped)`` from nvidia-smi's CSV clock log, in time order.

    Columns are found by the header's names (with or without units), so any subset and
    order of the fields reads. nvidia-smi writes local time: *utc_offset_s* is the
    runner's offset from UTC (0 for a runner on UTC). A row without a readable timestamp
    is skipped and counted; an unreadable field is None."""
    it = iter(lines)
    cols: dict[int, str] = {}
    for header in it:
        if header.strip():
            for i, name in enumerate(header.split(",")):
                field = _COLUMNS.get(name.strip().split(" [")[0].strip())
                if field and field not in cols.values():
                    cols[i] = field
            break
    if "t" not in cols.values():
        raise ValueError("clock log: no 'timestamp' column in its header")
    rows, skipped = [], 0
    for line in it:
        if not line.strip():
            continue
        parts = [p.strip() for p in line.split(",")]
        got: dict[str, object] = {}
        for i, field in cols.items():
            text = parts[i] if i < len(parts) else ""
            if field == "t":
                try:
                    stamp = _dt.datetime.strptime(text, "%Y/%m/%d %H:%M:%S.%f")
                except ValueError:
                    break
                got["t"] = stamp.replace(tzinfo=_dt.timezone.utc).timestamp() - utc_offset_s
            elif field == "reasons":
                try:
                    got["reasons"] = int(text, 16)
                except ValueError:
                    got["reasons"] = None
            else:
                got[field] = _number(text)
        if "t" not in got:
            skipped += 1
            continue
        rows.append(
            ClockRow(
                got["t"],
                got.get("sm_mhz"),
                got.get("mem_mhz"),
                got.get("reasons"),
                got.get("power_w"),
            )
        )
    rows.sort(key=lambda r: r.t)
    return rows, skipped


@dataclass(frozen=True)
class Clocks:
    """The clock rows inside one span."""

    rows: int
    min_sm_mhz: float | None
    min_mem_mhz: float | None
    reasons: int  # every reason bit seen, OR-ed

    @property
    def slowed(self) -> bool:
        """A reason other than idle or a set clock was active at some row."""
        return bool(self.reasons & ~BENIGN)

    def reason_names(self) -> list[str]:
        return [n for bit, n in REASONS.items() if self.reasons & bit] or (
            [f"0x{self.reasons:x}"] if self.reasons else []
        )


def clocks_during(rows: Sequence[ClockRow], start: float, end: float) -> Clocks:
    """The rows of *rows* from *start* to *end*, both included, summarized."""
    inside = [r for r in rows if start <= r.t <= end]
    sms = [r.sm_mhz for r in inside if r.sm_mhz is not None]
    mems = [r.mem_mhz for r in inside if r.mem_mhz is not None]
    bits = 0
    for r in inside:
        bits |= r.reasons or 0
    return Clocks(len(inside), min(sms, default=None), min(mems, default=None), bits)


@dataclass(frozen=True)
class Clustering:
    slow: int  # slow readings, over the runs
    close: int  # of them, those with another slow one within ``gap`` seconds in their run
    shuffled_median: float  # the same count with the slow labels placed at random
    p: float  # the share of shuffles with at least ``close``, (1 + k) / (1 + shuffles)


def _close(times: Sequence[float], picked: Sequence[int], gap: float) -> int:
    ts = sorted(times[i] for i in picked)
    n = 0
    for j, t in enumerate(ts):
        if (j > 0 and t - ts[j - 1] <= gap) or (j + 1 < len(ts) and ts[j + 1] - t <= gap):
            n += 1
    return n


def clustering(
    runs: Iterable[tuple[Sequence[float], Sequence[bool]]],
    gap: float = 5.0,
    shuffles: int = 2000,
    seed: int = 0,
) -> Clustering:
    """Whether slow readings come closer together in time than chance, over runs.

    Each run is ``(times, slow)``: when each reading's process started, and whether the
    reading was slow. The statistic is the number of slow readings with another slow one
    of the same run within *gap* seconds; the null places each run's slow labels at
    random among its readings (a permutation test, *shuffles* times, seeded)."""
    if not gap > 0:
        raise ValueError(f"gap must be positive seconds, got {gap}")
    if shuffles < 1:
        raise ValueError(f"shuffles must be at least 1, got {shuffles}")
    runs = [(list(t), list(s)) for t, s in runs]
    for times, slow in runs:
        if len(times) != len(slow):
            raise ValueError(f"a run has {len(times)} times and {len(slow)} slow flags")
    rng = random.Random(seed)
    observed, total = 0, 0
    sims = [0] * shuffles
    for times, slow in runs:
        picked = [i for i, s in enumerate(slow) if s]
        total += len(picked)
        observed += _close(times, picked, gap)
        if len(picked) < 2:
            continue
        for k in range(shuffles):
            sims[k] += _close(times, rng.sample(range(len(times)), len(picked)), gap)
    p = (1 + sum(s >= observed for s in sims)) / (1 + shuffles)
    return Clustering(total, observed, float(statistics.median(sims)), p)
