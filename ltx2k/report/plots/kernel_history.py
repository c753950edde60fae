"""The history figure: one metric of one kernel over commits, a panel per shape and GPU,
with asv's regression steps and the report's flags marked."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence

from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from ltx2k.analysis.model import Report
from ltx2k.report.plots.data import (
    DEVICE_COLD,
    KERNEL_SHAPES,
    KERNEL_VARIANTS,
    METRIC_TITLES,
    commit_order,
    current_version,
    display_value,
    kernel_records,
    ordered,
    param,
    report_row_kernel_metric,
    row_params,
)
from ltx2k.report.plots.style import (
    FLAG_COLOURS,
    FLAG_REGRESSION,
    LOG_SUBS,
    empty,
    label_line_ends,
    log_axis,
    marker_size,
    new_figure,
    tidy,
    variant_colours,
    variant_markers,
)
from ltx2k.runner import asv_compat

# asv's own default for regressions_thresholds: steps smaller than 5% are noise.
_STEP_THRESHOLD = 0.05


def _regression_steps(values: Sequence[float | None]) -> list[int]:
    """Indices where asv's step detector sees an upward (slower) step.

    The same detector (and asv's default 5% threshold) as asv's own
    regressions page, so the summary and the dashboard never disagree.
    """
    if sum(v is not None for v in values) < 3:
        return []
    return [after for _, after, _, _ in asv_compat.regression_positions(values, _STEP_THRESHOLD)]


def _head_flags(report: Report | None, kernel: str, metric: str) -> set[tuple[str, str, str]]:
    """(machine, variant, shape) flagged as a regression at the report's head."""
    flagged = set()
    for row in report.rows if report is not None else ():
        if report_row_kernel_metric(row) != (kernel, metric):
            continue
        for m, cell in row.cells.items():
            if cell.flag == FLAG_REGRESSION:
                flagged.add((m, *row_params(row)))
    return flagged


def _limits_on_ticks(ax) -> None:
    """y limits on the 1-2-5 ticks just below and above the data, so that every panel
    labels its top and its bottom (a limit between ticks leaves the highest values
    without a number). Over less than a decade LogLocator's own ``tick_values`` falls
    back to linear steps, so the ladder is built from the same subs here."""
    lo, hi = ax.dataLim.intervaly
    if not (math.isfinite(lo) and math.isfinite(hi)) or lo <= 0:
        return
    ladder = [
        s * 10.0**e
        for e in range(math.floor(math.log10(lo)) - 1, math.ceil(math.log10(hi)) + 1)
        for s in LOG_SUBS
    ]
    # Room for the markers: a value on a tick (20.0 µs) sat on the panel's edge, half cut.
    below = max(t for t in ladder if t <= lo / _EDGE_ROOM)
    above = min(t for t in ladder if t >= hi * _EDGE_ROOM and t > below)
    ax.set_ylim(below, above)


# The least ratio between a panel's limit and the data nearest it: 0.04 decade, a
# marker's radius on a one-decade panel.
_EDGE_ROOM = 1.1


def history(
    records: Sequence,
    kernel: str,
    *,
    metric: str = DEVICE_COLD,
    report: Report | None = None,
    last: int | None = None,
    order: Sequence[str] | None = None,
) -> Figure:
    """One metric of one kernel over commits: a panel per shape (rows) x GPU (columns).

    Colour is the variant, labelled at the line's end; log y in µs. A series
    with a single commit is drawn as a large dot. Red triangles mark
    asv-detected regression steps, red rings the cells the regress report
    flags at its head commit. ``last`` keeps the last N commits. A line draws one
    version of the benchmark's code, its newest run's (:func:`current_version`): a
    change of code is no step.
    """
    if last is not None and last < 1:
        raise ValueError(f"last must be a positive number of commits, got {last!r}")
    recs = kernel_records(records, kernel, metric)
    commits = commit_order(recs, order)
    if last is not None:
        commits = commits[-last:]
    title = METRIC_TITLES.get(metric, metric)
    if not commits:
        return empty(new_figure(8, 2), f"{kernel}: no history of {title}")
    index = {c: i for i, c in enumerate(commits)}
    drawn = [r for r in current_version(recs, order) if r.commit in index]
    recs = [r for r in recs if r.commit in index]
    kept = {id(r) for r in drawn}
    older = any(id(r) not in kept and display_value(r) is not None for r in recs)
    labels = ordered((param(r, "shape") for r in recs), KERNEL_SHAPES.get(kernel, ()))
    variants = ordered((param(r, "variant") for r in recs), KERNEL_VARIANTS.get(kernel, ()))
    machines = sorted({r.machine for r in recs})
    colours = variant_colours(kernel, variants)
    markers = variant_markers(kernel, variants)
    head = report.head if report is not None else None
    flagged = _head_flags(report, kernel, metric)
    n = len(commits)
    label_room = max(2.0, 0.45 * n)  # x units right of the last commit for line labels

    series: dict[tuple[str, str, str], list[float | None]] = defaultdict(lambda: [None] * n)
    for r in drawn:
        series[(r.machine, param(r, "shape"), param(r, "variant"))][index[r.commit]] = (
            display_value(r)
        )

    fig = new_figure(max(4.6 * len(machines), 6.5), 2.1 * len(labels) + 1.3)
    axes = fig.subplots(len(labels), len(machines), squeeze=False, sharex=True)
    for j, machine in enumerate(machines):
        for i, label in enumerate(labels):
            ax = axes[i][j]
            ends = []
            for k, v in enumerate(variants):
                ys = series.get((machine, label, v))
                if ys is None:
                    continue
                xs = [x for x, y in enumerate(ys) if y is not None]
                if not xs:
                    continue
                vals = [ys[x] for x in xs]
                single = len(xs) == 1
                size = marker_size(k, len(variants), 9, 4) if single else 3.5
                ax.plot(
                    xs,
                    vals,
                    "-",
                    color=colours[v],
                    lw=1.4,
                    marker=markers[v],
                    ms=size,
                    mec="white" if single else colours[v],
                    mew=0.6,
                    zorder=2 + k / len(variants),
                )
                ends.append((vals[-1], v, colours[v]))
                steps = [x for x in _regression_steps(ys) if ys[x] is not None]
                ax.plot(
                    steps, [ys[x] for x in steps], "v", color=FLAG_COLOURS[FLAG_REGRESSION], ms=7
                )
                if head in index and (machine, v, label) in flagged and ys[index[head]]:
                    ax.plot(
                        [index[head]],
                        [ys[index[head]]],
                        "o",
                        ms=11,
                        mfc="none",
                        mec=FLAG_COLOURS[FLAG_REGRESSION],
                        mew=1.8,
                    )
            log_axis(ax)
            tidy(ax)
            ax.set_xlim(-0.5, n - 1 + label_room)
            if ends:
                _limits_on_ticks(ax)
                label_line_ends(ax, ends, n - 1 + 0.3, log=True)
            else:
                ax.text(
                    0.5,
                    0.5,
                    "no results",
                    transform=ax.transAxes,
                    ha="center",
                    color="#777777",
                    fontsize=8,
                )
            ax.set_title(f"{machine} · {label}", fontsize=9)
            if j == 0:
                ax.set_ylabel("µs" if metric.startswith("time_") else "", fontsize=8)
    for ax in axes[-1]:
        ax.set_xticks(range(n))
        ax.set_xticklabels([c[:8] for c in commits], rotation=90, fontsize=6, family="monospace")
        ax.set_xlabel("commit (oldest → newest)", fontsize=8)
    handles = [
        Line2D([], [], color=colours[v], lw=2, marker=markers[v], ms=5, label=v) for v in variants
    ]
    handles += [
        Line2D(
            [],
            [],
            ls="",
            marker="v",
            color=FLAG_COLOURS[FLAG_REGRESSION],
            label="asv regression step",
        ),
        Line2D(
            [],
            [],
            ls="",
            marker="o",
            mfc="none",
            mec=FLAG_COLOURS[FLAG_REGRESSION],
            ms=9,
            label="flagged at head",
        ),
    ]
    if older:
        handles.append(Line2D([], [], ls="", label="older benchmark version not drawn"))
    fig.legend(
        handles=handles,
        loc="outside lower center",
        ncols=min(len(handles), 6),
        fontsize=8,
        frameon=False,
    )
    one = " (one commit so far: each series is a single dot)" if n == 1 else ""
    fig.suptitle(f"{kernel}: {title} per GPU and shape, lower is better{one}", fontsize=12)
    return fig
