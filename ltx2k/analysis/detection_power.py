"""Detection power of ``ltx2k regress`` on real run-to-run noise.

Question: what is the smallest slowdown the harness reliably flags, without
false flags elsewhere? Answered from two asv runs of the *same* commit on one
machine (an A/A pair): their differences are the real noise of the runner.

- **False flags**: compare the two runs unchanged, B as head against A and
  A as head against B. Every flag there is a false alarm.
- **Power at a slowdown d**: scale every statistic of the head run (value,
  samples, CI, quartiles) by ``1 + d`` and compare again, in both directions;
  a cell counts as detected only if both directions flag it (noise that
  happened to make B faster must not hide, or help, a detection). Scaling the
  run's own samples keeps the real noise of both runs (not a model of it); a
  multiplicative step is what a kernel regression looks like.

The comparison is :func:`ltx2k.analysis.regress.compare` itself, with its
thresholds and asv's significance rule, so the answer is about the tool as
configured. Pass ``thresholds`` to see what a tighter ratio would buy.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import json
import math
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from ltx2k.analysis.regress import compare
from ltx2k.analysis.thresholds import Thresholds
from ltx2k.history import records as history_records
from ltx2k.history.records import Record

DEFAULT_DELTAS = (0.0, 0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.08, 0.10, 0.15)
_BASE, _HEAD = "a" * 40, "b" * 40  # stand-in commits: the pair is one commit twice


@dataclass(frozen=True)
class PowerPoint:
    delta: float
    flagged: tuple[str, ...]  # "benchmark variant shape" of each flagged cell
    total: int

    @property
    def rate(self) -> float:
        return len(self.flagged) / self.total if self.total else 0.0


@dataclass(frozen=True)
class PowerReport:
    machine: str
    commit: str
    benchmarks: tuple[str, ...]  # the cells under test
    false_flags: tuple[str, ...]  # flagged with no change (delta = 0)
    points: tuple[PowerPoint, ...]  # delta > 0
    threshold_note: str
    # Cells of both runs not under test, by why (LEFT_OUT's reasons): a partial second
    # run re-measures only some cells, and the rest must not pass for stable ones.
    left_out: tuple[tuple[str, int], ...] = ()

    @property
    def smallest_reliable(self) -> float | None:
        """The smallest tested slowdown flagged in every cell, and in every larger one."""
        best = None
        for p in sorted(self.points, key=lambda p: -p.delta):
            if p.rate < 1.0:
                break
            best = p.delta
        return best

    def to_json(self) -> dict:
        return {
            "machine": self.machine,
            "commit": self.commit,
            "cells": len(self.benchmarks),
            "false_flags": list(self.false_flags),
            "smallest_reliable_slowdown": self.smallest_reliable,
            "thresholds": self.threshold_note,
            "left_out": dict(self.left_out),
            "points": [
                {"delta": p.delta, "detected": len(p.flagged), "of": p.total, "rate": p.rate}
                for p in self.points
            ],
        }


def _label(benchmark: str, params) -> str:
    """ "SplitRope.time_device_cold blocked B1_S1024_H32_D128": what reports and --exclude use."""
    return " ".join([benchmark.split(".", 1)[-1], *dict(params).values()])


def _scaled(rec: Record, f: float) -> Record:
    def s(x):
        return None if x is None else x * f

    return dataclasses.replace(
        rec,
        commit=_HEAD,
        value=s(rec.value),
        ci_99=None if rec.ci_99 is None else (rec.ci_99[0] * f, rec.ci_99[1] * f),
        q_25=s(rec.q_25),
        q_75=s(rec.q_75),
        samples=None if rec.samples is None else tuple(s(x) for x in rec.samples),
    )


def pair_runs(
    run_a: Iterable[Record],
    run_b: Iterable[Record],
    *,
    machine: str | None = None,
    commit: str | None = None,
    env: str | None = None,
    benchmarks: str = "*.time_device_*",
    min_value: float = 10e-6,
    exclude: Sequence[str] = (),
) -> tuple[str, str, list[tuple[Record, Record]], tuple[tuple[str, int], ...]]:
    """The cells measured in both runs of one (machine, commit), re-run in B, base >= min_value,
    and how many cells of both runs were left out, by reason (:data:`LEFT_OUT`).

    Cells whose result is identical in A and B were not re-run (B is a copy
    of A for them, :func:`_not_rerun`) and are left out: they would fake perfect stability.
    ``exclude``: fnmatch globs over "benchmark variant shape" labels. A run may hold the
    commit in several asv environments (a result file each): the pair is of one
    environment, *env* or the one both runs hold (:func:`_pair_envs`).
    """
    run_a, run_b = list(run_a), list(run_b)
    common = {(r.machine, r.commit, r.benchmark, r.params) for r in run_a} & {
        (r.machine, r.commit, r.benchmark, r.params) for r in run_b
    }
    shared = sorted({(k[0], k[1]) for k in common})
    groups = shared
    if machine is not None:
        groups = [g for g in groups if g[0] == machine]
    if commit is not None:
        groups = [g for g in groups if g[1].startswith(commit)]
    if len(groups) != 1:
        shown = ", ".join(f"{m}@{c[:8]}" for m, c in shared) or "none"
        asked = [f"{k}={v!r}" for k, v in (("machine", machine), ("commit", commit)) if v]
        if shared and not groups:
            why = f"none of them matches {' and '.join(asked)}"
        elif not shared:
            why = "no cell of one run is in the other (see the problems above, if any)"
        else:
            why = "pass machine= and commit= to choose"
        raise ValueError(
            f"the two runs must share exactly one (machine, commit): {why}. Shared: {shown}"
        )
    mach, sha = groups[0]
    env_a, env_b = _pair_envs(run_a, run_b, mach, sha, env)
    # One record per cell and run: a commit measured in several environments would
    # otherwise pair one environment's cell with another's.
    a_idx = {
        (r.benchmark, r.params): r
        for r in run_a
        if (r.machine, r.commit, r.env) == (mach, sha, env_a)
    }
    b_idx = {
        (r.benchmark, r.params): r
        for r in run_b
        if (r.machine, r.commit, r.env) == (mach, sha, env_b)
    }
    pairs = []
    left_out = dict.fromkeys(LEFT_OUT, 0)
    for k in sorted(a_idx.keys() & b_idx.keys(), key=str):
        a, b = a_idx[k], b_idx[k]
        if not fnmatch.fnmatchcase(a.benchmark, benchmarks):
            continue
        if any(fnmatch.fnmatchcase(_label(a.benchmark, a.params), g) for g in exclude):
            continue
        if a.value is None or b.value is None:
            left_out[NO_VALUE] += 1
        elif a.value < min_value:
            left_out[BELOW_MIN] += 1
        elif _not_rerun(a, b):
            left_out[NOT_RERUN] += 1
        else:
            pairs.append((a, b))
    if not pairs:
        raise ValueError(
            f"no cell of {mach}@{sha[:8]} matching {benchmarks!r} with a base value >= "
            f"{min_value:g} was re-run in the second run ({_left_out_text(left_out)})"
        )
    return mach, sha, pairs, tuple((why, n) for why, n in left_out.items() if n)


def _pair_envs(run_a, run_b, machine: str, commit: str, env: str | None) -> tuple[str, str]:
    """(environment of run A, of run B) whose results of *commit* on *machine* pair up:
    *env* in both; else the one environment both runs hold; else, where each run holds
    one, those two (an environment renamed between the runs). ValueError otherwise."""
    held = [
        sorted({r.env for r in run if (r.machine, r.commit) == (machine, commit)})
        for run in (run_a, run_b)
    ]
    both = sorted(set(held[0]) & set(held[1]))
    where = f"{machine}@{commit[:8]}"
    if env is not None:
        if env not in both:
            raise ValueError(
                f"env={env!r}: the runs of {where} are in run A {held[0]}, run B {held[1]}"
            )
        return env, env
    if len(both) == 1:
        return both[0], both[0]
    if not both and len(held[0]) == len(held[1]) == 1:
        return held[0][0], held[1][0]
    raise ValueError(
        f"the runs hold {where} in several environments (run A {held[0]}, run B "
        f"{held[1]}): pass env= to choose one"
    )


# Why a cell both runs hold is not under test.
NO_VALUE = "no value in one run (failed, skipped or not selected)"
BELOW_MIN = "below the minimum value"
NOT_RERUN = "not re-run: run B holds run A's own result"
LEFT_OUT = (NO_VALUE, BELOW_MIN, NOT_RERUN)


def _left_out_text(left_out) -> str:
    parts = [f"{n} {why}" for why, n in dict(left_out).items() if n]
    return "; ".join(parts) or "no cell of that machine and commit in both runs"


def _not_rerun(a: Record, b: Record) -> bool:
    """B holds A's own result: the same samples, or without samples (a run without
    --record-samples) the same value, interval and quartiles."""
    if a.samples is not None or b.samples is not None:
        return a.samples == b.samples
    return (a.value, a.ci_99, a.q_25, a.q_75) == (b.value, b.ci_99, b.q_25, b.q_75)


def _flags_one_way(pairs, factor: float, thresholds: Thresholds) -> set[str]:
    """Cells flagged when the second record of each pair, scaled, is the head."""
    records = []
    for base, head in pairs:
        records.append(dataclasses.replace(base, commit=_BASE))
        records.append(_scaled(head, factor))
    report = compare(records, _HEAD, baseline=_BASE, thresholds=thresholds)
    flagged = set()
    for row in report.rows:
        for cell in row.cells.values():
            if cell.flag == "regression":
                flagged.add(_label(row.benchmark, row.params))
    return flagged


def _flags(pairs, factor: float, thresholds: Thresholds, *, both: bool) -> tuple[str, ...]:
    """Flagged in both directions (``both``: detections) or in either (false flags)."""
    ab = _flags_one_way(pairs, factor, thresholds)
    ba = _flags_one_way([(b, a) for a, b in pairs], factor, thresholds)
    return tuple(sorted(ab & ba if both else ab | ba))


def detection_power(
    run_a: Iterable[Record],
    run_b: Iterable[Record],
    *,
    deltas: Sequence[float] = DEFAULT_DELTAS,
    thresholds: Thresholds | None = None,
    **select,
) -> PowerReport:
    """False flags of the A/A pair, and the share of cells flagged at each injected slowdown."""
    bad = [d for d in deltas if not isinstance(d, (int, float)) or d < 0 or d != d]
    if bad or not deltas:
        raise ValueError(f"deltas must be non-negative fractions (0.05 = 5%), got {list(deltas)!r}")
    thresholds = thresholds or Thresholds()
    mach, sha, pairs, left_out = pair_runs(run_a, run_b, **select)
    false_flags = _flags(pairs, 1.0, thresholds, both=False)
    points = tuple(
        PowerPoint(float(d), _flags(pairs, 1.0 + d, thresholds, both=True), len(pairs))
        for d in sorted(set(deltas))
        if d > 0
    )
    ratio = thresholds.ratio_for("x.time_device_cold")
    note = f"time_device_* ratio {ratio}, alpha {thresholds.alpha}"
    cells = tuple(_label(a.benchmark, a.params) for a, _ in pairs)
    return PowerReport(mach, sha, cells, false_flags, points, note, left_out)


def format_report(rep: PowerReport) -> str:
    lines = [
        f"detection power on {rep.machine} @ {rep.commit[:8]}: {len(rep.benchmarks)} cells "
        f"({rep.threshold_note})"
    ]
    if rep.left_out:
        lines.append(f"left out: {_left_out_text(rep.left_out)}")
    lines += [
        f"false flags with no change: {len(rep.false_flags)}"
        + ("".join(f"\n  {f}" for f in rep.false_flags)),
    ]
    for p in rep.points:
        lines.append(f"  slowdown {p.delta * 100:5.1f}%: flagged {len(p.flagged):3d}/{p.total}")
    best = rep.smallest_reliable
    lines.append(
        "smallest slowdown flagged in every cell: "
        + (f"{best * 100:.0f}%" if best is not None else "none of those tested")
    )
    return "\n".join(lines)


def load_runs(run_a, run_b, problems: list | None = None) -> tuple[list[Record], list[Record]]:
    """The records of the A/A pair's two asv results dirs; what could not be read of them
    is appended to *problems* (:class:`ltx2k.history.records.Problem`), where given.

    ValueError names the run (``run_a=...``) when a dir is missing or holds no results.
    """
    runs = []
    for name, path in (("run_a", run_a), ("run_b", run_b)):
        try:
            records, found = history_records.load_results(path)
        except ValueError as e:
            # load_results names its own parameter; the run is what the caller passed.
            raise ValueError(str(e).replace("results_dir=", f"{name}=", 1)) from e
        if problems is not None:
            problems.extend(found)
        if not records:
            raise ValueError(f"{os.fspath(path)!r} holds no asv results ({len(found)} problem(s))")
        runs.append(records)
    return runs[0], runs[1]


def device_time_thresholds(ratio: float | None) -> Thresholds:
    """The default thresholds, with *ratio* for every ``time_device_*`` benchmark (None: as is)."""
    if ratio is None:
        return Thresholds()
    return Thresholds(ratios=(("*.time_device_*", ratio), *Thresholds().ratios))


def at_ratios(
    run_a: Sequence[Record],
    run_b: Sequence[Record],
    ratios: Sequence[float | None] = (),
    **kwargs,
) -> Iterator[tuple[str, PowerReport]]:
    """(label, report) for each device-time threshold ratio (none given: the default's).

    An iterator, so that a caller can show each report while the next is computed
    (every ratio is checked first);
    *kwargs* go to :func:`detection_power`.
    """
    ratios = list(ratios)
    for ratio in ratios:
        # Checked before the first report: a generator would otherwise fail half-way.
        ok = isinstance(ratio, (int, float)) and not isinstance(ratio, bool)
        if not (ok and math.isfinite(ratio) and ratio >= 1.0):
            raise ValueError(
                f"ratios: {ratio!r} is no device-time threshold ratio "
                "(a finite number >= 1.0; 1.05 = 5% worse)"
            )
    return _reports_at(run_a, run_b, ratios, kwargs)


def _reports_at(run_a, run_b, ratios, kwargs) -> Iterator[tuple[str, PowerReport]]:
    for ratio in ratios or [None]:
        thresholds = device_time_thresholds(ratio)
        report = detection_power(run_a, run_b, thresholds=thresholds, **kwargs)
        yield f"threshold {thresholds.ratio_for('x.time_device_cold')}", report


def write_json(reports: Iterable[tuple[str, PowerReport]], path) -> None:
    with open(path, "w") as f:
        json.dump([r.to_json() for _, r in reports], f, indent=1)
