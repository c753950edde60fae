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
    def from_json(cls, d: Mapping) -> StepInfo:
        ci = d.get("ci")
        return cls(
            d["last_good"],
            d["first_bad"],
            tuple(d["range"]),
            finite(d.get("ratio")),
            (float(ci[0]), float(ci[1])) if ci and None not in ci else None,
            float(d["p_value"]) if d.get("p_value") is not None else 1.0,
            bool(d["persists"]),
            int(d.get("runs_after", 0)),
            d["direction"],
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
    def from_json(cls, d: Mapping) -> Cell:
        step = d.get("step")
        return cls(
            d.get("ratio"),
            d["flag"],
            d.get("head"),
            d.get("base"),
            d.get("p_value"),
            d.get("test", "none"),
            StepInfo.from_json(step) if step else None,
            tuple(StepInfo.from_json(s) for s in d.get("earlier_steps") or ()),
            d.get("noise"),
            d.get("gpu_uuid"),
            d.get("verdict_of"),
            d.get("why"),
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
    def from_json(cls, d: Mapping) -> Row:
        return cls(
            d["benchmark"],
            d.get("kernel", ""),
            d.get("metric", ""),
            d.get("variant"),
            d.get("shape"),
            tuple((str(k), str(v)) for k, v in d.get("params", ())),
            d.get("unit", ""),
            bool(d.get("higher_is_better", False)),
            float(d.get("threshold", 1.0)),
            {m: Cell.from_json(c) for m, c in d.get("cells", {}).items()},
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
        """A report written by :meth:`to_json`; ValueError naming *source* if it is not one."""
        try:
            b = d["baseline"]
            return cls(
                d["head"],
                Baseline(
                    b["kind"],
                    str(b["ref"]),
                    tuple(b.get("commits", ())),
                    {k: tuple(v) for k, v in b.get("commits_by_machine", {}).items()},
                ),
                d["status"],
                tuple(d.get("machines", ())),
                tuple(Row.from_json(r) for r in d["rows"]),
                tuple(
                    Problem(p.get("path", ""), p.get("machine"), p["kind"], p.get("message", ""))
                    for p in d.get("problems", ())
                ),
                tuple(d.get("notes", ())),
            )
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as e:
            raise ValueError(
                f"{source} is not an ltx2k regress report ({type(e).__name__}: {e})"
            ) from e
