"""The regression report as Markdown: a PR comment, a job summary, an issue body."""

from __future__ import annotations

import math

from ltx2k.analysis.model import Baseline, Cell, Report, StepInfo
from ltx2k.history.records import QUIET_KINDS

_MARK = {
    "regression": " ❌",
    "improvement": " ✅",
    "suspected": " ❔",
    "ok": "",
    "insufficient": "",
}


def format_value(value: float | None, unit: str, digits: int = 3) -> str:
    """A value in its unit; *digits* significant digits for times (a re-measured pair
    wants one more than a table of cells)."""
    if value is None:
        return "—"
    if unit == "seconds":
        for scale, suffix in ((1e-6, "µs"), (1e-3, "ms"), (1.0, "s")):
            if abs(value) < scale * 1000 or suffix == "s":
                return f"{value / scale:.{digits}g} {suffix}"
    if unit == "%":
        if value != 0 and abs(value) < 0.1:  # the CPU interpreter's shares (~1e-4 %) are not 0
            return f"{value:.2g}%"
        return f"{value:.{max(digits - 2, 1)}f}%"
    if unit == "allocations" or float(value).is_integer():
        return f"{value:g}"
    return f"{value:.4g} {unit}".strip()


def format_cell(c: Cell) -> str:
    """A cell of the full table: its ratio and mark; head against 0 where the base was
    really 0; a dash (and why, where the cell says) where there is no verdict."""
    mark = _MARK.get(c.flag, "")
    if c.flag == "insufficient":
        return f"— ({c.why})" if c.why else "—"
    if c.ratio is not None and math.isfinite(c.ratio):
        return f"{c.ratio:.3f}{mark}"
    if c.base == 0 and c.head is not None and math.isfinite(c.head):
        return f"{c.head:g} vs 0{mark}"
    # A verdict without a ratio: a benchmark that failed at one end (the cell says which).
    return f"— ({c.why}){mark}" if c.why else f"—{mark}"


def format_step(step: StepInfo | None) -> str:
    """`abc12345` for an exact step, `abc12345..def67890 (3 commits)` for a range."""
    if step is None:
        return ""
    if step.exact:
        where = f"`{step.first_bad[:8]}`"
    else:
        where = f"`{step.range[0][:8]}`..`{step.first_bad[:8]}` ({len(step.range)} commits)"
    if step.ratio is None:
        size = "from 0"
    elif step.ci is None:
        size = f"{(step.ratio - 1) * 100:+.1f}%"
    else:
        lo, hi = step.ci
        size = f"{(step.ratio - 1) * 100:+.1f}% [{(lo - 1) * 100:+.1f}, {(hi - 1) * 100:+.1f}]"
    tail = "" if step.persists else ", new level seen once" if step.runs_after < 2 else ", undone"
    return f"{where} {size}{tail}"


def _baseline_text(b: Baseline) -> str:
    if b.kind == "last-n":
        return f"the change points of the last {b.ref} commits"
    sha = b.commits[0][:8] if b.commits else "?"
    return f"{b.kind} `{b.ref}`" + (f" (`{sha}`)" if b.kind == "branch" else "")


def summary_line(report: Report) -> str:
    """The report's first line: its status and how many cells each flag has, measured
    cells only (a cell without a verdict counts as "without data")."""
    n = report.counts()
    gpus = sorted({m for _, m, _ in report.cells("regression")})
    against = f"`{report.head[:8]}` vs {_baseline_text(report.baseline)}"
    counts = (
        f"{n['improvement']} improvement(s), {n['ok']} unchanged, {n['insufficient']} without data."
    )
    if n["suspected"]:
        counts = f"{n['suspected']} suspected, " + counts
    if report.status == "regression":
        return f"**❌ {n['regression']} regression(s) on {', '.join(gpus)}** ({against}); {counts}"
    if report.status == "insufficient":
        return f"**⚠️ Not enough data to decide** ({against}); {counts}"
    return f"**✅ No regressions** ({against}) on {len(report.machines)} GPU(s); {counts}"


def render_markdown(report: Report) -> str:
    """Summary line, regressions, then everything folded away."""
    regs = report.cells("regression")
    imps = report.cells("improvement")
    out = [summary_line(report), ""]
    history = report.baseline.kind == "last-n"

    def cell_table(title: str, items) -> None:
        out.extend([f"### {title}", ""])
        launch = any(row.launch for row, _, _ in items)
        columns = ["GPU", "kernel", "metric", "variant", *(["launch path"] * launch), "shape"]
        numbers = ["base", "head", "ratio", "p"]
        columns += numbers
        if history:
            columns.append("step (first bad, size [95% CI])")
        body = []
        for row, m, c in sorted(items, key=lambda t: (t[1], t[0].benchmark, t[0].params)):
            p = f"{c.p_value:.2g}" if c.p_value is not None else c.test
            body.append(
                [m, row.kernel, row.metric, row.variant or "", *([row.launch or ""] * launch)]
                + [row.shape or "", format_value(c.base, row.unit)]
                + [format_value(c.head, row.unit), format_cell(c), p]
                + ([format_step(c.step)] if history else [])
            )
        out.extend(table(columns, body, numeric=numbers))
        out.append("")

    if regs:
        cell_table("Regressions", regs)
    suspects = report.cells("suspected")
    if suspects:
        cell_table("Suspected (too weak to flag yet; next step: `ltx2k confirm`)", suspects)
        how = "`ltx2k confirm --benchmark NAME --good LAST_GOOD --bad FIRST_BAD --param ...`"
        out.extend([f"Re-measure each on its runner with {how}.", ""])
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
            "Ratio is head / base (with a history: the new level / the old one at the step); "
            "❌ regression, ✅ improvement, — no data. "
            "For bandwidth percentages higher is better.",
            "",
        ]
    )
    launch = any(row.launch for row in report.rows)
    columns = ["kernel", "metric", "variant", *(["launch path"] * launch), "shape"]
    out.extend(
        table(
            columns + machines,
            [
                [row.kernel, row.metric, row.variant or "", *([row.launch or ""] * launch)]
                + [row.shape or ""]
                + [format_cell(row.cells[m]) for m in machines]
                for row in report.rows
            ],
            numeric=machines,
        )
    )
    out.extend(["", "</details>", ""])

    if report.problems:
        summary = "; ".join(problem_lines(report.problems, ""))
        out.extend(
            [f"<details><summary>{summary}</summary>", ""]
            + [f"- **{p.kind}** ({p.machine or 'all'}): {p.message}" for p in report.problems]
            + ["", "</details>", ""]
        )
    return "\n".join(out)


def table(columns: list[str], rows: list[list[str]], numeric=()) -> list[str]:
    """A GitHub Markdown table's lines: one header cell, one separator cell and one cell
    per row for each column, whatever the number of rows or columns (none included).
    The *numeric* columns are right-aligned. ``|`` inside a cell is escaped."""

    def line(cells) -> str:
        return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"

    seps = ["---:" if c in numeric else "---" for c in columns]
    out = [line(columns), "|" + "|".join(seps) + "|"]
    for r in rows:
        if len(r) != len(columns):
            raise ValueError(f"table row has {len(r)} cells for {len(columns)} columns: {r!r}")
        out.append(line(r))
    return out


def problem_lines(problems, where: str) -> list[str]:
    """One line for the results that could not be used, one for the benchmarks skipped.

    A skip (``QUIET_KINDS``: a cell a benchmark declines on purpose, such as warm L2
    beyond twice the L2) is not a problem reading the results, and is not counted as one.
    """
    bad = sum(p.kind not in QUIET_KINDS for p in problems)
    skipped = len(problems) - bad
    lines = []
    if bad:
        lines.append(f"{bad} problem(s) reading the results {where}".rstrip())
    if skipped:
        lines.append(f"{skipped} skipped benchmark group(s) {where}".rstrip())
    return lines
