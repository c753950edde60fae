"""How every figure looks: the verdicts' words and colours, a colour and a marker per
variant, and the canvas, axes and line labels the figures are drawn on, fitted and saved."""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import LogLocator, NullFormatter

from ltx2k.report.plots.data import KERNEL_VARIANTS

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
# The PyTorch peers the Triton variants are measured against: neutral colours, the eager
# ones dark, the compiled ones grey (the unfused prologue's a shade apart from the fused
# reference's, for a figure that shows both).
PEER_COLOURS = {
    "eager": "#222222",
    "compiled": "#8c8c8c",
    "unfused_eager": "#555555",
    "unfused_compiled": "#b3b3b3",
}
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


def marker_size(i: int, n: int, big: float, small: float) -> float:
    """The i-th of n coinciding markers: the first drawn biggest, so each later (smaller)
    one sits on top of the earlier ones and none hides another."""
    return big if n <= 1 else big - (big - small) * i / (n - 1)


# --- the canvas: drawn with Agg, grown to fit, saved as PNG -----------------------------


def new_figure(width: float, height: float) -> Figure:
    fig = Figure(figsize=(width, height), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def empty(fig: Figure, message: str) -> Figure:
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


# --- axes -------------------------------------------------------------------------------


def label_line_ends(ax, ends: list[tuple[float, str, str]], x: float, *, log: bool) -> None:
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


# The log axes' major ticks (:func:`log_axis`): 1, 2 and 5 times each power of ten.
LOG_SUBS = (1.0, 2.0, 5.0)


def log_axis(ax, fmt=lambda y, _: f"{y:g}") -> None:
    ax.set_yscale("log")
    # Plain numbers at 1-2-5 steps: "2 × 10^1 µs" makes readers do arithmetic.
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=LOG_SUBS))
    ax.yaxis.set_major_formatter(fmt)
    ax.yaxis.set_minor_formatter(NullFormatter())


def tidy(ax) -> None:
    ax.grid(True, which="major", color="#dddddd", lw=0.6)
    ax.tick_params(labelsize=7)
    for spine in ("top", "right"):
        ax.spines[spine].set_visible(False)
