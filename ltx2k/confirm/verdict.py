"""The verdict on a re-measured pair: each cell judged by :func:`ltx2k.analysis.regress.compare`
with its own threshold and direction, on every measuring process's value where there are such.

The step is *confirmed* only if the pair is a regression again. asv keeps one number per
commit of a ``track_*`` benchmark; where the benchmark also wrote every measuring process's
value (:mod:`ltx2k.runner.process_values`), those values are its samples, judged by asv's rank test
at the detector's minimum step.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from ltx2k.confirm.targets import Target


@dataclass
class CellResult:
    benchmark: str
    params: tuple[tuple[str, str], ...]
    verdict: str  # "confirmed" | "not-confirmed" | "no-data" | "error" | "not-checked"
    commit: str | None = None  # the commit judged (after)
    before: str | None = None
    subject: str = ""
    bisected: bool = False
    range_size: int = 0  # commits in the step's range
    flag: str | None = None  # regress.compare's flag of the re-measured pair
    before_value: float | None = None
    after_value: float | None = None
    ratio: float | None = None  # after / before
    p_value: float | None = None
    test: str | None = None
    unit: str = ""
    threshold: float | None = None
    higher_is_better: bool | None = None
    flagged_ratio: float | None = None
    message: str = ""

    @property
    def label(self) -> str:
        values = " ".join(v for _, v in self.params)
        return f"{self.benchmark} {values}".strip()

    def to_json(self) -> dict:
        return {
            "benchmark": self.benchmark,
            "params": [list(p) for p in self.params],
            "verdict": self.verdict,
            "commit": self.commit,
            "before": self.before,
            "subject": self.subject,
            "bisected": self.bisected,
            "range_size": self.range_size,
            "flag": self.flag,
            "before_value": self.before_value,
            "after_value": self.after_value,
            "ratio": self.ratio,
            "p_value": self.p_value,
            "test": self.test,
            "unit": self.unit,
            "threshold": self.threshold,
            "higher_is_better": self.higher_is_better,
            "flagged_ratio": self.flagged_ratio,
            "message": self.message,
        }


# --- thresholds --------------------------------------------------------------------------------


def _dotted(name: str) -> str:
    # Threshold globs are "*.time_device_*"-style: give a bare suffix its dot.
    return name if "." in name else "." + name


def threshold_of(t: Target, thresholds) -> float:
    """The target's own threshold, else the thresholds' ratio for its name."""
    return t.threshold or thresholds.ratio_for(_dotted(t.benchmark))


def higher_is_better(t: Target, thresholds) -> bool:
    """The target's own direction, else the thresholds' for its name."""
    if t.higher_is_better is not None:
        return t.higher_is_better
    return thresholds.higher_is_better(_dotted(t.benchmark))


def _thresholds_for(target: Target, base):
    """The report's threshold and direction for this cell first, *base* for the rest."""
    from ltx2k.analysis.thresholds import Thresholds

    ratios, directions = base.ratios, base.directions
    if target.exact and target.threshold is not None:
        ratios = ((target.benchmark, target.threshold), *ratios)
    if target.exact and target.higher_is_better is not None:
        direction = "higher" if target.higher_is_better else "lower"
        directions = ((target.benchmark, direction), *directions)
    return Thresholds(ratios=ratios, directions=directions, alpha=base.alpha)


# --- every process's value ---------------------------------------------------------------------


def with_process_values(records: Iterable, path, before: str, after: str):
    """*records*, where a cell has every process's values for both commits of the pair
    (``ltx2k.runner.process_values``, written by ``track_*`` benchmarks that asv keeps one
    number of), with those values as its samples and asv's statistics of them;
    the set of (benchmark, params) so replaced; and the number of lines of *path*
    that were not a complete record (skipped).

    A cell with values on one side only keeps asv's numbers on both sides: one
    sampled side against a single number is no rank test.
    """
    from ltx2k.runner import asv_compat, process_values

    values, bad = process_values.load(path)
    records = list(records)

    def key(r, commit: str):
        return (commit, r.benchmark, tuple(v for _, v in r.params))

    both = {
        (r.benchmark, r.params)
        for r in records
        if r.commit == before and key(r, before) in values and key(r, after) in values
    }
    out = []
    for r in records:
        if r.commit not in (before, after) or (r.benchmark, r.params) not in both:
            out.append(r)
            continue
        samples = values[key(r, r.commit)]
        median, st = asv_compat.compute_stats(samples, 1)
        out.append(
            replace(
                r,
                value=median,
                samples=tuple(samples),
                ci_99=(st["ci_99_a"], st["ci_99_b"]),
                q_25=st["q_25"],
                q_75=st["q_75"],
                number=1,
                repeat=len(samples),
            )
        )
    return out, both, bad


# --- the judgement -----------------------------------------------------------------------------


def judge(
    records: Iterable,
    target: Target,
    before: str,
    after: str,
    machine: str,
    thresholds=None,
    sampled: frozenset | set = frozenset(),
):
    """Cell results of the re-measured pair: regress.compare(head=after, baseline=before).

    Cells in *sampled* (``with_process_values``) are judged on every process's value
    with a rank test, so their minimum size is the detector's minimum step for the
    benchmark (what an interleaved A/B of processes was measured to resolve,
    docs/history.md "Host latency"), not the commit-vs-commit ratio that stands in
    for a test when there are no samples.
    """
    from ltx2k.analysis.thresholds import Thresholds

    base = thresholds if thresholds is not None else Thresholds()
    mine = [
        r
        for r in records
        if r.machine == machine
        and r.commit in (before, after)
        and target.matches(r.benchmark, r.params)
    ]
    if not mine:
        return []
    groups = (
        ([r for r in mine if (r.benchmark, r.params) not in sampled], False),
        ([r for r in mine if (r.benchmark, r.params) in sampled], True),
    )
    out = []
    for group, by_process in groups:
        if group:
            out += _judge_group(group, target, before, after, machine, base, by_process)
    return out


def _judge_group(mine, target, before, after, machine, base, by_process: bool):
    from ltx2k.analysis import regress

    thresholds = _thresholds_for(target, base)
    if by_process:
        steps = tuple((r.benchmark, base.step_for(r.benchmark)) for r in mine)
        thresholds = replace(thresholds, ratios=steps + thresholds.ratios)
    report = regress.compare(
        mine, after, baseline=before, machines=[machine], thresholds=thresholds
    )
    out = []
    for row in report.rows:
        c = row.cells[machine]
        verdict = {
            "regression": "confirmed",
            "insufficient": "no-data",
        }.get(c.flag, "not-confirmed")
        out.append(
            CellResult(
                benchmark=row.benchmark,
                params=row.params,
                verdict=verdict,
                commit=after,
                before=before,
                flag=c.flag,
                before_value=c.base,
                after_value=c.head,
                ratio=c.ratio,
                p_value=c.p_value,
                test=c.test,
                unit=row.unit,
                threshold=row.threshold,
                higher_is_better=row.higher_is_better,
                flagged_ratio=target.flagged_ratio,
                message="no value on one side"
                if c.flag == "insufficient"
                else "judged on every measuring process's value"
                if by_process
                else "",
            )
        )
    return out
