"""Per-GPU regression flags: every machine at once, against a commit or along its history.

Each machine x benchmark x parameter combination becomes one cell, in one
of two modes:

- **history** (``last=N``): the cell's series over the last N commits that
  GPU measured, then head (:mod:`ltx2k.history.series`), goes to the
  change-point detector (:mod:`ltx2k.analysis.changepoint`) with the noise
  pooled over that GPU's cells of the same metric. The latest step it
  reports decides the flag when its first bad commit is among the last
  ``recent`` runs: a step at HEAD or one to four commits before it is a
  regression (or improvement) now; older ones are listed as context. The
  step names its last good and first bad commit (a range where commits in
  between have no data), its size with a 95% interval and whether it
  persists.
- **commit** (``baseline=SHA``): head against one commit with asv's own
  test (:func:`ltx2k.analysis.significance.commit_vs_commit`), what
  ``asv compare`` and ``asv continuous`` apply. Used by the PR gate and by
  ``ltx2k confirm``.

Either way a flag needs both significance and a practical minimum size,
the benchmark's threshold ratio (:mod:`ltx2k.analysis.thresholds`;
direction-aware, because percent-of-bandwidth is higher-is-better). Cells
without enough data are ``insufficient``. A step seen on one run only, not
far enough outside the noise to flag (:data:`changepoint.SUSPECT_ALPHA`),
is ``suspected``: the report names ``ltx2k confirm`` as the next step.

A metric computed from another metric's measurement of the same cell
(:attr:`ltx2k.workload.metrics.Metric.derived_from`: % of copy bandwidth from the
cold time's median) gets one verdict with it: its cell takes the source
cell's flag and step, keeping its own values, so one kernel run is never a
regression in one table and "ok" in the other. It does so only where it has
values of its own at head and at base (and, for a step, on both sides of it): a run
that timed the source alone (``asv run -b time_device_cold``) leaves the derived
cell "insufficient", saying what is missing (``Cell.why``), and it is not counted.

No ratio is infinite or NaN: a level of 0 (an allocation count that appears) has
no ratio (``None``); the cell shows its head against 0.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Iterable, Sequence
from dataclasses import replace

from ltx2k.analysis import changepoint
from ltx2k.analysis.model import (
    EXIT_INSUFFICIENT,
    EXIT_OK,
    EXIT_REGRESSION,
    FLAGS,
    Baseline,
    Cell,
    Report,
    Row,
    StepInfo,
    finite,
)
from ltx2k.analysis.significance import commit_vs_commit
from ltx2k.analysis.thresholds import Thresholds
from ltx2k.history import commits as git_commits
from ltx2k.history import series as hseries
from ltx2k.history.records import Problem, Record, load_results
from ltx2k.history.window import Window
from ltx2k.workload import metrics

__all__ = [
    "EXIT_INSUFFICIENT",
    "EXIT_OK",
    "EXIT_REGRESSION",
    "FLAGS",
    "Baseline",
    "Cell",
    "Report",
    "Row",
    "StepInfo",
    "check_head",
    "compare",
    "problem_notices",
    "regress",
    "triage",
]

# The history window: enough runs for the series' own noise estimate to be
# worth about as much as the GPU's pooled one (see changepoint.PRIOR_WEIGHT).
DEFAULT_LAST = 20


def regress(results_dir, head: str, **kwargs) -> Report:
    """Load *results_dir* (the window :func:`compare` judges) and :func:`compare`.
    Load problems travel in the report."""
    records, problems = load_results(results_dir, select=_window(head, **kwargs))
    return compare(records, head, problems=problems, **kwargs)


def _window(head, *, baseline=None, last=None, repo=None, env=None, **_) -> Window | None:
    """The commits :func:`compare` will read; None (load everything) for arguments it
    refuses, so that its own error message is the one raised."""
    try:
        return Window(head, last=last, baseline=baseline, repo=repo, env=env)
    except ValueError:
        return None


# Benchmarks a run skipped, failed or timed out are routine (variants timed for some
# metrics only): counted in one line, listed in the report; any other load problem
# (a broken file) gets a line of its own, since it means data is missing.
ROUTINE_PROBLEMS = ("skipped", "failed", "timeout")


def problem_notices(problems: Iterable[Problem], *, in_report: bool = True) -> list[str]:
    """What ``ltx2k regress`` says about load problems on stderr, one line each
    (*in_report*: the report lists the routine ones)."""
    problems = list(problems)
    lines = [f"{p.kind}: {p.message}" for p in problems if p.kind not in ROUTINE_PROBLEMS]
    n_routine = sum(p.kind in ROUTINE_PROBLEMS for p in problems)
    if n_routine:
        lines.append(
            f"{n_routine} benchmark(s) with skipped or failed parameter combinations"
            + (" (listed at the end of the report)" if in_report else "")
        )
    return lines


def check_head(
    records: Iterable[Record | str], head: str, results_dir, repo=None, flag: str = "--head"
) -> None:
    """ValueError when *head* is a short ref that no result starts with and no repo resolves.

    *records*: the results, or the commits they are of (a :class:`Window`'s ``commits``).
    *flag* names the ref in the message: ``--baseline`` is held to the same rule.

    A full sha with no results is a commit not measured yet (the report says
    "not enough data", exit 3); anything shorter cannot be told from a typo.
    With *repo*, a branch name is valid, so nothing is refused here.
    """
    records = {r if isinstance(r, str) else r.commit for r in records}
    known = any(c.startswith(head.strip().lower()) for c in records)
    if repo is None and records and not known and len(head.strip()) != 40:
        raise ValueError(
            f"{flag} {head!r}: no result in --results {os.fspath(results_dir)!r} is of that "
            "commit; pass the full sha, or --repo PATH for a branch name"
        )
    # With a repository, git knows every commit: one it does not know is a typo or a
    # commit of another repository, never "not measured yet".
    if (
        repo is not None
        and not known
        and head.strip()
        and git_commits.git(repo, "rev-parse", "--verify", "--quiet", f"{head.strip()}^{{commit}}")
        is None
    ):
        raise ValueError(
            f"{flag} {head!r} is not a commit or branch in --repo {os.fspath(repo)!r}, and "
            f"no result in --results {os.fspath(results_dir)!r} is of it"
        )


def triage(
    results_dir,
    head: str,
    *,
    baseline: str | None = None,
    last: int | None = None,
    recent: int | None = None,
    repo=None,
    machines: Sequence[str] | None = None,
    thresholds: Thresholds | str | os.PathLike | None = None,
    env: str | None = None,
    log=None,
) -> Report:
    """``ltx2k regress``: load *results_dir*, report its problems, refuse a *head* that
    looks like a typo (:func:`check_head`), and :func:`compare`.

    Problem lines go to *log* (default stderr) before any error, so a broken file
    is named even when the run stops. ``recent=None`` is the detector's default.
    The flags and the exit status are the report's (``Report.exit_code``).
    """
    log = sys.stderr if log is None else log
    if not os.path.isdir(results_dir):
        raise ValueError(f"--results {os.fspath(results_dir)!r} is not a directory of asv results")
    # Before the head is looked up in it: a folder git does not know would make any
    # head "not a commit of --repo".
    git_commits.check_repo(repo)
    window = _window(head, baseline=baseline, last=last, repo=repo, env=env)
    try:
        records, problems = load_results(results_dir, select=window)
    except ValueError:
        # head or baseline refused while choosing the window: the full load and
        # compare() name the problem files first, then raise the same error
        window = None
        records, problems = load_results(results_dir)
    for line in problem_notices(problems):
        print(f"ltx2k regress: {line}", file=log)
    known = window.commits if window is not None else records
    check_head(known, head, results_dir, repo)
    if baseline is not None:
        # A mistyped baseline would otherwise be "not enough data" (exit 3), which a PR
        # gate passes.
        check_head(known, baseline, results_dir, repo, flag="--baseline")
    return compare(
        records,
        head,
        problems=problems,
        baseline=baseline,
        last=last,
        recent=changepoint.RECENT if recent is None else recent,
        repo=repo,
        machines=machines,
        thresholds=thresholds,
        env=env,
    )


def compare(
    records: Iterable[Record],
    head: str,
    *,
    baseline: str | None = None,
    last: int | None = None,
    recent: int = changepoint.RECENT,
    repo=None,
    machines: Sequence[str] | None = None,
    thresholds: Thresholds | str | os.PathLike | None = None,
    env: str | None = None,
    problems: Iterable[Problem] = (),
) -> Report:
    """Compare *head* with *baseline* (a commit or, with *repo*, a branch), or judge
    the last *last* commits' history up to head for steps, per machine."""
    if (baseline is None) == (last is None):
        raise ValueError(
            "pass exactly one of --baseline (a commit or branch) or --last (N commits); "
            f"got baseline={baseline!r}, last={last!r}"
        )
    for name, value, low in (("--last", last, 2), ("--recent", recent, 1)):
        if value is None and name == "--last":
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{name} must be a whole number >= {low}, got {value!r}")
    git_commits.check_repo(repo)
    if machines is not None:
        machines = list(machines)
        bad = [m for m in machines if not isinstance(m, str) or not m]
        if not machines or bad:
            raise ValueError(f"--machine must name machines, got {machines!r}")
    if thresholds is None:
        thresholds = Thresholds()
    elif not isinstance(thresholds, Thresholds):
        thresholds = Thresholds.load(thresholds)
    problems = tuple(problems)

    env_notes = []
    if env is not None:
        # --env picks among the environments of the machines that ran it; a machine
        # that never did is judged on its own (one runner's env name says nothing of
        # another's), and the report says so.
        records = list(records)
        ran = {r.machine for r in records if r.env == env}
        if records and not ran:
            held = sorted({r.env for r in records})
            raise ValueError(
                f"--env {env!r}: no results in that environment; the results hold {held}"
            )
        others = sorted({r.machine for r in records} - ran)
        records = [r for r in records if r.machine not in ran or r.env == env]
        for m in others:
            envs = ", ".join(sorted({repr(r.env) for r in records if r.machine == m}))
            env_notes.append((m, f"{m}: no results in environment {env!r}; judged in {envs}."))
    index = hseries.index_records(records)
    dates = {r.commit: r.date for r in records}
    head_sha, _ = git_commits.resolve(head, dates, repo, "--head")
    head_label = head_sha or head

    all_machines = sorted({r.machine for r in records} | {p.machine for p in problems if p.machine})
    columns = tuple(machines) if machines is not None else tuple(all_machines)
    problems = tuple(p for p in problems if p.machine is None or p.machine in columns)

    order_note = None
    if baseline is not None:
        base_sha, kind = git_commits.resolve(baseline, dates, repo, "--baseline")
        if base_sha is not None and base_sha == head_sha:
            raise ValueError(
                f"--baseline {baseline!r} is --head {head!r} itself ({head_sha[:12]}): a commit "
                "compared with itself says nothing; name the commit or branch before it"
            )
        if git_commits.is_before(head_sha, base_sha, repo, dates):
            order_note = (
                f"--head {head_sha[:12]} comes before --baseline {base_sha[:12]} in history "
                f"({'git' if repo is not None else 'the dates asv stores'}): each change is "
                "judged as going from the newer commit back to the older one; were they swapped?"
            )
        by_machine = {m: (base_sha,) if base_sha else () for m in columns}
        base = Baseline(kind, baseline, (base_sha,) if base_sha else (), by_machine)
        rows = _rows_vs_commit(index, head_sha, base_sha, columns, thresholds)
    else:
        order = git_commits.mainline(head_sha, repo, dates) if head_sha else []
        by_machine = {
            m: tuple(reversed(hseries.machine_commits(index, m, order, head_sha, last)[:-1]))
            if head_sha
            else ()
            for m in columns
        }
        union = sorted(
            {c for cs in by_machine.values() for c in cs}, key=lambda c: (dates.get(c, 0), c)
        )
        base = Baseline("last-n", str(last), tuple(reversed(union)), by_machine)
        rows = _rows_history(index, head_sha, order, by_machine, columns, thresholds, recent)
    notes = _notes(index, head_label, head_sha, base, columns, rows, set(all_machines))
    if order_note:
        notes.insert(0, order_note)
    notes += [f"{n}." for n in thresholds.unused(baseline is None, (r.benchmark for r in rows))]
    notes += [note for m, note in env_notes if m in columns]
    if baseline is None and repo is None:
        window = {c for cs in by_machine.values() for c in cs} | ({head_sha} if head_sha else set())
        n_tied = len(window) - len({dates[c] for c in window if c in dates})
        notes.append(
            "Commits ordered by the dates asv stores (author dates; pass --repo PATH for "
            "git's order): a rebase-merged or cherry-picked commit keeps an older date and "
            "is placed before commits it follows"
            + (f"; {n_tied} commit(s) of this window share a date with another." if n_tied else ".")
        )
    if baseline is None and repo is None and head_sha in dates:
        tied = sum(1 for c, d in dates.items() if d == dates[head_sha] and c != head_sha)
        if tied:
            notes.append(
                f"{tied} commit(s) share head's commit date and cannot be ordered against it "
                "without git: pass --repo PATH to use them."
            )
    status = _status(rows, columns, explicit=machines is not None)
    broken = _broken_head_files(problems, head_sha, columns)
    for m, files in sorted(broken.items()):
        notes.append(
            f"{m}: head's results file {', '.join(sorted(files))} is broken "
            f"({'; '.join(sorted({k for ks in files.values() for k in ks}))}): what it "
            "measured cannot all be read, so no verdict says the head is fine."
        )
    if broken and status == "ok":
        status = "insufficient"
    return Report(head_label, base, status, columns, tuple(rows), problems, tuple(notes))


# Load problems that mean a result file lost data it holds (not a benchmark the run did not
# measure): on head's own file, "ok" would judge a head whose measurements were not read.
# A file of another machine under head's name ("machine-mismatch") is ignored: whatever
# this machine measured at head was overwritten by it or never arrived.
BROKEN_FILE_PROBLEMS = frozenset(
    ("corrupt", "truncated", "unreadable", "not-a-file", "too-large", "bad-value",
     "wrong-version", "no-results", "commit-mismatch", "machine-mismatch")
)  # fmt: skip


def _broken_head_files(problems, head_sha, columns) -> dict[str, dict[str, set[str]]]:
    """machine -> {head result file name -> problem kinds} of :data:`BROKEN_FILE_PROBLEMS`.
    asv names a result file ``<commit[:8]>-<env>.json``: the name says whose it is even
    where its contents cannot be read."""
    if not head_sha:
        return {}
    out: dict[str, dict[str, set[str]]] = {}
    for p in problems:
        name = os.path.basename(p.path)
        if (
            p.kind in BROKEN_FILE_PROBLEMS
            and p.machine in columns
            and name.startswith(head_sha[:8] + "-")
        ):
            out.setdefault(p.machine, {}).setdefault(name, set()).add(p.kind)
    return out


# --- rows ----------------------------------------------------------------------------------


def _split_name(benchmark: str) -> tuple[str, str]:
    parts = benchmark.split(".")
    return (parts[-2] if len(parts) >= 2 else ""), parts[-1]


def _keys(index, machine_commits: dict) -> dict:
    keys: dict = {}
    for m, commits in machine_commits.items():
        for c in commits:
            for key, rec in index.get((m, c), {}).items():
                keys.setdefault(key, rec.unit)
    return keys


def _row(key, unit, thresholds: Thresholds, cells: dict, threshold: float) -> Row:
    benchmark, params = key
    kernel, metric = _split_name(benchmark)
    pd = dict(params)
    return Row(
        benchmark=benchmark,
        kernel=kernel,
        metric=metric,
        variant=pd.get("variant"),
        shape=pd.get("shape"),
        params=params,
        unit=unit,
        higher_is_better=thresholds.higher_is_better(benchmark),
        threshold=threshold,
        cells=cells,
    )


def _worse_better(new: float, old: float, ratio: float, higher: bool) -> tuple[bool, bool]:
    # Multiplicative, so that a zero baseline (e.g. 0 allocations) still works.
    if higher:
        return new * ratio < old, new > old * ratio
    return new > old * ratio, new * ratio < old


def _rows_vs_commit(index, head_sha, base_sha, columns, thresholds: Thresholds) -> list[Row]:
    keys = _keys(index, {m: (head_sha, base_sha) for m in columns})
    rows = []
    for key in sorted(keys):
        benchmark = key[0]
        ratio_thr = thresholds.ratio_for(benchmark)
        higher = thresholds.higher_is_better(benchmark)
        cells = {}
        for m in columns:
            h = index.get((m, head_sha), {}).get(key)
            b = index.get((m, base_sha), {}).get(key)
            hv = h.value if h is not None else None
            bv = b.value if b is not None else None
            gpu = h.gpu_uuid if h is not None else None
            # Other code measured at each end: asv compare's "not comparable", first.
            differ = _versions_differ(h, b) if h is not None and b is not None else None
            if not differ and hv is None and bv is not None and _failed(h):
                # asv compare's "introduced a failure", which it counts as worse (asv
                # continuous fails): the commit broke what the base could measure.
                why = f"{_failed(h)} at head, measured at base"
                cells[m] = Cell(None, "regression", None, bv, None, "none", gpu_uuid=gpu, why=why)
                continue
            if not differ and bv is None and hv is not None and _failed(b):
                # asv compare's "fixed a failure", counted as better.
                why = f"{_failed(b)} at base, measured at head"
                cells[m] = Cell(None, "improvement", hv, None, None, "none", gpu_uuid=gpu, why=why)
                continue
            if hv is None or bv is None or differ:
                why = (
                    _unmeasured(h, "head")
                    if hv is None
                    else _unmeasured(b, "base")
                    if bv is None
                    else differ
                )
                cells[m] = Cell(None, "insufficient", hv, bv, None, "none", gpu_uuid=gpu, why=why)
                continue
            r = hv / bv if bv != 0 else (1.0 if hv == 0 else None)
            worse, better = _worse_better(hv, bv, ratio_thr, higher)
            significant, p, test = commit_vs_commit(h, b, thresholds.alpha)
            flag = (
                "regression"
                if worse and significant
                else "improvement"
                if better and significant
                else "ok"
            )
            cells[m] = Cell(r, flag, hv, bv, p, test, gpu_uuid=gpu)
        rows.append(_row(key, keys[key], thresholds, cells, ratio_thr))
    return _share_verdicts(rows, columns, None)


def _failure_verdict(cell: Cell) -> bool:
    """Whether *cell*'s verdict is that its benchmark failed at head or at base."""
    return cell.test == "none" and cell.flag in ("regression", "improvement")


def _failed(rec: Record | None) -> str | None:
    """Why *rec* has no value, in a word: "failed" or "timed out" where asv stored null
    (the benchmark raised, the commit did not build, or it ran past its timeout); None
    where it has a value, was skipped (NaN: not selected by ``--bench``, or not
    applicable) or has no result."""
    if rec is None or rec.value is not None:
        return None
    return {"failed": "failed", "timeout": "timed out"}.get(rec.missing or "")


def _unmeasured(rec: Record | None, where: str) -> str:
    return f"{_failed(rec) or 'not measured'} at {where}"


def _versions_differ(head: Record, base: Record) -> str | None:
    """Why *head* and *base* are not comparable: results of two versions of the benchmark
    (a version asv does not store matches any, as in ``asv compare``); None if they are."""
    a, b = base.bench_version, head.bench_version
    if hseries.same_version(a, b):
        return None
    return f"benchmark code changed between base and head (asv version {a[:8]} to {b[:8]})"


def _rows_history(index, head_sha, order, by_machine, columns, thresholds, recent) -> list[Row]:
    commits_of = {m: (*reversed(by_machine[m]), head_sha) for m in columns if head_sha}
    keys = _keys(index, commits_of)
    pos = {c: i for i, c in enumerate(order)}
    series = {
        (m, key): hseries.build(index, m, commits_of[m], key) for m in commits_of for key in keys
    }
    # One prior per GPU and metric: the cells of one benchmark method on one GPU
    # share its clocks, its host and its driver, so they share most of their noise.
    priors = {}
    for m in commits_of:
        by_metric: dict = {}
        for key in keys:
            by_metric.setdefault(key[0], []).append(series[(m, key)].values)
        for benchmark, values in by_metric.items():
            priors[(m, benchmark)] = changepoint.pooled_noise(values)
    rows = []
    for key in sorted(keys):
        cells = {}
        for m in columns:
            s = series.get((m, key))
            if s is None:
                cells[m] = Cell(None, "insufficient", None, None, None, "none", why="no results")
                continue
            cell = _history_cell(s, priors[(m, key[0])], thresholds, pos, order, recent)
            head = s.points[-1].record
            cells[m] = replace(cell, gpu_uuid=head.gpu_uuid if head is not None else None)
        rows.append(_row(key, keys[key], thresholds, cells, thresholds.step_for(key[0])))
    return _share_verdicts(rows, columns, series)


def _source_key(row: Row) -> tuple | None:
    metric = metrics.METRICS.get(row.metric)
    if metric is None or metric.derived_from is None:
        return None
    prefix = row.benchmark.rpartition(".")[0]
    name = f"{prefix}.{metric.derived_from}" if prefix else metric.derived_from
    return name, row.params


def _share_verdicts(rows: list[Row], columns, series) -> list[Row]:
    """Derived metrics' cells with their source cell's verdict (see the module docstring)."""
    by_key = {(r.benchmark, r.params): r for r in rows}
    out = []
    for row in rows:
        src = by_key.get(_source_key(row)) if _source_key(row) else None
        if src is None:
            out.append(row)
            continue
        cells = dict(row.cells)
        for m in columns:
            mine, theirs = cells.get(m), src.cells.get(m)
            if mine is None or theirs is None:
                continue
            own = series.get((m, (row.benchmark, row.params))) if series else None
            cells[m] = _derived_cell(mine, theirs, own, src.benchmark)
        out.append(replace(row, cells=cells))
    return out


def _not_judged(mine: Cell, source: str, why: str) -> Cell:
    """A derived cell without the values of its own that its source's verdict needs."""
    return replace(
        mine, flag="insufficient", p_value=None, test="none", step=None, verdict_of=source, why=why
    )


def _derived_cell(mine: Cell, src: Cell, own: hseries.Series | None, source: str) -> Cell:
    """The derived cell *mine* with the verdict of its source cell *src*, where *mine* has
    values of its own to carry it (the module docstring)."""
    import numpy as np

    if _failure_verdict(mine):
        # Its own benchmark failed at one end: a verdict of its own, where it has no value
        # to carry its source's.
        return replace(mine, verdict_of=source)
    if mine.head is None:
        return _not_judged(mine, source, mine.why or "not measured at head")
    if _failure_verdict(src):
        # The source failed where this cell has values: no step of the source to carry.
        return _not_judged(mine, source, f"{source.rpartition('.')[2]} {src.why}")
    if src.flag == "insufficient":
        return _not_judged(mine, source, src.why or "its source cell has no verdict")
    if own is None or src.step is None:
        if mine.base is None:
            return _not_judged(mine, source, "not measured at base")
        if own is None and mine.flag == "insufficient":
            # Head against base: its own values are not comparable (other benchmark code
            # at each end), so no ratio of theirs can carry a verdict.
            return _not_judged(mine, source, mine.why or "its own values are not comparable")
        return replace(
            mine, flag=src.flag, p_value=src.p_value, test=src.test, verdict_of=source, why=None
        )
    values, commits = own.values, own.commits

    def level(lo: int, hi: int) -> float | None:
        vs = [v for v in values[lo:hi] if v is not None]
        return float(np.median(vs)) if vs else None

    def mapped(st: StepInfo, start: int) -> StepInfo | None:
        if st.ratio is None or st.ci is None:
            return None
        if st.last_good not in commits or st.first_bad not in commits:
            return None
        good, bad = commits.index(st.last_good), commits.index(st.first_bad)
        before, after = level(start, good + 1), level(bad, len(values))
        if not before or after is None:
            return None
        r = after / before
        # The derived value is a monotone function of the source's (here 1 / time), so
        # the source's relative uncertainty carries over, flipped if they move apart.
        lo, hi = st.ci
        if (r > 1) == (st.ratio > 1):
            ci = (r * lo / st.ratio, r * hi / st.ratio)
        else:
            ci = (r * st.ratio / hi, r * st.ratio / lo)
        return replace(st, ratio=r, ci=ci)

    starts = [0] + [commits.index(e.first_bad) for e in src.earlier if e.first_bad in commits]
    step = mapped(src.step, starts[-1])
    if step is None:
        # No values of its own on one side of the source's step: the step is not its.
        return _not_judged(mine, source, "not measured on both sides of the step")
    base = level(starts[-1], commits.index(src.step.last_good) + 1)
    head = mine.head
    earlier = tuple(
        e for e in (mapped(e, s) for e, s in zip(src.earlier, starts, strict=False)) if e
    )
    return Cell(
        finite(head / base) if base else None,
        src.flag,
        head,
        base,
        src.p_value,
        src.test,
        step,
        earlier,
        mine.noise,
        mine.gpu_uuid,
        source,
    )


def _step_info(s: hseries.Series, st: changepoint.Step, order, pos, kind: str) -> StepInfo:
    good, bad = s.points[st.last_good_index].commit, s.points[st.index].commit
    if good in pos and bad in pos:
        rng = tuple(order[pos[good] + 1 : pos[bad] + 1])
    else:
        rng = tuple(s.commits[st.last_good_index + 1 : st.index + 1])
    ratio = finite(st.ratio)
    ci = st.ci if ratio is not None and all(finite(x) is not None for x in st.ci) else None
    return StepInfo(good, bad, rng, ratio, ci, st.p_value, st.persists, st.runs_after, kind)


def _new_failure(s: hseries.Series, recent: int) -> Cell | None:
    """A regression where head failed (asv stored null) and the cell had a value before the
    failures began, among the *recent* newest runs: the commit broke what the GPU could
    measure, which asv compare counts as worse. A failure that began earlier was judged
    when it was head, and one with no value before it never worked in the window: both
    are left to the caller ("insufficient", saying it failed). Runs without a result or
    skipped (not selected) in between neither start nor end the failure."""
    word = _failed(s.points[-1].record)
    if word is None:
        return None
    first = None  # the oldest failed run after the last value
    for i in range(len(s.points) - 1, -1, -1):
        p = s.points[i]
        if p.value is not None:
            if first is None or first < len(s.points) - recent:
                return None
            since = "at head" if first == len(s.points) - 1 else f"since {s.commits[first][:8]}"
            why = f"{word} {since}, measured at {p.commit[:8]}"
            return Cell(None, "regression", None, p.value, None, "none", why=why)
        if p.status == hseries.FAILED and _failed(p.record):
            first = i
    return None


def _history_cell(s: hseries.Series, prior, thresholds: Thresholds, pos, order, recent) -> Cell:
    import numpy as np

    head = s.points[-1].value
    earlier = [v for v in s.values[:-1] if v is not None]
    broken = _new_failure(s, recent)
    if broken is not None:
        return broken
    if head is None or len(earlier) < 2:
        base = float(np.median(earlier)) if earlier else None
        r = head / base if head is not None and base else None
        changed = hseries.other_version(s)
        why = (
            _unmeasured(s.points[-1].record, "head")
            if head is None
            else f"{len(earlier)} earlier run(s) of head's benchmark code (its asv version "
            f"changed after {changed[:8]}); a history needs 2"
            if changed
            else f"{len(earlier)} earlier run(s); a history needs 2"
        )
        return Cell(r, "insufficient", head, base, None, "none", why=why)
    higher = thresholds.higher_is_better(s.benchmark)
    det = changepoint.detect(
        s.values,
        samples=s.samples,
        prior=prior,
        min_effect=thresholds.step_for(s.benchmark) - 1.0,
        alpha=thresholds.history_alpha,
    )
    noise = det.noise.sigma if math.isfinite(det.noise.sigma) else None
    # Every reported step is at least the minimum step; only its sign is left to read.
    steps = [
        _step_info(s, st, order, pos, "regression" if (st.ratio > 1) != higher else "improvement")
        for st in det.steps
    ]
    latest = det.steps[-1] if det.steps else None
    if latest is not None and latest.index >= len(s.points) - recent:
        before = [v for v in s.values[: latest.index] if v is not None][-latest.runs_before :]
        return Cell(
            finite(latest.ratio),
            steps[-1].direction,
            head,
            float(np.median(before)),
            latest.p_value,
            "change-point",
            steps[-1],
            tuple(steps[:-1]),
            noise,
        )
    sus = det.suspect
    if sus is not None and sus.index >= len(s.points) - recent:
        since = [v for v in s.values[: sus.index] if v is not None][-sus.runs_before :]
        worse = (sus.ratio > 1) != higher
        base = float(np.median(since))
        return Cell(
            finite(sus.ratio if sus.runs_after == 1 else head / base if base else None),
            "suspected",
            head,
            float(np.median(since)),
            sus.p_value,
            "change-point",
            _step_info(s, sus, order, pos, "regression" if worse else "improvement"),
            tuple(steps),
            noise,
        )
    # No recent step: head against the level since the last step (or the window).
    start = latest.index if latest is not None else 0
    level = [v for v in s.values[start:-1] if v is not None] or earlier
    base = float(np.median(level))
    r = head / base if base else (1.0 if head == 0 else None)
    return Cell(r, "ok", head, base, None, "change-point", None, tuple(steps), noise)


# --- status and notes ----------------------------------------------------------------------


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


def _notes(index, head_label, head_sha, base: Baseline, columns, rows, known=None) -> list[str]:
    """One line per machine that has nothing to compare, saying why; *known* (the
    machines the results hold) is listed for a machine asked for that they lack."""
    notes = []
    for m in columns:
        if known is not None and m not in known:
            have = ", ".join(sorted(known)) or "none"
            notes.append(f"{m}: no results of this machine at all; the results hold: {have}.")
            continue
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
        elif base.kind == "last-n" and len(base_commits) < 2:
            notes.append(
                f"{m}: only {len(base_commits)} commit before head has results; "
                "a history needs at least 2 to learn its noise."
            )
        elif base.kind == "last-n" and len(base_commits) < int(base.ref):
            notes.append(
                f"{m}: only {len(base_commits)} of the last {base.ref} commits have results."
            )
        if has_head:
            at_head = index[(m, head_sha)].values()
            if not any(r.value is not None for r in at_head) and any(_failed(r) for r in at_head):
                # One cause, not N regressions: read asv's output for that commit.
                notes.append(
                    f"{m}: every benchmark failed at head {head_label[:12]} ({len(at_head)} "
                    "cells): the commit most likely did not build or import; asv's output "
                    "for it says why."
                )
        if has_head and base_commits:
            n_ins = sum(r.cells[m].flag == "insufficient" for r in rows)
            if n_ins:
                notes.append(f"{m}: {n_ins} benchmark(s) without enough data.")
    return notes
