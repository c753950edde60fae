"""Each kernel against its baseline, its peers and its hardware: speedup and % of copy
bandwidth per GPU, the roofline, and every GPU against its own copy ceiling."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence

from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import NullFormatter

from ltx2k.report.plots.data import (
    DEVICE_COLD,
    KERNEL_SHAPES,
    KERNEL_VARIANTS,
    METRIC_TITLES,
    PCT_COPY_BW,
    benchmark_key,
    commit_order,
    current_version,
    display_value,
    kernel_records,
    latest_per_machine,
    ordered,
    param,
)
from ltx2k.report.plots.style import (
    empty,
    label_line_ends,
    log_axis,
    machine_colours,
    marker_size,
    new_figure,
    tidy,
    variant_colours,
    variant_markers,
)
from ltx2k.workload import cases
from ltx2k.workload.variants import BASELINE_VARIANT, UPSTREAM_CURRENT_VARIANT


def _latest_values(
    records: Sequence, kernel: str, metric: str, order: Sequence[str] | None = None
) -> tuple[dict[tuple[str, str, str], float], dict[str, str], set[str]]:
    """(machine, variant, shape) -> value at that machine's latest commit (in
    :func:`~ltx2k.report.plots.data.commit_order` with *order*) of the benchmark's
    current version; machine -> that commit; the machines whose newest results, of
    an older version, are not drawn.

    The current version is that of the benchmark's newest result on any machine
    (:func:`~ltx2k.report.plots.data.current_version` by benchmark): panels side by side
    compare GPUs only where they ran the same code, as asv publish draws one version of a
    benchmark on every machine.
    """
    recs = kernel_records(records, kernel, metric)
    drawn = current_version(recs, order, key=benchmark_key)
    latest = latest_per_machine(drawn, order)
    older = {m for m, c in latest_per_machine(recs, order).items() if latest.get(m) != c}
    out = {}
    for r in drawn:
        v = display_value(r)
        if r.commit == latest[r.machine] and v is not None:
            out[(r.machine, param(r, "variant"), param(r, "shape"))] = v
    return out, latest, older


def _older_note(machines) -> str:
    """The figure title's note on GPUs whose newest results measured older code."""
    if not machines:
        return ""
    return f"\n(older benchmark version not drawn: {', '.join(sorted(machines))})"


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


def speedup_baselines(kernel: str) -> dict[str, str]:
    """The variants *kernel*'s speedups are shown over, each with what it is: sglang's
    original kernel (``BASELINE_VARIANT``) and its current design
    (``UPSTREAM_CURRENT_VARIANT``), one entry where the two are one variant."""
    out: dict[str, str] = {}
    for table, what in ((BASELINE_VARIANT, "original"), (UPSTREAM_CURRENT_VARIANT, "current")):
        variant = table.get(kernel)
        if variant is not None:
            out[variant] = f"{out[variant]} and {what}" if variant in out else f"sglang's {what}"
    return out


def speedup(
    records: Sequence,
    kernel: str,
    *,
    metric: str = DEVICE_COLD,
    over: str | None = None,
    order: Sequence[str] | None = None,
) -> Figure:
    """Speedup of each variant over *over* (default ``BASELINE_VARIANT[kernel]``, sglang's
    original; :func:`speedup_baselines` lists the others) per shape, one panel per GPU.

    Speedup = baseline time / variant time at each machine's latest commit
    (bars above the 1x line are faster than the baseline), log2 y axis.
    """
    baseline = over if over is not None else BASELINE_VARIANT.get(kernel)
    if baseline is None:
        raise ValueError(
            f"kernel has no BASELINE_VARIANT in ltx2k.workload.variants, got {kernel!r}"
        )
    what = speedup_baselines(kernel).get(baseline)
    # Baseline and variant are cells of one result file, so a ratio never spans versions;
    # the GPUs' panels share an axis, so all are of the benchmark's newest code, as asv draws.
    values, latest, older = _latest_values(records, kernel, metric, order)
    machines = sorted({m for m, _, _ in values})
    if not machines:
        return empty(new_figure(8, 2), f"{kernel}: no {metric} results")
    fig = new_figure(max(4.6 * len(machines), 7), 4.4)
    axes = fig.subplots(1, len(machines), squeeze=False, sharey=True)[0]
    all_variants = ordered((v for _, v, _ in values), KERNEL_VARIANTS.get(kernel, ()))
    others = [v for v in all_variants if v != baseline]
    colours = variant_colours(kernel, all_variants)
    for ax, m in zip(axes, machines, strict=True):
        labels = ordered((s for mm, _, s in values if mm == m), KERNEL_SHAPES.get(kernel, ()))
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
        f"{kernel}: speedup over {baseline}{f' ({what})' if what else ''}, "
        f"{METRIC_TITLES.get(metric, metric)} (higher is better){_older_note(older)}",
        fontsize=11,
    )
    return fig


def copy_bandwidth(records: Sequence, kernel: str, *, order: Sequence[str] | None = None) -> Figure:
    """Achieved bandwidth as % of the GPU's measured copy bandwidth, per shape and variant.

    The dashed 100% line is the roofline for a memory-bound kernel: a bar
    near it leaves little to gain; far below it, launch or latency bound.
    """
    # GPUs share one % axis here: only the benchmark's newest code on each, as asv draws.
    values, latest, older = _latest_values(records, kernel, PCT_COPY_BW, order)
    machines = sorted({m for m, _, _ in values})
    if not machines:
        return empty(new_figure(8, 2), f"{kernel}: no {PCT_COPY_BW} results")
    variants = ordered((v for _, v, _ in values), KERNEL_VARIANTS.get(kernel, ()))
    colours = variant_colours(kernel, variants)
    top = max(110.0, 1.08 * max(values.values()))
    fig = new_figure(max(4.6 * len(machines), 7), 4.4)
    axes = fig.subplots(1, len(machines), squeeze=False, sharey=True)[0]
    for ax, m in zip(axes, machines, strict=True):
        labels = ordered((s for mm, _, s in values if mm == m), KERNEL_SHAPES.get(kernel, ()))
        heights = {(v, s): val for (mm, v, s), val in values.items() if mm == m}
        _grouped_bars(ax, labels, variants, heights, colours)
        ax.axhline(100.0, color="#333333", lw=1, ls="--")
        ax.set_ylim(0, top)
        ax.grid(True, axis="y", color="#dddddd", lw=0.6)
        ax.set_title(f"{m} @ {latest[m][:8]}", fontsize=10)
    axes[0].set_ylabel("% of measured copy bandwidth")
    _variant_legend(fig, variants, colours)
    fig.suptitle(
        f"{kernel}: achieved bandwidth vs measured copy bandwidth (100% = roofline)"
        f"{_older_note(older)}",
        fontsize=11,
    )
    return fig


def bytes_moved(kernel: str, shape: str) -> int | None:
    """The minimum bytes one call moves (ltx2k.workload.cases); None for an unknown kernel
    or shape."""
    spec = cases.KERNELS.get(kernel)
    if spec is None:
        return None
    try:
        return spec.bytes_moved(cases.find_shape(kernel, shape))
    except ValueError:
        return None


def copy_ceilings(
    records: Sequence, kernel: str, order: Sequence[str] | None = None
) -> dict[str, float]:
    """machine -> its measured copy bandwidth (bytes/s), recovered from the results.

    ``track_pct_copy_bandwidth`` is bytes / cold time as a % of the runner's
    measured copy bandwidth, so each (cold time, %) pair of a cell gives the
    ceiling back; the median over the cells of the machine's latest commit
    is its value. Machines without both metrics are left out.
    """
    cold, _, _ = _latest_values(records, kernel, DEVICE_COLD, order)
    pct, _, _ = _latest_values(records, kernel, PCT_COPY_BW, order)
    found: dict[str, list[float]] = defaultdict(list)
    for (m, v, s), t_us in cold.items():
        p, nbytes = pct.get((m, v, s)), bytes_moved(kernel, s)
        if p and nbytes and t_us > 0:
            found[m].append(nbytes / (t_us * 1e-6) / (p / 100.0))
    return {m: sorted(xs)[len(xs) // 2] for m, xs in found.items()}


def roofline(records: Sequence, kernel: str, *, order: Sequence[str] | None = None) -> Figure:
    """Achieved GB/s against bytes moved per call, one panel per GPU, with its copy ceiling.

    Each point is a variant (colour) at one shape, at the GPU's latest
    commit: bytes moved / cold device time. The dashed line is the GPU's
    measured copy bandwidth (:func:`copy_ceilings`); small shapes sit far
    below it (launch-bound), large ones should approach it.
    """
    # GPUs share one GB/s axis here: only the benchmark's newest code on each, as asv draws.
    cold, latest, older = _latest_values(records, kernel, DEVICE_COLD, order)
    points: dict[str, list[tuple[str, str, float, float]]] = defaultdict(list)
    for (m, v, s), t_us in cold.items():
        nbytes = bytes_moved(kernel, s)
        if nbytes and t_us > 0:
            points[m].append((v, s, float(nbytes), nbytes / (t_us * 1e-6) / 1e9))
    machines = sorted(points)
    if not machines:
        return empty(new_figure(8, 2), f"{kernel}: no {DEVICE_COLD} results of known shapes")
    ceilings = copy_ceilings(records, kernel, order)
    variants = ordered(
        (v for pts in points.values() for v, *_ in pts), KERNEL_VARIANTS.get(kernel, ())
    )
    colours = variant_colours(kernel, variants)
    markers = variant_markers(kernel, variants)
    fig = new_figure(max(4.6 * len(machines), 7), 4.6)
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
                    ms=marker_size(k, len(variants), 8, 3.5),
                    mec="white",
                    mew=0.5,
                    lw=1,
                    label=v,
                    zorder=2 + k / len(variants),
                )
        ax.set_xscale("log")
        log_axis(ax)
        tidy(ax)
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
    fig.suptitle(
        f"{kernel}: roofline, achieved bandwidth vs bytes moved{_older_note(older)}", fontsize=11
    )
    return fig


def cross_gpu(
    records: Sequence,
    kernel: str,
    variant: str,
    *,
    last: int | None = None,
    order: Sequence[str] | None = None,
) -> Figure:
    """One variant's achieved bandwidth over commits on every GPU, as % of that GPU's ceiling.

    Normalising each GPU to its own measured copy bandwidth puts GPUs of
    different speeds on one scale, so a step on one GPU alone stands out
    from lines that otherwise move together. One panel per shape, one line
    per GPU (colour, labelled at its end).
    """
    recs = [
        r for r in kernel_records(records, kernel, DEVICE_COLD) if param(r, "variant") == variant
    ]
    commits = commit_order(recs, order)
    if last is not None:
        commits = commits[-last:]
    ceilings = copy_ceilings(records, kernel, order)
    if not commits or not ceilings:
        return empty(new_figure(8, 2), f"{kernel} {variant}: no bandwidth ceiling to normalise by")
    index = {c: i for i, c in enumerate(commits)}
    n = len(commits)
    labels = ordered((param(r, "shape") for r in recs), KERNEL_SHAPES.get(kernel, ()))
    machines = sorted({r.machine for r in recs} & set(ceilings))
    colours = machine_colours(machines)
    # The GPUs' lines are read against each other, so all are of one version, the
    # benchmark's newest (as asv publish draws), and each line is of one version.
    drawn = current_version(recs, order, key=benchmark_key)
    kept = {id(r) for r in drawn}
    older_gpus = {
        r.machine
        for r in recs
        if id(r) not in kept and r.commit in index and display_value(r) is not None
    }
    series: dict[tuple[str, str], list[float | None]] = defaultdict(lambda: [None] * n)
    for r in drawn:
        t, nbytes = display_value(r), bytes_moved(kernel, param(r, "shape"))
        if r.commit in index and r.machine in ceilings and t and nbytes:
            achieved = nbytes / (t * 1e-6)
            series[(r.machine, param(r, "shape"))][index[r.commit]] = (
                100 * achieved / ceilings[r.machine]
            )
    cols = min(3, len(labels))
    rows = math.ceil(len(labels) / cols)
    fig = new_figure(4.6 * cols, 2.6 * rows + 1.0)
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
        tidy(ax)
        ax.set_xlim(-0.5, n - 1 + max(2.0, 0.45 * n))
        if ends:
            lo, hi = ax.get_ylim()
            ax.set_ylim(min(lo, 0), max(hi, 105))
            label_line_ends(ax, ends, n - 1 + 0.3, log=False)
        ax.set_title(label, fontsize=9)
        ax.set_ylabel("% of the GPU's copy BW", fontsize=8)
    for k in range(len(labels), rows * cols):
        axes[k // cols][k % cols].set_axis_off()
    for ax in axes[-1]:
        ax.set_xticks(range(n))
        ax.set_xticklabels([c[:8] for c in commits], rotation=90, fontsize=6, family="monospace")
    fig.suptitle(
        f"{kernel} {variant}: each GPU against its own copy bandwidth (higher is better)"
        f"{_older_note(older_gpus)}",
        fontsize=11,
    )
    return fig
