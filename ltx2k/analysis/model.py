"""The regression report as typed objects: what analysis hands to the report layer.

A :class:`Report` holds one :class:`Row` per benchmark x parameter
combination and, in each row, one :class:`Cell` per GPU. A cell judged on
its history carries the :class:`StepInfo` the change-point detector found.
``Report.to_json`` is the documented file format (docs/history.md) and
``Report.from_json`` reads it back, so a report written by one job is the
same object in the next.
"""

from __future__ import annotations

import math
import numbers
import re
import reprlib
from collections.abc import Mapping
from dataclasses import dataclass, field

from ltx2k.history.records import Problem

EXIT_OK = 0
EXIT_REGRESSION = 2
EXIT_INSUFFICIENT = 3
# An output (the JSON, the Markdown, a page) could not be written because of an
# error inside ltx2k; the others were written. Wins over 0 and 3, never over 2.
EXIT_INCOMPLETE = 4

# "suspected": a step seen on one run only and not far enough outside the noise to
# flag; ``ltx2k confirm`` re-measuring the two commits is the next step.
FLAGS = ("regression", "improvement", "suspected", "ok", "insufficient")
STATUSES = ("regression", "ok", "insufficient")  # Report.status
BASELINE_KINDS = ("commit", "branch", "last-n")  # Baseline.kind
DIRECTIONS = ("regression", "improvement")  # StepInfo.direction
TESTS = ("mann-whitney", "ci-overlap", "ratio-only", "change-point", "none")  # Cell.test
# A commit as the results name it (ltx2k.history.fields checks each file's commit_hash so)
# and as `git rev-parse` prints it.
COMMIT_SHA = re.compile(r"[0-9a-fA-F]{4,64}")


def finite(x) -> float | None:
    """*x* as a float, or None where it is missing or not finite: the JSON report holds
    no NaN or Infinity tokens (RFC 8259 has none), and a report never shows one."""
    if x is None or isinstance(x, bool):
        return None
    try:
        x = float(x)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


# --- reading the JSON back: every field checked, errors name it -----------------------------
#
# ``from_json`` refuses what ``to_json`` would never write: a ValueError naming the field
# (``rows[3].cells['h200'].flag``), what it must be and what it is. A report file comes
# from another job or an editor; a wrong value must not reach the page builder, where it
# shows as nonsense (the GPUs of "h200" are h, 2, 0, 0) or as an internal error.

_MISSING = object()
_SHOW = reprlib.Repr()
_SHOW.maxstring, _SHOW.maxother, _SHOW.maxlist, _SHOW.maxdict, _SHOW.maxlevel = 60, 60, 4, 4, 2


def _show(v) -> str:
    """*v* for an error message, on one line and short: its type and a clipped repr."""
    return "null" if v is None else f"{type(v).__name__} {_SHOW.repr(v)}"


def _bad(where: str, what: str, v) -> ValueError:
    return ValueError(f"{where} must be {what}, got {_show(v)}")


def _at(where: str, key) -> str:
    return f"{where}.{key}" if where else str(key)


def _get(d: Mapping, where: str, key: str, default=_MISSING):
    """``d[key]``, or *default* where the key is absent (ValueError without one)."""
    if key in d:
        return d[key]
    if default is _MISSING:
        raise ValueError(f"{_at(where, key)} is missing")
    return default


def _object(v, where: str) -> Mapping:
    if not isinstance(v, Mapping):
        raise _bad(where, "an object", v)
    for k in v:
        if not isinstance(k, str):
            raise _bad(where, "an object with string keys", k)
    return v


def _list(v, where: str, what: str = "a list") -> list | tuple:
    if not isinstance(v, (list, tuple)):
        raise _bad(where, what, v)
    return v


def _text(v, where: str, *, null: bool = False) -> str | None:
    if v is None and null:
        return None
    if not isinstance(v, str):
        raise _bad(where, "a string or null" if null else "a string", v)
    return v


def _texts(v, where: str) -> tuple[str, ...]:
    return tuple(
        _text(x, f"{where}[{i}]") for i, x in enumerate(_list(v, where, "a list of strings"))
    )


def _commit(v, where: str) -> str:
    if not isinstance(v, str) or not COMMIT_SHA.fullmatch(v):
        raise _bad(where, "a commit sha (4 to 64 hex digits)", v)
    return v


def _commits(v, where: str) -> tuple[str, ...]:
    items = _list(v, where, "a list of commit shas")
    return tuple(_commit(x, f"{where}[{i}]") for i, x in enumerate(items))


def _is_bool(v) -> bool:
    # numpy's bool is no subclass of bool, nor a number (a mapping built in memory may hold one)
    return isinstance(v, bool) or (
        type(v).__module__ == "numpy" and type(v).__name__ in ("bool", "bool_")
    )


def _number(v, where: str, *, null: bool = False) -> float | None:
    """A finite number (never a bool), as a float; None where *null* allows it."""
    if v is None and null:
        return None
    if isinstance(v, numbers.Real) and not _is_bool(v):
        try:
            x = float(v)
        except (OverflowError, ValueError):
            x = math.inf
        if math.isfinite(x):
            return x
    raise _bad(where, "a finite number or null" if null else "a finite number", v)


def _flag(v, where: str) -> bool:
    if not _is_bool(v):
        raise _bad(where, "true or false", v)
    return bool(v)


def _count(v, where: str) -> int:
    if not isinstance(v, numbers.Integral) or _is_bool(v) or v < 0:
        raise _bad(where, "a whole number >= 0", v)
    return int(v)


def _choice(v, where: str, allowed: tuple[str, ...]) -> str:
    if not isinstance(v, str) or v not in allowed:
        raise _bad(where, f"one of {list(allowed)}", v)
    return v


@dataclass(frozen=True)
class StepInfo:
    """A change of level in one GPU's history of one cell, named by commits."""

    last_good: str  # last commit measured on the old level
    first_bad: str  # first commit measured on the new level
    range: tuple[str, ...]  # commits after last_good up to first_bad, oldest first
    # new level / old level, as stored (not direction-adjusted); None from a level of 0
    # (an allocation count that appears), where no ratio exists
    ratio: float | None
    ci: tuple[float, float] | None  # 95% confidence interval of the ratio; None with it
    p_value: float
    persists: bool  # >= 2 runs on the new level and no later step undoing it
    runs_after: int
    direction: str  # "regression" | "improvement"

    @property
    def exact(self) -> bool:
        return len(self.range) == 1

    def to_json(self) -> dict:
        return {
            "last_good": self.last_good,
            "first_bad": self.first_bad,
            "range": list(self.range),
            "ratio": finite(self.ratio),
            "ci": [finite(x) for x in self.ci] if self.ci is not None else None,
            "p_value": finite(self.p_value),
            "persists": self.persists,
            "runs_after": self.runs_after,
            "direction": self.direction,
        }

    @classmethod
    def from_json(cls, d: Mapping, where: str = "step") -> StepInfo:
        """A step written by :meth:`to_json`; ValueError naming the field (*where* is
        the step's own place in the report) if it is not one."""
        d = _object(d, where)
        ci = _get(d, where, "ci", None)
        if ci is not None:
            if not isinstance(ci, (list, tuple)) or len(ci) != 2:
                raise _bad(_at(where, "ci"), "a list of 2 numbers or null", ci)
            ci = tuple(_number(x, f"{_at(where, 'ci')}[{i}]", null=True) for i, x in enumerate(ci))
            # to_json writes a bound that is not finite as null: no interval then
            ci = None if None in ci else ci
        p_value = _number(_get(d, where, "p_value", None), _at(where, "p_value"), null=True)
        return cls(
            _commit(_get(d, where, "last_good"), _at(where, "last_good")),
            _commit(_get(d, where, "first_bad"), _at(where, "first_bad")),
            _commits(_get(d, where, "range"), _at(where, "range")),
            _number(_get(d, where, "ratio", None), _at(where, "ratio"), null=True),
            ci,
            1.0 if p_value is None else p_value,
            _flag(_get(d, where, "persists"), _at(where, "persists")),
            _count(_get(d, where, "runs_after", 0), _at(where, "runs_after")),
            _choice(_get(d, where, "direction"), _at(where, "direction"), DIRECTIONS),
        )


@dataclass(frozen=True)
class Cell:
    ratio: float | None  # head / base, as stored (not direction-adjusted)
    flag: str  # one of FLAGS
    head: float | None
    base: float | None  # the baseline commit's value, or the level before the step
    p_value: float | None
    test: str  # "mann-whitney", "ci-overlap", "ratio-only", "change-point", "none"
    step: StepInfo | None = None  # the step that decides the flag (history mode)
    earlier: tuple[StepInfo, ...] = ()  # older steps in the window, for context
    noise: float | None = None  # between-run noise the history was judged against
    # The physical GPU that measured the head value, from shard-run's tag in the
    # result file (Record.gpu_uuid); None when the file names only the GPU model.
    gpu_uuid: str | None = None
    # A metric computed from another cell's measurement (ltx2k.workload.metrics.Metric.derived_from)
    # takes that cell's flag and step; this names the source benchmark.
    verdict_of: str | None = None
    # Why an "insufficient" cell has no verdict, when one sentence says it better than
    # a dash: "not measured at head", "not measured at base".
    why: str | None = None

    def to_json(self) -> dict:
        return {
            "ratio": finite(self.ratio),
            "flag": self.flag,
            "head": finite(self.head),
            "base": finite(self.base),
            "p_value": finite(self.p_value),
            "test": self.test,
            "step": self.step.to_json() if self.step else None,
            "earlier_steps": [s.to_json() for s in self.earlier],
            "noise": finite(self.noise),
            "gpu_uuid": self.gpu_uuid,
            "verdict_of": self.verdict_of,
            "why": self.why,
        }

    @classmethod
    def from_json(cls, d: Mapping, where: str = "cell") -> Cell:
        """A cell written by :meth:`to_json` (or before its newer keys existed);
        ValueError naming the field if it is not one."""
        d = _object(d, where)

        def number(key):
            return _number(_get(d, where, key, None), _at(where, key), null=True)

        def text(key):
            return _text(_get(d, where, key, None), _at(where, key), null=True)

        step = _get(d, where, "step", None)
        earlier = _at(where, "earlier_steps")
        return cls(
            number("ratio"),
            _choice(_get(d, where, "flag"), _at(where, "flag"), FLAGS),
            number("head"),
            number("base"),
            number("p_value"),
            _choice(_get(d, where, "test", "none"), _at(where, "test"), TESTS),
            None if step is None else StepInfo.from_json(step, _at(where, "step")),
            tuple(
                StepInfo.from_json(s, f"{earlier}[{i}]")
                for i, s in enumerate(_list(_get(d, where, "earlier_steps", ()), earlier))
            ),
            number("noise"),
            text("gpu_uuid"),
            text("verdict_of"),
            text("why"),
        )


@dataclass(frozen=True)
class Row:
    benchmark: str
    kernel: str  # the asv class, e.g. "SplitRope"
    metric: str
    variant: str | None
    shape: str | None
    params: tuple[tuple[str, str], ...]
    unit: str
    higher_is_better: bool
    threshold: float
    cells: dict[str, Cell]

    @property
    def launch(self) -> str | None:
        """The host launch path of a launch-path metric (``time_host_launch``), else None."""
        return dict(self.params).get("launch")

    def to_json(self) -> dict:
        return {
            "benchmark": self.benchmark,
            "kernel": self.kernel,
            "metric": self.metric,
            "variant": self.variant,
            "launch": self.launch,
            "shape": self.shape,
            "params": [list(p) for p in self.params],
            "unit": self.unit,
            "higher_is_better": self.higher_is_better,
            "threshold": self.threshold,
            "cells": {m: c.to_json() for m, c in self.cells.items()},
        }

    @classmethod
    def from_json(cls, d: Mapping, where: str = "row") -> Row:
        """A row written by :meth:`to_json`; ValueError naming the field if it is not one.
        ``launch`` is read from ``params``; the key, where present, is only checked."""
        d = _object(d, where)

        def text(key, default=_MISSING, *, null=False):
            return _text(_get(d, where, key, default), _at(where, key), null=null)

        params = []
        at = _at(where, "params")
        for i, p in enumerate(_list(_get(d, where, "params", ()), at)):
            if not isinstance(p, (list, tuple)) or len(p) != 2:
                raise _bad(f"{at}[{i}]", "a [name, value] pair of strings", p)
            params.append((_text(p[0], f"{at}[{i}][0]"), _text(p[1], f"{at}[{i}][1]")))
        text("launch", None, null=True)
        at = _at(where, "cells")
        cells = _object(_get(d, where, "cells", {}), at)
        return cls(
            text("benchmark"),
            text("kernel", ""),
            text("metric", ""),
            text("variant", None, null=True),
            text("shape", None, null=True),
            tuple(params),
            text("unit", ""),
            _flag(_get(d, where, "higher_is_better", False), _at(where, "higher_is_better")),
            _number(_get(d, where, "threshold", 1.0), _at(where, "threshold")),
            {m: Cell.from_json(c, f"{at}[{m!r}]") for m, c in cells.items()},
        )


@dataclass(frozen=True)
class Baseline:
    kind: str  # "commit" | "branch" | "last-n" (change points over the last N commits)
    ref: str  # the commit or branch asked for, or the window length N
    commits: tuple[str, ...]  # every baseline commit used, on any machine
    by_machine: dict[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class Report:
    head: str
    baseline: Baseline
    status: str  # "regression" | "ok" | "insufficient"
    machines: tuple[str, ...]
    rows: tuple[Row, ...]
    problems: tuple[Problem, ...] = ()
    notes: tuple[str, ...] = ()  # why data is missing, per machine

    @property
    def exit_code(self) -> int:
        return {"regression": EXIT_REGRESSION, "insufficient": EXIT_INSUFFICIENT}.get(
            self.status, EXIT_OK
        )

    def counts(self) -> dict[str, int]:
        """Cells per flag, every flag of FLAGS present: what the summary line says."""
        out = dict.fromkeys(FLAGS, 0)
        for _, _, c in self.cells():
            out[c.flag] = out.get(c.flag, 0) + 1
        return out

    def cells(self, flag: str | None = None) -> list[tuple[Row, str, Cell]]:
        return [
            (row, m, c)
            for row in self.rows
            for m, c in row.cells.items()
            if flag is None or c.flag == flag
        ]

    def to_json(self) -> dict:
        """The documented schema (docs/history.md); extra keys are additive."""
        return {
            "head": self.head,
            "baseline": {
                "kind": self.baseline.kind,
                "ref": self.baseline.ref,
                "commits": list(self.baseline.commits),
                "commits_by_machine": {k: list(v) for k, v in self.baseline.by_machine.items()},
            },
            "status": self.status,
            "machines": list(self.machines),
            "rows": [r.to_json() for r in self.rows],
            "notes": list(self.notes),
            "problems": [
                {"path": p.path, "machine": p.machine, "kind": p.kind, "message": p.message}
                for p in self.problems
            ],
        }

    @classmethod
    def from_json(cls, d: Mapping, *, source: str = "report") -> Report:
        """A report written by :meth:`to_json`; ValueError naming *source* and the field
        if it is not one, e.g. ``report is not an ltx2k regress report:
        rows[3].cells['h200'].flag must be one of [...], got str 'weird'``.

        Every field is checked: its type (a string, a list of strings, a finite number
        or null, true or false, as the classes declare), its set of values where it has
        one (:data:`STATUSES`, :data:`FLAGS`, :data:`TESTS`, :data:`DIRECTIONS`,
        :data:`BASELINE_KINDS`), commits as shas, and what holds across fields of every
        report regress writes: one cell per machine in each row, and status "regression"
        exactly where a cell is flagged so. Keys that newer versions add are ignored;
        the optional ones an older file lacks read as empty.
        """
        try:
            return cls._from_json(d)
        except ValueError as e:
            raise ValueError(f"{source} is not an ltx2k regress report: {e}") from e
        except (KeyError, TypeError, IndexError, AttributeError, RecursionError) as e:
            # Every field is checked above; this is a safety net, not a path a file takes.
            raise ValueError(
                f"{source} is not an ltx2k regress report ({type(e).__name__}: {e})"
            ) from e

    @classmethod
    def _from_json(cls, d) -> Report:
        if not isinstance(d, Mapping):
            raise _bad("the report", "a JSON object", d)
        d = _object(d, "the report")
        head = _commit(_get(d, "", "head"), "head")
        b = _object(_get(d, "", "baseline"), "baseline")
        kind = _choice(_get(b, "baseline", "kind"), "baseline.kind", BASELINE_KINDS)
        ref = _text(_get(b, "baseline", "ref"), "baseline.ref")
        if kind == "last-n" and not (ref.isdecimal() and ref.isascii() and int(ref) >= 1):
            raise _bad("baseline.ref", 'a whole number of commits >= 1 (kind "last-n")', ref)
        by_machine = _object(
            _get(b, "baseline", "commits_by_machine", {}), "baseline.commits_by_machine"
        )
        baseline = Baseline(
            kind,
            ref,
            _commits(_get(b, "baseline", "commits", ()), "baseline.commits"),
            {m: _commits(v, f"baseline.commits_by_machine[{m!r}]") for m, v in by_machine.items()},
        )
        status = _choice(_get(d, "", "status"), "status", STATUSES)
        machines = _texts(_get(d, "", "machines", ()), "machines")
        rows = tuple(
            Row.from_json(r, f"rows[{i}]") for i, r in enumerate(_list(_get(d, "", "rows"), "rows"))
        )
        problems = []
        for i, p in enumerate(_list(_get(d, "", "problems", ()), "problems")):
            at = f"problems[{i}]"
            p = _object(p, at)
            problems.append(
                Problem(
                    _text(_get(p, at, "path", ""), f"{at}.path"),
                    _text(_get(p, at, "machine", None), f"{at}.machine", null=True),
                    _text(_get(p, at, "kind"), f"{at}.kind"),
                    _text(_get(p, at, "message", ""), f"{at}.message"),
                )
            )
        notes = _texts(_get(d, "", "notes", ()), "notes")

        # What every report regress writes holds across fields: the Markdown and the counts
        # read row.cells[m] for each machine m, the exit status and the badge follow status.
        want = set(machines)
        for i, row in enumerate(rows):
            if set(row.cells) != want:
                missing = sorted(want - set(row.cells))
                extra = sorted(set(row.cells) - want)
                raise ValueError(
                    f"rows[{i}].cells must hold one cell per machine of machines "
                    f"{sorted(want)}; missing: {missing}, not in machines: {extra}"
                )
        flagged = any(c.flag == "regression" for row in rows for c in row.cells.values())
        if flagged and status != "regression":
            raise _bad("status", "'regression' when a cell is flagged regression", status)
        if status == "regression" and not flagged:
            raise ValueError("status is 'regression' but no cell is flagged regression")
        return cls(head, baseline, status, machines, rows, tuple(problems), notes)
