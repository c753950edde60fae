"""Figures of regress's verdicts: the regression matrix of one report, and the detection
power of its thresholds against injected slowdowns."""

from __future__ import annotations

import math
import textwrap
from collections import defaultdict
from collections.abc import Sequence

from matplotlib.figure import Figure
from matplotlib.patches import Patch

from ltx2k.analysis.model import Report, Row
from ltx2k.report.plots.data import (
    ASV_CLASS_KERNEL,
    KERNEL_SHAPES,
    KERNEL_VARIANTS,
    METRIC_TITLES,
    ordered,
    report_row_kernel_metric,
    row_params,
)
from ltx2k.report.plots.style import (
    FLAG_COLOURS,
    FLAG_IMPROVEMENT,
    FLAG_INSUFFICIENT,
    FLAG_OK,
    FLAG_REGRESSION,
    empty,
    new_figure,
)


def _cell_colour(flag: str, ratio) -> tuple[float, float, float, float]:
    """Flag gives the hue; |log2 ratio| the strength, saturating at 2x."""
    from matplotlib.colors import to_rgba

    r, g, b, _ = to_rgba(FLAG_COLOURS.get(flag, FLAG_COLOURS[FLAG_INSUFFICIENT]))
    if flag not in (FLAG_REGRESSION, FLAG_IMPROVEMENT):
        return r, g, b, 1.0
    strength = 1.0
    if isinstance(ratio, (int, float)) and ratio > 0 and math.isfinite(ratio):
        strength = min(abs(math.log2(ratio)), 1.0)
    alpha = 0.35 + 0.65 * strength  # a flagged cell is never so pale it reads as "ok"
    return r, g, b, alpha


def _flag_ratio(row: Row | None, machine: str) -> tuple[str, float | None]:
    cell = row.cells.get(machine) if row is not None else None
    return (cell.flag, cell.ratio) if cell is not None else (FLAG_INSUFFICIENT, None)


def _report_title(report: Report) -> str:
    """What the report judged: head against one commit, or head along its history."""
    head, base = report.head[:8], report.baseline
    if base.kind == "last-n":
        return f"head {head}, steps over the last {base.ref} commits"
    return f"head {head} vs {base.kind} {base.ref[:12]}"


def regression_heatmap(report: Report) -> Figure:
    """The regress report's flags as a matrix: one panel per kernel x metric.

    Rows are variant x shape, columns machines. Cells are red for a
    ``regression`` flag and green for an ``improvement``, the stronger the
    larger the ratio; grey is ``ok``, white ``insufficient`` or missing. The
    number in a cell is the cell's ratio: head/base against a commit, the
    new level / the old one at the step along a history.
    """
    rows = report.rows
    machines = list(report.machines)
    for row in rows:
        for m in row.cells:
            if m not in machines:
                machines.append(m)
    title = _report_title(report)
    if not rows or not machines:
        return empty(new_figure(6, 2), f"{title}: no rows in the regression report")

    by_panel: dict[tuple[str, str], dict[tuple[str, str], Row]] = defaultdict(dict)
    for row in rows:
        by_panel[report_row_kernel_metric(row)][row_params(row)] = row
    kernels = ordered((k for k, _ in by_panel), list(ASV_CLASS_KERNEL.values()))
    metrics = ordered((m for _, m in by_panel), list(METRIC_TITLES))

    row_keys = {}
    for k in kernels:
        keys = {vs for (kk, _), cells in by_panel.items() if kk == k for vs in cells}
        variants = ordered((v for v, _ in keys), KERNEL_VARIANTS.get(k, ()))
        labels = ordered((s for _, s in keys), KERNEL_SHAPES.get(k, ()))
        row_keys[k] = sorted(keys, key=lambda vs: (variants.index(vs[0]), labels.index(vs[1])))

    n_rows_max = max(len(v) for v in row_keys.values())
    height = sum(0.16 * len(row_keys[k]) + 0.9 for k in kernels) + 0.8
    # A panel never gets narrower than its title: with one GPU, 0.55 in per column
    # ran "device time, cold L2" into its neighbour and cut the last title off.
    panel_w = max(0.55 * len(machines), 1.6)
    width = 2.5 + (panel_w + 0.25) * len(metrics)
    fig = new_figure(max(width, 7.0), max(height, 3.0))
    heights = [len(row_keys[k]) for k in kernels]
    axes = fig.subplots(
        len(kernels), len(metrics), squeeze=False, gridspec_kw={"height_ratios": heights}
    )
    wrap = max(12, int(panel_w * 10))
    fontsize = 6 if n_rows_max > 12 else 8
    for i, k in enumerate(kernels):
        keys = row_keys[k]
        for j, metric in enumerate(metrics):
            ax = axes[i][j]
            panel = by_panel.get((k, metric), {})
            grid = [[_flag_ratio(panel.get(vs), m) for m in machines] for vs in keys]
            image = [[_cell_colour(flag, ratio) for flag, ratio in line] for line in grid]
            ax.imshow(image, aspect="auto", interpolation="nearest")
            # Numbers only where a reader must act (flagged) or cannot trust
            # the colour (no verdict): 200 cells of "1.00" would hide the signal.
            for y, line in enumerate(grid):
                for x, (flag, ratio) in enumerate(line):
                    if flag == FLAG_OK:
                        continue
                    finite = isinstance(ratio, (int, float)) and math.isfinite(ratio)
                    text = f"{ratio:.2f}" if finite and flag != FLAG_INSUFFICIENT else "–"
                    colour = "#999999" if flag == FLAG_INSUFFICIENT else "black"
                    ax.text(x, y, text, ha="center", va="center", fontsize=fontsize, color=colour)
            ax.set_xticks(range(len(machines)))
            ax.set_xticklabels(
                machines if i == len(kernels) - 1 else [],
                rotation=45,
                ha="right",
                fontsize=fontsize + 1,
            )
            ax.set_yticks(range(len(keys)))
            # Padded monospace labels read as two aligned columns (variant, shape).
            wv, ws = max(len(v) for v, _ in keys), max(len(s) for _, s in keys)
            ax.set_yticklabels(
                [f"{v:<{wv}}  {s:<{ws}}" for v, s in keys] if j == 0 else [],
                fontsize=fontsize,
                family="monospace",
            )
            ax.set_xticks([x - 0.5 for x in range(1, len(machines))], minor=True)
            ax.set_yticks([y - 0.5 for y in range(1, len(keys))], minor=True)
            ax.grid(which="minor", color="white", linewidth=0.8)
            ax.tick_params(which="both", length=0)
            for spine in ax.spines.values():
                spine.set_visible(False)
            panel_title = "\n".join(textwrap.wrap(METRIC_TITLES.get(metric, metric), wrap))
            ax.set_title(f"{k}\n{panel_title}", fontsize=fontsize + 2)
    what = "step ratio" if report.baseline.kind == "last-n" else "head/base ratio"
    fig.suptitle(f"Regression matrix: {title} (cell = {what})", fontsize=11)
    fig.legend(
        handles=[
            Patch(facecolor=FLAG_COLOURS[f], edgecolor="#999999", label=f)
            for f in (FLAG_REGRESSION, FLAG_IMPROVEMENT, FLAG_OK, FLAG_INSUFFICIENT)
        ],
        loc="outside lower center",
        ncols=4,
        fontsize=9,
        frameon=False,
    )
    return fig


def detection_power(reports: Sequence[tuple[str, object]]) -> Figure:
    """Detection rate against injected slowdown (ltx2k.analysis.detection_power), one line per
    threshold setting; the 0% point is the false-flag rate of the A/A pair."""
    if not reports:
        return empty(new_figure(6.4, 3.6), "no detection-power data")
    fig = new_figure(6.4, 3.6)
    ax = fig.add_subplot(1, 1, 1)
    for label, rep in reports:
        xs = [0.0] + [p.delta * 100 for p in rep.points]
        ys = [len(rep.false_flags) / max(1, len(rep.benchmarks)) * 100] + [
            p.rate * 100 for p in rep.points
        ]
        ax.plot(xs, ys, marker="o", label=f"{label} ({len(rep.false_flags)} false flags at 0%)")
    ax.set_xlabel("injected slowdown (%)")
    ax.set_ylabel("cells flagged (%)")
    ax.set_ylim(-3, 103)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    rep = reports[0][1]
    ax.set_title(
        f"ltx2k regress detection power, {rep.machine} ({len(rep.benchmarks)} device-time cells)",
        fontsize=10,
    )
    return fig
