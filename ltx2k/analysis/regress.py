"""Per-GPU regression flags: head commit against a baseline, every machine at once.

Each machine x benchmark x parameter combination becomes one cell. A cell is
a *regression* only when both hold:

1. the value got worse by more than the benchmark's threshold ratio
   (:mod:`ltx2k.analysis.thresholds`; direction-aware, because asv assumes
   lower is better and percent-of-bandwidth is the opposite), and
2. the change is statistically significant:

   - against one baseline commit: asv's own test, :func:`asv._stats.is_different`
     (Mann-Whitney U on the stored samples when there are enough of them, else
     non-overlap of the 99% confidence intervals), the test ``asv compare`` and
     ``asv continuous`` apply; single-valued ``track_*`` results carry no
     statistics, and, like ``asv compare``, the ratio alone decides;
   - against the last N commits: :func:`scipy.stats.mannwhitneyu` of the head
     samples against the samples of all N commits pooled; without samples, the
     head CI must clear the hull of the N baseline CIs; without either (single
     values), the head value must lie beyond every one of the N values.

An improvement by the same rules is flagged ``improvement`` and never fails
the check. Cells without a head or baseline value are ``insufficient``.
"""

from __future__ import annotations

import math
import os
import re
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ltx2k.analysis.thresholds import Thresholds
from ltx2k.history.records import Problem, Record, load_results

EXIT_OK = 0
EXIT_REGRESSION = 2
EXIT_INSUFFICIENT = 3

FLAGS = ("regression", "improvement", "ok", "insufficient")
_HEX = re.compile(r"[0-9a-fA-F]{4,40}")


@dataclass(frozen=True)
class Cell:
    ratio: float | None  # head / base, as stored (not direction-adjusted)
    flag: str  # "regression" | "improvement" | "ok" | "insufficient"
    head: float | None
    base: float | None  # the baseline commit's value, or the median of the last N
    p_value: float | None  # Mann-Whitney U p-value where samples allow one
    test: str  # "mann-whitney", "ci-overlap", "ratio-only", "outside-range", "none"


@dataclass(frozen=True)
class Row:
    benchmark: str
    kernel: str
    metric: str
    variant: str | None
    shape: str | None
    params: tuple[tuple[str, str], ...]
    unit: str
    higher_is_better: bool
    threshold: float
    cells: dict[str, Cell]


@dataclass(frozen=True)
class Baseline:
    kind: str  # "commit" | "branch" | "last-n"
    ref: str
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
        return {
            "regression": EXIT_REGRESSION,
            "insufficient": EXIT_INSUFFICIENT,
        }.get(self.status, EXIT_OK)

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
            "rows": [
                {
                    "benchmark": r.benchmark,
                    "kernel": r.kernel,
                    "metric": r.metric,
                    "variant": r.variant,
                    "shape": r.shape,
                    "params": [list(p) for p in r.params],
                    "unit": r.unit,
                    "higher_is_better": r.higher_is_better,
                    "threshold": r.threshold,
                    "cells": {
                        m: {
                            "ratio": c.ratio,
                            "flag": c.flag,
                            "head": c.head,
                            "base": c.base,
                            "p_value": c.p_value,
                            "test": c.test,
                        }
                        for m, c in r.cells.items()
                    },
                }
                for r in self.rows
            ],
            "notes": list(self.notes),
            "problems": [
                {"path": p.path, "machine": p.machine, "kind": p.kind, "message": p.message}
                for p in self.problems
            ],
        }


# --- entry points --------------------------------------------------------------------------


def regress(
    results_dir,
    head: str,
    *,
    baseline: str | None = None,
    last: int | None = None,
    repo=None,
    machines: Sequence[str] | None = None,
    thresholds: Thresholds | str | os.PathLike | None = None,
    env: str | None = None,
) -> Report:
    """Load *results_dir* and :func:`compare`. Load problems travel in the report."""
    records, problems = load_results(results_dir)
    return compare(
        records,
        head,
        baseline=baseline,
        last=last,
        repo=repo,
        machines=machines,
        thresholds=thresholds,
        env=env,
        problems=problems,
    )


def compare(
    records: Iterable[Record],
    head: str,
    *,
    baseline: str | None = None,
    last: int | None = None,
    repo=None,
    machines: Sequence[str] | None = None,
    thresholds: Thresholds | str | os.PathLike | None = None,
    env: str | None = None,
    problems: Iterable[Problem] = (),
) -> Report:
    """Compare *head* with *baseline* (a commit or, with *repo*, a branch) or with
    the median of the *last* N commits before head, per machine."""
    if (baseline is None) == (last is None):
        raise ValueError(
            f"pass exactly one of baseline= (a commit or branch) or last= (N commits); "
            f"got baseline={baseline!r}, last={last!r}"
        )
    if last is not None and (isinstance(last, bool) or not isinstance(last, int) or last < 1):
        raise ValueError(f"last must be an int >= 1, got {last!r}")
    if repo is not None and not os.path.isdir(os.fspath(repo)):
        raise ValueError(f"repo={os.fspath(repo)!r} is not a directory")
    if machines is not None:
        machines = list(machines)
        bad = [m for m in machines if not isinstance(m, str) or not m]
        if not machines or bad:
            raise ValueError(f"machines must be non-empty machine names, got {machines!r}")
    if thresholds is None:
        thresholds = Thresholds()
    elif not isinstance(thresholds, Thresholds):
        thresholds = Thresholds.load(thresholds)
    problems = tuple(problems)

    records = [r for r in records if env is None or r.env == env]
    index = _index(records)
    known = {r.commit for r in records}
    head_sha, _ = _resolve(head, known, repo, "head")
    head_label = head_sha or head

    all_machines = sorted({r.machine for r in records} | {p.machine for p in problems if p.machine})
    columns = tuple(machines) if machines is not None else tuple(all_machines)
    problems = tuple(p for p in problems if p.machine is None or p.machine in columns)
    commits_of = {m: {c for (mm, c) in index if mm == m} for m in columns}

    if baseline is not None:
        base_sha, kind = _resolve(baseline, known, repo, "baseline")
        by_machine = {m: (base_sha,) if base_sha else () for m in columns}
        base = Baseline(kind, baseline, (base_sha,) if base_sha else (), by_machine)
    else:
        by_machine = _last_n(head_sha, last, commits_of, records, repo)
        union = sorted({c for cs in by_machine.values() for c in cs}, key=_date_key(records))
        base = Baseline("last-n", str(last), tuple(reversed(union)), by_machine)

    rows = _rows(index, head_sha, base, columns, thresholds, mode=base.kind)
    notes = _notes(index, head_label, head_sha, base, columns, rows)
    status = _status(rows, columns, explicit=machines is not None)
    return Report(head_label, base, status, columns, tuple(rows), problems, tuple(notes))


# --- resolving commits -----------------------------------------------------------------------


def _git(repo, *args: str) -> str | None:
    proc = subprocess.run(
        ["git", "-C", os.fspath(repo), *args], capture_output=True, text=True, check=False
    )
    return proc.stdout.strip() if proc.returncode == 0 else None


def _resolve(ref, known: set[str], repo, what: str) -> tuple[str | None, str]:
    """Full sha (None if it has no results anywhere and no repo knows it) and kind."""
    if not isinstance(ref, str) or not ref.strip():
        raise ValueError(f"{what} must be a commit sha or branch name, got {ref!r}")
    ref = ref.strip()
    is_hex = bool(_HEX.fullmatch(ref))
    if repo is not None:
        sha = _git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
        if sha:
            return sha, ("commit" if is_hex and sha.startswith(ref.lower()) else "branch")
        if not is_hex:
            raise ValueError(f"{what}={ref!r} is not a commit or branch in repo {repo!r}")
    if not is_hex:
        raise ValueError(
            f"{what}={ref!r} is not a commit sha; to use a branch name, pass repo= "
            "(--repo PATH) so that `git rev-parse` can resolve it"
        )
    matches = sorted(c for c in known if c.lower().startswith(ref.lower()))
    if len(matches) > 1:
        raise ValueError(f"{what}={ref!r} is ambiguous: it prefixes {', '.join(matches)}")
    if matches:
        return matches[0], "commit"
    return (ref.lower() if len(ref) == 40 else None), "commit"


def _date_key(records: list[Record]):
    dates = {r.commit: r.date for r in records}
    return lambda c: (dates.get(c, 0), c)


def _last_n(head_sha, n: int, commits_of: dict, records: list[Record], repo) -> dict:
    """The N commits before head that each machine has results for, newest first."""
    if head_sha is None:
        return {m: () for m in commits_of}
    if repo is not None:
        out = _git(repo, "rev-list", "--first-parent", head_sha)
        if out is None:
            raise ValueError(f"head {head_sha} is not in repo {os.fspath(repo)!r}")
        # --first-parent: the mainline, as `asv publish` and `asv find` walk it.
        ancestors = out.split()[1:]
        return {m: tuple([c for c in ancestors if c in cs][:n]) for m, cs in commits_of.items()}
    dates = {r.commit: r.date for r in records}
    if head_sha not in dates:
        return {m: () for m in commits_of}
    head_date = dates[head_sha]
    # Without a repo, asv's stored commit dates give the order; commits dated
    # the same instant as head cannot be ordered against it and are left out.
    return {
        m: tuple(sorted((c for c in cs if dates[c] < head_date), key=dates.get, reverse=True)[:n])
        for m, cs in commits_of.items()
    }


# --- comparing -------------------------------------------------------------------------------


def _index(records: list[Record]) -> dict:
    """(machine, commit) -> {(benchmark, params): Record}; refuses ambiguous envs."""
    index: dict = {}
    for r in records:
        slot = index.setdefault((r.machine, r.commit), {})
        key = (r.benchmark, r.params)
        if key in slot and slot[key].env != r.env:
            raise ValueError(
                f"machine {r.machine!r} has results of commit {r.commit[:8]} in several "
                f"environments ({slot[key].env!r}, {r.env!r}); pass env= (--env) to pick one"
            )
        slot[key] = r
    return index


def _split_name(benchmark: str) -> tuple[str, str]:
    parts = benchmark.split(".")
    return (parts[-2] if len(parts) >= 2 else ""), parts[-1]


def _rows(index, head_sha, base: Baseline, columns, thresholds: Thresholds, mode: str):
    keys: dict = {}
    for m in columns:
        for c in (head_sha, *base.by_machine.get(m, ())):
            for key, rec in index.get((m, c), {}).items():
                keys.setdefault(key, rec.unit)
    rows = []
    for benchmark, params in sorted(keys):
        kernel, metric = _split_name(benchmark)
        pd = dict(params)
        higher = thresholds.higher_is_better(benchmark)
        ratio_thr = thresholds.ratio_for(benchmark)
        cells = {}
        for m in columns:
            head_rec = index.get((m, head_sha), {}).get((benchmark, params))
            base_recs = [
                rec
                for c in base.by_machine.get(m, ())
                if (rec := index.get((m, c), {}).get((benchmark, params))) is not None
            ]
            cells[m] = _cell(
                head_rec,
                base_recs,
                last_n=(mode == "last-n"),
                ratio=ratio_thr,
                higher=higher,
                alpha=thresholds.alpha,
            )
        rows.append(
            Row(
                benchmark=benchmark,
                kernel=kernel,
                metric=metric,
                variant=pd.get("variant"),
                shape=pd.get("shape"),
                params=params,
                unit=keys[(benchmark, params)],
                higher_is_better=higher,
                threshold=ratio_thr,
                cells=cells,
            )
        )
    return rows


def _cell(head_rec, base_recs, *, last_n: bool, ratio: float, higher: bool, alpha: float):
    import numpy as np

    hv = head_rec.value if head_rec is not None else None
    base_ok = [r for r in base_recs if r.value is not None]
    if not last_n:
        base_ok = base_ok[:1]
    bv = None
    if base_ok:
        bv = base_ok[0].value if not last_n else float(np.median([r.value for r in base_ok]))
    if hv is None or bv is None:
        return Cell(None, "insufficient", hv, bv, None, "none")

    r = hv / bv if bv != 0 else (1.0 if hv == 0 else None)
    # Compare multiplicatively so that a zero baseline (e.g. 0 allocations) still works.
    slower = hv > bv * ratio if not higher else hv * ratio < bv
    faster = hv * ratio < bv if not higher else hv > bv * ratio

    if last_n:
        significant, p, test = _significance_last_n(
            head_rec, base_ok, slower, faster, higher, alpha
        )
    else:
        significant, p, test = _significance_commit(head_rec, base_ok[0], alpha)

    if slower and significant:
        flag = "regression"
    elif faster and significant:
        flag = "improvement"
    else:
        flag = "ok"
    return Cell(r, flag, hv, bv, p, test)


def _samples(rec: Record) -> list[float] | None:
    if not rec.samples:
        return None
    s = [x for x in rec.samples if x is not None and not math.isnan(x)]
    return s or None


def _can_reach(m: int, n: int, alpha: float) -> bool:
    """Whether a two-sample rank test on m and n points can give p < alpha at all."""
    from asv._stats import binom

    return m > 0 and n > 0 and 1 / binom(m + n, min(m, n)) < alpha


def _significance_commit(head: Record, base: Record, alpha: float):
    """asv compare's rule (asv.commands.compare._is_result_better), p-value added."""
    from asv import _stats

    hs, bs = head.stats, base.stats
    if not (hs and bs and hs.get("repeat", 0) != 1 and bs.get("repeat", 0) != 1):
        # No statistics (track_* benchmarks, single samples): asv compares by factor only.
        return True, None, "ratio-only"
    a, b = _samples(head), _samples(base)
    if a and b and _can_reach(len(a), len(b), alpha):
        # is_different's own rule for this case (p < threshold), without computing
        # the exact U distribution a second time: it dominates the cost of a report.
        p = float(_stats.mann_whitney_u(a, b)[1])
        return p < alpha, p, "mann-whitney"
    significant = _stats.is_different(a, b, hs, bs, p_threshold=alpha)
    return bool(significant), None, "ci-overlap"


def _significance_last_n(head: Record, base: list[Record], slower, faster, higher, alpha):
    a = _samples(head)
    pooled = [_samples(r) for r in base]
    if a and all(pooled):
        b = [x for s in pooled for x in s]
        if _can_reach(len(a), len(b), alpha):
            from scipy.stats import mannwhitneyu

            p = float(mannwhitneyu(a, b, alternative="two-sided").pvalue)
            return p < alpha, p, "mann-whitney"
    if head.ci_99 is not None and all(r.ci_99 is not None for r in base):
        lo = min(r.ci_99[0] for r in base)
        hi = max(r.ci_99[1] for r in base)
        h_lo, h_hi = head.ci_99
        return (h_lo > hi or h_hi < lo), None, "ci-overlap"
    # Single values per commit (asv track_*): if nothing changed, the head value
    # is beyond all N earlier ones with probability 1/(N+1) in each direction.
    values = [r.value for r in base]
    hv = head.value
    worse_than_all = hv < min(values) if higher else hv > max(values)
    better_than_all = hv > max(values) if higher else hv < min(values)
    return (
        (worse_than_all if slower else better_than_all if faster else False),
        None,
        ("outside-range"),
    )


def _status(rows, columns, *, explicit: bool) -> str:
    flags_by_machine = {m: {r.cells[m].flag for r in rows} for m in columns}
    if any("regression" in f for f in flags_by_machine.values()):
        return "regression"
    comparable = {m for m, f in flags_by_machine.items() if f - {"insufficient"}}
    if not comparable:
        return "insufficient"
    if explicit and comparable != set(columns):
        return "insufficient"  # a GPU asked for by name gave nothing to compare
    return "ok"


def _notes(index, head_label, head_sha, base: Baseline, columns, rows) -> list[str]:
    notes = []
    for m in columns:
        has_head = head_sha is not None and (m, head_sha) in index
        base_commits = [c for c in base.by_machine.get(m, ()) if (m, c) in index]
        if not has_head:
            notes.append(f"{m}: no results for head {head_label[:12]}.")
        if not base_commits:
            what = (
                f"the last {base.ref} commits before head"
                if base.kind == "last-n"
                else f"baseline {base.ref}"
            )
            notes.append(f"{m}: no results for {what}.")
        elif base.kind == "last-n" and len(base_commits) < int(base.ref):
            notes.append(
                f"{m}: only {len(base_commits)} of the last {base.ref} commits have results."
            )
        if has_head and base_commits:
            n_ins = sum(r.cells[m].flag == "insufficient" for r in rows)
            if n_ins:
                notes.append(f"{m}: {n_ins} benchmark(s) without a value on one side.")
    return notes


# --- Markdown ----------------------------------------------------------------------------------

_MARK = {"regression": " ❌", "improvement": " ✅", "ok": "", "insufficient": ""}


def format_value(value: float | None, unit: str) -> str:
    if value is None:
        return "—"
    if unit == "seconds":
        for scale, suffix in ((1e-6, "µs"), (1e-3, "ms"), (1.0, "s")):
            if abs(value) < scale * 1000 or suffix == "s":
                return f"{value / scale:.3g} {suffix}"
    if unit == "%":
        return f"{value:.1f}%"
    if unit == "allocations" or float(value).is_integer():
        return f"{value:g}"
    return f"{value:.4g} {unit}".strip()


def _format_cell(c: Cell) -> str:
    if c.flag == "insufficient":
        return "—"
    if c.ratio is None:
        return f"{c.head:g} vs 0{_MARK[c.flag]}"
    return f"{c.ratio:.3f}{_MARK[c.flag]}"


def _baseline_text(b: Baseline) -> str:
    if b.kind == "last-n":
        return f"the median of the last {b.ref} commits"
    sha = b.commits[0][:8] if b.commits else "?"
    return f"{b.kind} `{b.ref}`" + (f" (`{sha}`)" if b.kind == "branch" else "")


def render_markdown(report: Report) -> str:
    """A PR comment: summary line, regressions, then everything folded away."""
    regs = report.cells("regression")
    imps = report.cells("improvement")
    n_ins = len(report.cells("insufficient"))
    n_ok = len(report.cells("ok"))
    gpus = sorted({m for _, m, _ in regs})
    head = f"`{report.head[:8]}`"
    against = f"{head} vs {_baseline_text(report.baseline)}"
    if report.status == "regression":
        summary = (
            f"**❌ {len(regs)} regression(s) on {', '.join(gpus)}** ({against}); "
            f"{len(imps)} improvement(s), {n_ok} unchanged, {n_ins} without data."
        )
    elif report.status == "insufficient":
        summary = (
            f"**⚠️ Not enough data to decide** ({against}); "
            f"{len(imps)} improvement(s), {n_ok} unchanged, {n_ins} without data."
        )
    else:
        summary = (
            f"**✅ No regressions** ({against}) on {len(report.machines)} GPU(s); "
            f"{len(imps)} improvement(s), {n_ok} unchanged, {n_ins} without data."
        )
    out = [summary, ""]

    def cell_table(title: str, items) -> None:
        out.extend([f"### {title}", ""])
        out.append("| GPU | kernel | metric | variant | shape | base | head | ratio | p |")
        out.append("|---|---|---|---|---|---:|---:|---:|---:|")
        for row, m, c in sorted(items, key=lambda t: (t[1], t[0].benchmark, t[0].params)):
            p = f"{c.p_value:.2g}" if c.p_value is not None else c.test
            out.append(
                f"| {m} | {row.kernel} | {row.metric} | {row.variant or ''} | {row.shape or ''} "
                f"| {format_value(c.base, row.unit)} | {format_value(c.head, row.unit)} "
                f"| {_format_cell(c)} | {p} |"
            )
        out.append("")

    if regs:
        cell_table("Regressions", regs)
    if report.notes:
        out.extend(["### Missing data", ""] + [f"- {n}" for n in report.notes] + [""])
    if imps:
        out.extend(["<details><summary>Improvements</summary>", ""])
        cell_table("Improvements", imps)
        out.extend(["</details>", ""])

    machines = list(report.machines)
    out.extend(
        [
            f"<details><summary>Full table ({len(report.rows)} rows × "
            f"{len(machines)} GPUs)</summary>",
            "",
            "Ratio is head / base; ❌ regression, ✅ improvement, — no data. "
            "For bandwidth percentages higher is better.",
            "",
            "| kernel | metric | variant | shape | " + " | ".join(machines) + " |",
            "|---|---|---|---|" + "---:|" * len(machines),
        ]
    )
    for row in report.rows:
        cells = " | ".join(_format_cell(row.cells[m]) for m in machines)
        out.append(
            f"| {row.kernel} | {row.metric} | {row.variant or ''} | {row.shape or ''} | {cells} |"
        )
    out.extend(["", "</details>", ""])

    if report.problems:
        out.extend(
            [
                f"<details><summary>{len(report.problems)} problem(s) loading results</summary>",
                "",
            ]
            + [f"- **{p.kind}** ({p.machine or 'all'}): {p.message}" for p in report.problems]
            + ["", "</details>", ""]
        )
    return "\n".join(out)
