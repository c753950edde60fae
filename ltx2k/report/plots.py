"""Matplotlib figures for the summary page, one function per plot.

Every function takes history ``Record``s (or a regress ``Report``) and
returns a ``matplotlib.figure.Figure`` built without pyplot, so nothing here
touches global figure state and the Agg canvas is used whatever backend the
caller's matplotlib is configured with. ``save`` writes one to PNG.

Conventions: times are shown in µs (asv stores seconds). Colour means the
variant wherever variants are compared (the eager and torch.compile peers in
black and grey, the Triton variants in distinguishable tab10 colours, never
the flag red), and panels split the GPUs; lines carry their label at their
end, so a figure reads without its legend. Only the cross-GPU view colours
by GPU, since there the GPUs are what is compared.
"""

from __future__ import annotations

import math
import textwrap
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import LogLocator, NullFormatter

from ltx2k import asv_compat, cases
from ltx2k.analysis.model import Report, Row
from ltx2k.variants import BASELINE_VARIANT

# asv class name in benchmarks/bench_kernels.py -> kernel name in ltx2k.cases.
ASV_CLASS_KERNEL = {spec.asv_class: name for name, spec in cases.KERNELS.items()}
KERNEL_VARIANTS = {name: spec.variants for name, spec in cases.KERNELS.items()}
KERNEL_SHAPES = {
    name: tuple(s.label for s in spec.gpu_shapes + spec.cpu_shapes)
    for name, spec in cases.KERNELS.items()
}

DEVICE_COLD = "time_device_cold"
HOST_LATENCY = "time_host_latency"
PCT_COPY_BW = "track_pct_copy_bandwidth"
METRIC_TITLES = {
    "time_device_cold": "device time, cold L2",
    "time_device_warm": "device time, warm L2",
    "time_kernel": "kernel duration",
    "time_host_latency": "host latency",
    "time_host_launch": "host latency per launch path",
    "track_host_calibrated": "host latency, calibrated",
    "track_allocations": "allocations",
    "track_pct_copy_bandwidth": "% of copy bandwidth",
}

FLAG_REGRESSION = "regression"
FLAG_IMPROVEMENT = "improvement"
FLAG_OK = "ok"
FLAG_INSUFFICIENT = "insufficient"
# The verdicts as a reader is told them (the flags stay the JSON's and the CSS's names).
FLAG_WORDS = {
    FLAG_REGRESSION: "regression",
    FLAG_IMPROVEMENT: "improvement",
    FLAG_OK: "no change",
    FLAG_INSUFFICIENT: "not enough history yet",
}

# Colours shared with the HTML table (page.py), so the heatmap and the table agree.
FLAG_COLOURS = {
    FLAG_REGRESSION: "#d62728",
    FLAG_IMPROVEMENT: "#2ca02c",
    FLAG_OK: "#e8e8e8",
    FLAG_INSUFFICIENT: "#f7f7f7",
}
# The PyTorch peers every Triton variant is measured against: neutral colours.
PEER_COLOURS = {"eager": "#222222", "compiled": "#8c8c8c"}
# tab10 without its red (the regression colour) and grey (the peers): eight
# colours a reader tells apart, enough for every Triton variant of a kernel.
VARIANT_PALETTE = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#17becf",
    "#bcbd22",
)
_MACHINE_COLOURS = (
    "#1f77b4",
    "#ff7f0e",
    "#9467bd",
    "#8c564b",
    "#17becf",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
)
# asv's own default for regressions_thresholds: steps smaller than 5% are noise.
_STEP_THRESHOLD = 0.05


# --- record helpers ----------------------------------------------------------


def split_benchmark(name: str) -> tuple[str, str]:
    """``"bench_kernels.SplitRope.time_device_cold"`` -> ``("split_rope", "time_device_cold")``."""
    parts = name.split(".")
    if len(parts) < 2:
        raise ValueError(f"benchmark name must look like module.Class.metric, got {name!r}")
    cls, metric = parts[-2], parts[-1]
    return ASV_CLASS_KERNEL.get(cls, cls), metric


def report_row_kernel_metric(row: Row) -> tuple[str, str]:
    """(kernel, metric) of a regress report row, named as in ltx2k.cases.

    Derived from the benchmark name because the row's ``kernel`` is asv's
    class name ("SplitRope"), while ltx2k.cases speaks "split_rope".
    """
    return split_benchmark(row.benchmark)


def _row_params(row: Row) -> tuple[str, str]:
    return row.variant or "", row.shape or ""


def _param(record, key: str) -> str:
    return dict(record.params).get(key, "")


def _value(record) -> float | None:
    """The record's value in display units (µs for times), None when missing."""
    v = record.value
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    return v * 1e6 if record.unit == "seconds" else v


def _ordered(values: Iterable[str], canonical: Sequence[str]) -> list[str]:
    """Unique values in canonical order; unknown ones after, sorted."""
    present = set(values)
    known = [v for v in canonical if v in present]
    return known + sorted(present - set(known))


def kernels_in(records: Iterable) -> list[str]:
    """Kernels with at least one record, known kernels first."""
    found = {split_benchmark(r.benchmark)[0] for r in records}
    return _ordered(found, list(ASV_CLASS_KERNEL.values()))


def machine_colours(machines: Iterable[str]) -> dict[str, str]:
    return {
        m: _MACHINE_COLOURS[i % len(_MACHINE_COLOURS)] for i, m in enumerate(sorted(set(machines)))
    }


def variant_colours(kernel: str, variants: Iterable[str]) -> dict[str, str]:
    """variant -> colour, stable per kernel: a variant keeps its colour in every figure."""
    known = [v for v in KERNEL_VARIANTS.get(kernel, ()) if v not in PEER_COLOURS]
    extra = sorted(set(variants) - set(known) - set(PEER_COLOURS))
    out = {}
    for i, v in enumerate(known + extra):
        out[v] = VARIANT_PALETTE[i % len(VARIANT_PALETTE)]
    out.update(PEER_COLOURS)
    return {v: out[v] for v in variants}


# Markers in the order of a kernel's variants: two variants whose points coincide
# (one commit so far, or the same time at a shape) still show both shapes.
# Not "v": that is the regression-step marker.
VARIANT_MARKERS = ("o", "s", "D", "^", "P", "X", "<", ">", "h")


def variant_markers(kernel: str, variants: Iterable[str]) -> dict[str, str]:
    """variant -> marker, stable per kernel like :func:`variant_colours`."""
    known = list(KERNEL_VARIANTS.get(kernel, ()))
    order = known + sorted(set(variants) - set(known))
    return {v: VARIANT_MARKERS[order.index(v) % len(VARIANT_MARKERS)] for v in variants}


def _marker_size(i: int, n: int, big: float, small: float) -> float:
    """The i-th of n coinciding markers: the first drawn biggest, so each later (smaller)
    one sits on top of the earlier ones and none hides another."""
    return big if n <= 1 else big - (big - small) * i / (n - 1)


def commit_order(records: Iterable) -> list[str]:
    """Commits of all machines in commit-date order (ties by hash, so it is stable)."""
    dates: dict[str, int] = {}
    for r in records:
        dates[r.commit] = r.date
    return sorted(dates, key=lambda c: (dates[c], c))


def latest_per_machine(records: Iterable) -> dict[str, str]:
    """machine -> its most recent commit (machines need not have run the same commits)."""
    best: dict[str, tuple[int, str]] = {}
    for r in records:
        if r.machine not in best or (r.date, r.commit) > best[r.machine]:
            best[r.machine] = (r.date, r.commit)
    return {m: c for m, (_, c) in best.items()}


def _kernel_records(records: Iterable, kernel: str, metric: str) -> list:
    return [r for r in records if split_benchmark(r.benchmark) == (kernel, metric)]


def _new_figure(width: float, height: float) -> Figure:
    fig = Figure(figsize=(width, height), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _empty(fig: Figure, message: str) -> Figure:
    ax = fig.add_subplot()
    ax.text(0.5, 0.5, message, ha="center", va="center", fontsize=12, color="#555555")
    ax.set_axis_off()
    return fig


def overflow(fig: Figure) -> tuple[float, float, float, float]:
    """How far (inches: left, bottom, right, top) the figure's drawn artists reach
    beyond its canvas; all zeros when nothing is cut off. Matplotlib's own extents
    (``Figure.get_tightbbox``), after a draw, so text is measured as rendered."""
    renderer = fig.canvas.get_renderer()
    fig.draw_without_rendering()
    box = fig.get_tightbbox(renderer)
    w, h = fig.get_size_inches()
    return (max(0.0, -box.x0), max(0.0, -box.y0), max(0.0, box.x1 - w), max(0.0, box.y1 - h))


def fit_to_contents(fig: Figure, tolerance: float = 0.01) -> Figure:
    """Grow the figure until no title, legend or tick label is cut off.

    Constrained layout fits the axes around their labels, but a suptitle or an
    outside legend wider than the figure runs past both edges; a wider canvas
    (and constrained layout again) is the fix that keeps every font size.
    """
    for _ in range(4):
        left, bottom, right, top = overflow(fig)
        if max(left, bottom, right, top) <= tolerance:
            break
        w, h = fig.get_size_inches()
        # Centred artists (suptitle, legend) overflow both sides alike: widen by both.
        fig.set_size_inches(w + 2 * max(left, right) + 0.1, h + bottom + top + 0.1)
    return fig


def save(fig: Figure, path: str | Path) -> Path:
    """Write ``fig`` as PNG (parents created), grown to fit its contents
    (:func:`fit_to_contents`), and return the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fit_to_contents(fig)
    fig.savefig(path, format="png", dpi=fig.dpi)
    return path


# --- 1. regression matrix ----------------------------------------------------


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
        return _empty(_new_figure(6, 2), f"{title}: no rows in the regression report")

    by_panel: dict[tuple[str, str], dict[tuple[str, str], Row]] = defaultdict(dict)
    for row in rows:
        by_panel[report_row_kernel_metric(row)][_row_params(row)] = row
    kernels = _ordered((k for k, _ in by_panel), list(ASV_CLASS_KERNEL.values()))
    metrics = _ordered((m for _, m in by_panel), list(METRIC_TITLES))

    row_keys = {}
    for k in kernels:
        keys = {vs for (kk, _), cells in by_panel.items() if kk == k for vs in cells}
        variants = _ordered((v for v, _ in keys), KERNEL_VARIANTS.get(k, ()))
        labels = _ordered((s for _, s in keys), KERNEL_SHAPES.get(k, ()))
        row_keys[k] = sorted(keys, key=lambda vs: (variants.index(vs[0]), labels.index(vs[1])))

    n_rows_max = max(len(v) for v in row_keys.values())
    height = sum(0.16 * len(row_keys[k]) + 0.9 for k in kernels) + 0.8
    # A panel never gets narrower than its title: with one GPU, 0.55 in per column
    # ran "device time, cold L2" into its neighbour and cut the last title off.
    panel_w = max(0.55 * len(machines), 1.6)
    width = 2.5 + (panel_w + 0.25) * len(metrics)
    fig = _new_figure(max(width, 7.0), max(height, 3.0))
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


# --- 2. history per kernel ---------------------------------------------------


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
                flagged.add((m, *_row_params(row)))
    return flagged


def _label_line_ends(ax, ends: list[tuple[float, str, str]], x: float, *, log: bool) -> None:
    """Write each line's name at its right end, nudged apart so no two overlap.

    ``ends`` are (y, text, colour). Positions are spread in the axis' own
    scale (log or linear) by at least 1/14 of its height.
    """
    if not ends:
        return
    tf = (lambda v: math.log10(v)) if log else (lambda v: v)
    inv = (lambda v: 10**v) if log else (lambda v: v)
    lo, hi = (tf(v) for v in ax.get_ylim())
    gap = (hi - lo) / 14
    items = sorted(ends, key=lambda e: e[0])
    # More labels than fit at that spacing: closer, but still one slot each.
    gap = min(gap, (hi - lo) / (len(items) + 0.5))
    placed: list[float] = []
    for y, _, _ in items:
        p = max(tf(y), lo + gap / 2)
        placed.append(p if not placed else max(p, placed[-1] + gap))
    over = placed[-1] - (hi - gap / 2)
    if over > 0:  # push the whole stack down, keeping its spacing
        placed = [p - over for p in placed]
    for p, (_, text, colour) in zip(placed, items, strict=True):
        ax.text(x, inv(p), text, color=colour, fontsize=7, va="center", ha="left", clip_on=True)


# The log axes' major ticks (:func:`_log_axis`): 1, 2 and 5 times each power of ten.
_LOG_SUBS = (1.0, 2.0, 5.0)


def _log_axis(ax, fmt=lambda y, _: f"{y:g}") -> None:
    ax.set_yscale("log")
    # Plain numbers at 1-2-5 steps: "2 × 10^1 µs" makes readers do arithmetic.
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=_LOG_SUBS))
    ax.yaxis.set_major_formatter(fmt)
    ax.yaxis.set_minor_formatter(NullFormatter())


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
        for s in _LOG_SUBS
    ]
    # Room for the markers: a value on a tick (20.0 µs) sat on the panel's edge, half cut.
    below = max(t for t in ladder if t <= lo / _EDGE_ROOM)
    above = min(t for t in ladder if t >= hi * _EDGE_ROOM and t > below)
    ax.set_ylim(below, above)


# The least ratio between a panel's limit and the data nearest it: 0.04 decade, a
# marker's radius on a one-decade panel.
_EDGE_ROOM = 1.1


def _tidy(ax) -> None:
    ax.grid(True, which="major", color="#dddddd", lw=0.6)
    ax.tick_params(labelsize=7)
    for spine in ("top", "right"):
        ax.spines[spine].set_visible(False)


def history(
    records: Sequence,
    kernel: str,
    *,
    metric: str = DEVICE_COLD,
    report: Report | None = None,
    last: int | None = None,
) -> Figure:
    """One metric of one kernel over commits: a panel per shape (rows) x GPU (columns).

    Colour is the variant, labelled at the line's end; log y in µs. A series
    with a single commit is drawn as a large dot. Red triangles mark
    asv-detected regression steps, red rings the cells the regress report
    flags at its head commit. ``last`` keeps the last N commits.
    """
    if last is not None and last < 1:
        raise ValueError(f"last must be a positive number of commits, got {last!r}")
    recs = _kernel_records(records, kernel, metric)
    commits = commit_order(recs)
    if last is not None:
        commits = commits[-last:]
    title = METRIC_TITLES.get(metric, metric)
    if not commits:
        return _empty(_new_figure(8, 2), f"{kernel}: no history of {title}")
    index = {c: i for i, c in enumerate(commits)}
    recs = [r for r in recs if r.commit in index]
    labels = _ordered((_param(r, "shape") for r in recs), KERNEL_SHAPES.get(kernel, ()))
    variants = _ordered((_param(r, "variant") for r in recs), KERNEL_VARIANTS.get(kernel, ()))
    machines = sorted({r.machine for r in recs})
    colours = variant_colours(kernel, variants)
    markers = variant_markers(kernel, variants)
    head = report.head if report is not None else None
    flagged = _head_flags(report, kernel, metric)
    n = len(commits)
    label_room = max(2.0, 0.45 * n)  # x units right of the last commit for line labels

    series: dict[tuple[str, str, str], list[float | None]] = defaultdict(lambda: [None] * n)
    for r in recs:
        series[(r.machine, _param(r, "shape"), _param(r, "variant"))][index[r.commit]] = _value(r)

    fig = _new_figure(max(4.6 * len(machines), 6.5), 2.1 * len(labels) + 1.3)
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
                size = _marker_size(k, len(variants), 9, 4) if single else 3.5
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
            _log_axis(ax)
            _tidy(ax)
            ax.set_xlim(-0.5, n - 1 + label_room)
            if ends:
                _limits_on_ticks(ax)
                _label_line_ends(ax, ends, n - 1 + 0.3, log=True)
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


# --- 3. speedup over the baseline variant ------------------------------------


def _latest_values(
    records: Sequence, kernel: str, metric: str
) -> dict[tuple[str, str, str], float]:
    """(machine, variant, shape) -> value at that machine's latest commit."""
    recs = _kernel_records(records, kernel, metric)
    latest = latest_per_machine(recs)
    out = {}
    for r in recs:
        v = _value(r)
        if r.commit == latest[r.machine] and v is not None:
            out[(r.machine, _param(r, "variant"), _param(r, "shape"))] = v
    return out


def _grouped_bars(ax, labels, variants, heights, colours, *, bottom=0.0):
    """Bars grouped by shape label, one bar per variant in its colour; missing values left out.

    Bars span ``bottom`` -> value, so a speedup bar grows up or down from 1x.
    """
    width = 0.8 / max(len(variants), 1)
    for k, v in enumerate(variants):
        xs = [i + (k - (len(variants) - 1) / 2) * width for i in range(len(labels))]
        hs = [heights.get((v, s)) for s in labels]
        pts = [(x, h) for x, h in zip(xs, hs, strict=True) if h is not None]
        if pts:
            ax.bar(
                [x for x, _ in pts],
                [h - bottom for _, h in pts],
                width * 0.92,
                bottom=bottom,
                color=colours[v],
                edgecolor="white",
                lw=0.4,
                label=v,
            )
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, rotation=35, ha="right", fontsize=7, family="monospace")
    for spine in ("top", "right"):
        ax.spines[spine].set_visible(False)


def _variant_legend(fig, variants, colours, ncols=None, markers=None) -> None:
    """The figure's variant key: colour patches, or lines with *markers* where the
    plot tells variants apart by marker too."""
    if markers is None:
        handles = [Patch(facecolor=colours[v], label=v) for v in variants]
    else:
        handles = [
            Line2D([], [], color=colours[v], marker=markers[v], ms=6, label=v) for v in variants
        ]
    fig.legend(
        handles=handles,
        loc="outside lower center",
        ncols=ncols or min(len(variants), 8),
        fontsize=9,
        frameon=False,
    )


def speedup(records: Sequence, kernel: str, *, metric: str = DEVICE_COLD) -> Figure:
    """Speedup of each variant over ``BASELINE_VARIANT[kernel]`` per shape, one panel per GPU.

    Speedup = baseline time / variant time at each machine's latest commit
    (bars above the 1x line are faster than the baseline), log2 y axis.
    """
    baseline = BASELINE_VARIANT.get(kernel)
    if baseline is None:
        raise ValueError(f"kernel has no BASELINE_VARIANT in ltx2k.variants, got {kernel!r}")
    values = _latest_values(records, kernel, metric)
    machines = sorted({m for m, _, _ in values})
    if not machines:
        return _empty(_new_figure(8, 2), f"{kernel}: no {metric} results")
    latest = latest_per_machine(_kernel_records(records, kernel, metric))
    fig = _new_figure(max(4.6 * len(machines), 7), 4.4)
    axes = fig.subplots(1, len(machines), squeeze=False, sharey=True)[0]
    all_variants = _ordered((v for _, v, _ in values), KERNEL_VARIANTS.get(kernel, ()))
    others = [v for v in all_variants if v != baseline]
    colours = variant_colours(kernel, all_variants)
    for ax, m in zip(axes, machines, strict=True):
        labels = _ordered((s for mm, _, s in values if mm == m), KERNEL_SHAPES.get(kernel, ()))
        ratios = {}
        for v in others:
            for s in labels:
                b, t = values.get((m, baseline, s)), values.get((m, v, s))
                if b and t:
                    ratios[(v, s)] = b / t
        _grouped_bars(ax, labels, others, ratios, colours, bottom=1.0)
        ax.axhline(1.0, color="#333333", lw=1)
        ax.set_yscale("log", base=2)
        ax.yaxis.set_major_formatter(lambda y, _: f"{y:g}×")
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.grid(True, axis="y", color="#dddddd", lw=0.6)
        ax.set_title(f"{m} @ {latest[m][:8]}", fontsize=10)
        if not ratios:
            ax.text(0.5, 0.5, f"no {baseline} baseline", transform=ax.transAxes, ha="center")
    # Keep a labelled power of two on each side of 1x, or a one-sided axis reads as "all faster".
    lo, hi = axes[0].get_ylim()
    axes[0].set_ylim(min(lo, 0.45), max(hi, 2.2))
    axes[0].set_ylabel(f"speedup over {baseline} (×)")
    _variant_legend(fig, others, colours, ncols=min(len(others), 4 * len(machines), 8))
    fig.suptitle(
        f"{kernel}: speedup over {baseline}, {METRIC_TITLES.get(metric, metric)}"
        " (higher is better)",
        fontsize=11,
    )
    return fig


# --- 4. % of measured copy bandwidth, the roofline, the cross-GPU view -------


def copy_bandwidth(records: Sequence, kernel: str) -> Figure:
    """Achieved bandwidth as % of the GPU's measured copy bandwidth, per shape and variant.

    The dashed 100% line is the roofline for a memory-bound kernel: a bar
    near it leaves little to gain; far below it, launch or latency bound.
    """
    values = _latest_values(records, kernel, PCT_COPY_BW)
    machines = sorted({m for m, _, _ in values})
    if not machines:
        return _empty(_new_figure(8, 2), f"{kernel}: no {PCT_COPY_BW} results")
    latest = latest_per_machine(_kernel_records(records, kernel, PCT_COPY_BW))
    variants = _ordered((v for _, v, _ in values), KERNEL_VARIANTS.get(kernel, ()))
    colours = variant_colours(kernel, variants)
    top = max(110.0, 1.08 * max(values.values()))
    fig = _new_figure(max(4.6 * len(machines), 7), 4.4)
    axes = fig.subplots(1, len(machines), squeeze=False, sharey=True)[0]
    for ax, m in zip(axes, machines, strict=True):
        labels = _ordered((s for mm, _, s in values if mm == m), KERNEL_SHAPES.get(kernel, ()))
        heights = {(v, s): val for (mm, v, s), val in values.items() if mm == m}
        _grouped_bars(ax, labels, variants, heights, colours)
        ax.axhline(100.0, color="#333333", lw=1, ls="--")
        ax.set_ylim(0, top)
        ax.grid(True, axis="y", color="#dddddd", lw=0.6)
        ax.set_title(f"{m} @ {latest[m][:8]}", fontsize=10)
    axes[0].set_ylabel("% of measured copy bandwidth")
    _variant_legend(fig, variants, colours)
    fig.suptitle(
        f"{kernel}: achieved bandwidth vs measured copy bandwidth (100% = roofline)", fontsize=11
    )
    return fig


def bytes_moved(kernel: str, shape: str) -> int | None:
    """The minimum bytes one call moves (ltx2k.cases), None for an unknown kernel or shape."""
    spec = cases.KERNELS.get(kernel)
    if spec is None:
        return None
    try:
        return spec.bytes_moved(cases.find_shape(kernel, shape))
    except ValueError:
        return None


def copy_ceilings(records: Sequence, kernel: str) -> dict[str, float]:
    """machine -> its measured copy bandwidth (bytes/s), recovered from the results.

    ``track_pct_copy_bandwidth`` is bytes / cold time as a % of the runner's
    measured copy bandwidth, so each (cold time, %) pair of a cell gives the
    ceiling back; the median over the cells of the machine's latest commit
    is its value. Machines without both metrics are left out.
    """
    cold = _latest_values(records, kernel, DEVICE_COLD)
    pct = _latest_values(records, kernel, PCT_COPY_BW)
    found: dict[str, list[float]] = defaultdict(list)
    for (m, v, s), t_us in cold.items():
        p, nbytes = pct.get((m, v, s)), bytes_moved(kernel, s)
        if p and nbytes and t_us > 0:
            found[m].append(nbytes / (t_us * 1e-6) / (p / 100.0))
    return {m: sorted(xs)[len(xs) // 2] for m, xs in found.items()}


def roofline(records: Sequence, kernel: str) -> Figure:
    """Achieved GB/s against bytes moved per call, one panel per GPU, with its copy ceiling.

    Each point is a variant (colour) at one shape, at the GPU's latest
    commit: bytes moved / cold device time. The dashed line is the GPU's
    measured copy bandwidth (:func:`copy_ceilings`); small shapes sit far
    below it (launch-bound), large ones should approach it.
    """
    cold = _latest_values(records, kernel, DEVICE_COLD)
    points: dict[str, list[tuple[str, str, float, float]]] = defaultdict(list)
    for (m, v, s), t_us in cold.items():
        nbytes = bytes_moved(kernel, s)
        if nbytes and t_us > 0:
            points[m].append((v, s, float(nbytes), nbytes / (t_us * 1e-6) / 1e9))
    machines = sorted(points)
    if not machines:
        return _empty(_new_figure(8, 2), f"{kernel}: no {DEVICE_COLD} results of known shapes")
    ceilings = copy_ceilings(records, kernel)
    latest = latest_per_machine(_kernel_records(records, kernel, DEVICE_COLD))
    variants = _ordered(
        (v for pts in points.values() for v, *_ in pts), KERNEL_VARIANTS.get(kernel, ())
    )
    colours = variant_colours(kernel, variants)
    markers = variant_markers(kernel, variants)
    fig = _new_figure(max(4.6 * len(machines), 7), 4.6)
    axes = fig.subplots(1, len(machines), squeeze=False, sharey=True)[0]
    for ax, m in zip(axes, machines, strict=True):
        for k, v in enumerate(variants):
            pts = [(x, y) for vv, _, x, y in points[m] if vv == v]
            if pts:
                pts.sort()
                ax.plot(
                    [x for x, _ in pts],
                    [y for _, y in pts],
                    "-",
                    color=colours[v],
                    marker=markers[v],
                    ms=_marker_size(k, len(variants), 8, 3.5),
                    mec="white",
                    mew=0.5,
                    lw=1,
                    label=v,
                    zorder=2 + k / len(variants),
                )
        ax.set_xscale("log")
        _log_axis(ax)
        _tidy(ax)
        if m in ceilings:
            gbs = ceilings[m] / 1e9
            ax.axhline(gbs, color="#333333", ls="--", lw=1)
            ax.text(
                0.02,
                gbs,
                f" measured copy: {gbs:,.0f} GB/s",
                transform=ax.get_yaxis_transform(),
                va="bottom",
                fontsize=7,
                color="#333333",
            )
        ax.set_title(f"{m} @ {latest[m][:8]}", fontsize=10)
        ax.set_xlabel("bytes moved per call", fontsize=8)
    axes[0].set_ylabel("achieved GB/s (cold L2)")
    _variant_legend(fig, variants, colours, markers=markers)
    fig.suptitle(f"{kernel}: roofline, achieved bandwidth vs bytes moved", fontsize=11)
    return fig


def cross_gpu(records: Sequence, kernel: str, variant: str, *, last: int | None = None) -> Figure:
    """One variant's achieved bandwidth over commits on every GPU, as % of that GPU's ceiling.

    Normalising each GPU to its own measured copy bandwidth puts GPUs of
    different speeds on one scale, so a step on one GPU alone stands out
    from lines that otherwise move together. One panel per shape, one line
    per GPU (colour, labelled at its end).
    """
    recs = [
        r for r in _kernel_records(records, kernel, DEVICE_COLD) if _param(r, "variant") == variant
    ]
    commits = commit_order(recs)
    if last is not None:
        commits = commits[-last:]
    ceilings = copy_ceilings(records, kernel)
    if not commits or not ceilings:
        return _empty(
            _new_figure(8, 2), f"{kernel} {variant}: no bandwidth ceiling to normalise by"
        )
    index = {c: i for i, c in enumerate(commits)}
    n = len(commits)
    labels = _ordered((_param(r, "shape") for r in recs), KERNEL_SHAPES.get(kernel, ()))
    machines = sorted({r.machine for r in recs} & set(ceilings))
    colours = machine_colours(machines)
    series: dict[tuple[str, str], list[float | None]] = defaultdict(lambda: [None] * n)
    for r in recs:
        t, nbytes = _value(r), bytes_moved(kernel, _param(r, "shape"))
        if r.commit in index and r.machine in ceilings and t and nbytes:
            achieved = nbytes / (t * 1e-6)
            series[(r.machine, _param(r, "shape"))][index[r.commit]] = (
                100 * achieved / ceilings[r.machine]
            )
    cols = min(3, len(labels))
    rows = math.ceil(len(labels) / cols)
    fig = _new_figure(4.6 * cols, 2.6 * rows + 1.0)
    axes = fig.subplots(rows, cols, squeeze=False, sharex=True)
    for k, label in enumerate(labels):
        ax = axes[k // cols][k % cols]
        ends = []
        for m in machines:
            ys = series.get((m, label))
            if not ys:
                continue
            xs = [x for x, y in enumerate(ys) if y is not None]
            if xs:
                ax.plot(
                    xs,
                    [ys[x] for x in xs],
                    "-o",
                    color=colours[m],
                    lw=1.4,
                    ms=7 if len(xs) == 1 else 2.5,
                )
                ends.append((ys[xs[-1]], m, colours[m]))
        _tidy(ax)
        ax.set_xlim(-0.5, n - 1 + max(2.0, 0.45 * n))
        if ends:
            lo, hi = ax.get_ylim()
            ax.set_ylim(min(lo, 0), max(hi, 105))
            _label_line_ends(ax, ends, n - 1 + 0.3, log=False)
        ax.set_title(label, fontsize=9)
        ax.set_ylabel("% of the GPU's copy BW", fontsize=8)
    for k in range(len(labels), rows * cols):
        axes[k // cols][k % cols].set_axis_off()
    for ax in axes[-1]:
        ax.set_xticks(range(n))
        ax.set_xticklabels([c[:8] for c in commits], rotation=90, fontsize=6, family="monospace")
    fig.suptitle(
        f"{kernel} {variant}: each GPU against its own copy bandwidth (higher is better)",
        fontsize=11,
    )
    return fig


def detection_power(reports: Sequence[tuple[str, object]]) -> Figure:
    """Detection rate against injected slowdown (ltx2k.analysis.detection_power), one line per
    threshold setting; the 0% point is the false-flag rate of the A/A pair."""
    if not reports:
        return _empty(_new_figure(6.4, 3.6), "no detection-power data")
    fig = _new_figure(6.4, 3.6)
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
