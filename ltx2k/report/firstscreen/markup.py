"""The first screen as HTML: the GPU selector, a table per kernel with sparklines, the
status line, and the script that shows one GPU at a time."""

from __future__ import annotations

import html
import re
from collections.abc import Sequence

from ltx2k.analysis.model import Report, Row, StepInfo
from ltx2k.report import links, plots
from ltx2k.report.firstscreen.views import (
    KernelTable,
    MachineView,
    ScreenCell,
    anchor,
    fmt,
    higher_is_better,
)

# What a cell says when its metric is not taken at that shape (not a failure).
NOT_MEASURED = "not measured here"


def _e(x) -> str:
    return html.escape(str(x), quote=True)


def sparkline(values: Sequence[float | None], *, mark: int | None = None, w=64, h=18) -> str:
    """An inline SVG line of *values* (None leaves a gap); *mark* is a red tick at that index."""
    pts = [(i, v) for i, v in enumerate(values) if v is not None]
    n = len(values)
    if not pts:
        return ""
    lo, hi = min(v for _, v in pts), max(v for _, v in pts)
    span = hi - lo or abs(hi) or 1.0
    pad = 2.0

    def xy(i, v):
        x = pad + (w - 2 * pad) * (i / (n - 1) if n > 1 else 0.5)
        y = h - pad - (h - 2 * pad) * ((v - lo) / span if hi > lo else 0.5)
        return f"{x:.1f},{y:.1f}"

    segments, cur = [], []
    for i, v in enumerate(values):
        if v is None:
            if cur:
                segments.append(cur)
            cur = []
        else:
            cur.append(xy(i, v))
    if cur:
        segments.append(cur)
    body = "".join(
        f'<polyline points="{" ".join(s)}" fill="none" stroke="#555" stroke-width="1.2"/>'
        for s in segments
        if len(s) > 1
    )
    if mark is not None and 0 <= mark < n:
        x = xy(mark, lo).split(",")[0]
        body += f'<line x1="{x}" x2="{x}" y1="0" y2="{h}" stroke="#d62728" stroke-width="1.2"/>'
    last_i, last_v = pts[-1]
    cx, cy = xy(last_i, last_v).split(",")
    body += f'<circle cx="{cx}" cy="{cy}" r="2" fill="#222"/>'
    n_pts = len(pts)
    tip = (
        "one point: a line needs a second commit"
        if n_pts == 1
        else f"last {n} commits of this GPU ({n_pts} with a value)"
    )
    return (
        f'<svg class="spark" width="{w}" height="{h}" viewBox="0 0 {w} {h}" '
        f'role="img" data-points="{n_pts}"><title>{_e(tip)}</title>{body}</svg>'
    )


def _commit_link(sha: str, base: str | None, text: str | None = None) -> str:
    label = _e(text or sha[:8])
    url = links.commit_url(base, sha)
    if url is None:
        return f"<code>{label}</code>"
    return f'<a class="commit" href="{_e(url)}"><code>{label}</code></a>'


def _step_text(step: StepInfo, base: str | None) -> str:
    size = "from 0" if step.ratio is None else f"{(step.ratio - 1) * 100:+.1f}%"
    where = (
        _commit_link(step.first_bad, base)
        if step.exact
        else _commit_link(step.range[0], base) + ".." + _commit_link(step.first_bad, base)
    )
    return f"{size} at {where}"


def _cell_html(c: ScreenCell, commits: Sequence[str], base: str | None) -> str:
    cls = f"fs-{c.flag}" if c.flag else ("fs-derived" if c.column.derived else "fs-none")
    mark = None
    if c.step is not None and c.step.first_bad in commits:
        mark = list(commits).index(c.step.first_bad)
    value = _e(NOT_MEASURED if c.not_measured else fmt(c.value, c.column.unit))
    if c.link:
        value = f'<a class="v" href="{_e(c.link)}">{value}</a>'
    else:
        value = f'<span class="v">{value}</span>'
    step = ""
    if c.step is not None and c.flag in (plots.FLAG_REGRESSION, plots.FLAG_IMPROVEMENT):
        step = f'<div class="step">{_step_text(c.step, base)}</div>'
    attrs = f' id="{_e(c.cell_id)}"' if c.cell_id else ""
    flag = c.flag or ("derived" if c.column.derived else "none")
    first_bad = f' data-first-bad="{_e(c.step.first_bad)}"' if c.step is not None else ""
    raw = "" if c.value is None else f' data-value="{c.value!r}"'
    return (
        f'<td{attrs} class="num {cls}" data-col="{_e(c.column.key)}" data-flag="{_e(flag)}"'
        f'{first_bad}{raw} title="{_e(c.title)}">{value}'
        f"{sparkline(c.history, mark=mark)}{step}</td>"
    )


def table_id(machine: str, kernel: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "-", f"fs-{machine}-{kernel}")


def _table_html(view: MachineView, t: KernelTable, base: str | None) -> str:
    head = "".join(
        f'<th class="num" data-col="{_e(c.key)}" title="{_e(c.explanation(t.kernel))}">'
        f"{_e(c.title)}"
        f'<span class="dir">{"higher" if higher_is_better(c) else "lower"} is better</span>'
        f'<span class="explain">{_e(c.explanation(t.kernel))}</span></th>'
        for c in t.columns
    )
    body = []
    for shape, cells in t.rows:
        tds = "".join(_cell_html(c, view.commits, base) for c in cells)
        body.append(f'<tr data-shape="{_e(shape)}"><th class="mono">{_e(shape)}</th>{tds}</tr>')
    if not body:
        body.append(f'<tr><td colspan="{len(t.columns) + 1}" class="empty">no results</td></tr>')
    if t.variant and t.variant == t.default:
        variant = f" · variant <b>{_e(t.variant)}</b> (the default)"
    elif t.variant:
        variant = (
            f" · variant <b>{_e(t.variant)}</b> (the default, {_e(t.default)}, "
            "has no results at this commit)"
        )
    else:
        variant = ""
    return (
        f'<table class="fs-table" id="{_e(table_id(view.machine, t.kernel))}" '
        f'data-kernel="{_e(t.kernel)}" data-machine="{_e(view.machine)}">'
        f"<caption><b>{_e(t.kernel)}</b>{variant}</caption>"
        f"<thead><tr><th>shape</th>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
    )


ENV_FIELDS = (("gpu", "GPU"), ("driver", "driver"), ("cuda", "CUDA"), ("torch", "torch"),
              ("triton", "triton"))  # fmt: skip


def _gpu_id_text(gpu_id: str) -> str:
    """ "3 GPU-ab12..." (index and UUID, as a run tags results) -> "GPU 3 (GPU-ab12...)"."""
    index, _, uuid = gpu_id.partition(" ")
    return f"GPU {index} ({uuid})" if uuid else gpu_id


def _env_html(view: MachineView, base: str | None) -> str:
    parts = [f"<b>{_e(view.machine)}</b>"]
    for key, label in ENV_FIELDS:
        if view.info.get(key):
            parts.append(f'{label} <span data-env="{key}">{_e(view.info[key])}</span>')
    if view.gpu_ids:
        parts.append(
            'measured on <span data-env="gpu_uuid">'
            + ", ".join(_e(_gpu_id_text(g)) for g in view.gpu_ids)
            + "</span>"
        )
    if view.head:
        parts.append(f"commit {_commit_link(view.head, base)}")
    parts.append(f"{view.n_commits} commit(s)")
    return '<p class="env">' + " · ".join(parts) + "</p>"


def _note_html(view: MachineView, report: Report | None) -> str:
    if view.head is None:
        return '<p class="note">no usable results from this GPU</p>'
    notes = []
    if view.first_run:
        notes.append(
            "first commit on this GPU: nothing to compare yet. asv's graphs draw a line "
            "from the second commit on, so its grid thumbnails stay blank until then."
        )
    elif report is not None and report.head != view.head:
        notes.append(
            f"this GPU's latest commit is {view.head[:8]}, not the report's head "
            f"{report.head[:8]}: its cells have no verdict for the head."
        )
    if report is None and not view.first_run:
        notes.append("no regression report: the cells are not judged.")
    return "".join(f'<p class="note">{_e(n)}</p>' for n in notes)


def _elsewhere_html(view: MachineView, shown: set[str], base: str | None) -> str:
    """Flagged cells of this GPU that the tables do not show (other variants, metrics)."""
    items = []
    for label, cells in (("regression", view.regressions), ("improvement", view.improvements)):
        for row, cell in cells:
            cid = anchor("fs", view.machine, row.benchmark, row.params)
            if cid in shown:
                continue
            what = cell_name(row)
            step = f" {_step_text(cell.step, base)}" if cell.step else ""
            target = anchor("mx", view.machine, row.benchmark, row.params)
            items.append(
                f'<li class="fs-{label}-item"><a href="#{_e(target)}">{_e(label)}: '
                f"{_e(' '.join(what.split()))}</a>{step}</li>"
            )
    if not items:
        return ""
    return '<ul class="elsewhere">' + "".join(items) + "</ul>"


def cell_name(row: Row) -> str:
    """ "split_rope blocked B1_S1024_H32_D128 device time, cold L2"."""
    kernel, metric = plots.report_row_kernel_metric(row)
    title = plots.METRIC_TITLES.get(metric, metric)
    return " ".join(f"{kernel} {row.variant or ''} {row.shape or ''} {title}".split())


def _first_cell(view: MachineView, row: Row) -> str:
    cid = anchor("fs", view.machine, row.benchmark, row.params)
    for t in view.tables:
        for _, cells in t.rows:
            if any(c.cell_id == cid for c in cells):
                return cid
    return anchor("mx", view.machine, row.benchmark, row.params)


def status_line(views: Sequence[MachineView], report: Report | None, base: str | None) -> str:
    """One sentence: where the regressions are, since which commit, linked to the cells."""
    with_data = [v for v in views if v.head is not None]
    if not with_data:
        return '<p id="status-line" class="status-line">No usable results yet.</p>'
    if all(v.first_run for v in with_data):
        names = ", ".join(_e(v.machine) for v in with_data)
        return (
            '<p id="status-line" class="status-line sl-first">First commit on '
            f"{names}: nothing to compare yet.</p>"
        )
    if report is None:
        return (
            '<p id="status-line" class="status-line">No regression report: values are shown '
            "without verdicts.</p>"
        )
    parts, clean = [], []
    judged = {m for row in report.rows for m, c in row.cells.items() if c.flag != "insufficient"}
    # Past its first commit but with no verdict yet: not "no regressions", too early to say.
    early = [v for v in with_data if not v.first_run and v.machine not in judged]
    for v in with_data:
        if v in early or v.first_run:
            continue  # each named below, not counted as clean
        if not v.regressions:
            clean.append(v.machine)
            continue
        steps = [c.step for _, c in v.regressions if c.step is not None]
        order = {c: i for i, c in enumerate(v.commits)}
        since = min((s.first_bad for s in steps), key=lambda c: order.get(c, -1), default=None)
        row0 = v.regressions[0][0]
        names = []
        for row, _cell in v.regressions[:2]:
            names.append(cell_name(row))
        more = f" and {len(v.regressions) - 2} more" if len(v.regressions) > 2 else ""
        n = len(v.regressions)
        text = f'<a href="#{_e(_first_cell(v, row0))}">{n} regression{"s" if n > 1 else ""}</a>'
        text += f" on <b>{_e(v.machine)}</b>"
        if since:
            text += f" since {_commit_link(since, base)}"
        text += f" ({_e('; '.join(names))}{_e(more)})"
        parts.append(text)
    if not parts and not clean:
        sentence = ""
        cls = "sl-first"
    elif not parts:
        sentence = f"No regressions on {len(clean)} GPU(s)"
        cls = "sl-ok"
    else:
        sentence = "; ".join(parts)
        sentence += "; 0 elsewhere" if clean else ""
        cls = "sl-regression"
    n_imp = sum(len(v.improvements) for v in with_data)
    if n_imp:
        sentence += f"; {n_imp} improvement{'s' if n_imp > 1 else ''}"
    firsts = [v.machine for v in with_data if v.first_run]
    if firsts:
        sentence += f"; first commit on {', '.join(_e(m) for m in firsts)}: nothing to compare yet"
    if early:
        names = ", ".join(f"{_e(v.machine)} ({v.n_commits} commits)" for v in early)
        sentence += f"; too little history to judge yet on {names}: values shown without verdicts"
    sentence = sentence.removeprefix("; ")
    sentence = sentence[:1].upper() + sentence[1:]
    head = f" (head {_commit_link(report.head, base)})" if report.head else ""
    return f'<p id="status-line" class="status-line {cls}">{sentence}{head}.</p>'


def default_machine(views: Sequence[MachineView]) -> str | None:
    """The GPU shown first: the one with most regressions, else the first with data."""
    with_data = [v for v in views if v.head is not None]
    if not with_data:
        return views[0].machine if views else None
    return max(with_data, key=lambda v: (len(v.regressions), -with_data.index(v))).machine


def render(views: Sequence[MachineView], report: Report | None, base: str | None) -> str:
    """The GPU selector and one panel per GPU (all visible without JavaScript)."""
    if not views:
        return '<p class="empty">No machines found in the results directory.</p>'
    chosen = default_machine(views)
    buttons = []
    for v in views:
        n = len(v.regressions)
        badge = f' <span class="badge">{n}</span>' if n else ""
        pressed = "true" if v.machine == chosen else "false"
        buttons.append(
            f'<a class="gpu-btn" href="#gpu-{_e(v.machine)}" data-machine="{_e(v.machine)}" '
            f'aria-pressed="{pressed}">{_e(v.machine)}{badge}</a>'
        )
    panels = []
    for v in views:
        shown = {c.cell_id for t in v.tables for _, cells in t.rows for c in cells if c.cell_id}
        tables = "".join(_table_html(v, t, base) for t in v.tables)
        panels.append(
            f'<div class="gpu-panel" id="gpu-{_e(v.machine)}" data-machine="{_e(v.machine)}">'
            f'{_env_html(v, base)}{_note_html(v, report)}<div class="fs-tables">{tables}</div>'
            f"{_elsewhere_html(v, shown, base)}</div>"
        )
    return (
        f'<div id="gpu-select" class="gpu-select" data-default="{_e(chosen or "")}">'
        f'<span class="label">GPU</span>{"".join(buttons)}</div>' + "".join(panels)
    )


# Shows one GPU panel at a time; a link to a cell of another GPU switches to it.
SCRIPT = """
(function () {
  var panels = Array.prototype.slice.call(document.querySelectorAll('.gpu-panel'));
  var buttons = Array.prototype.slice.call(document.querySelectorAll('.gpu-btn'));
  if (!panels.length) return;
  function show(m) {
    panels.forEach(function (p) { p.hidden = p.getAttribute('data-machine') !== m; });
    buttons.forEach(function (b) {
      b.setAttribute('aria-pressed', String(b.getAttribute('data-machine') === m));
    });
  }
  function target() {
    var id = decodeURIComponent(location.hash.slice(1));
    return id ? document.getElementById(id) : null;
  }
  function sync() {
    var el = target();
    var panel = el && el.closest ? el.closest('.gpu-panel') : null;
    if (panel) {
      show(panel.getAttribute('data-machine'));
      if (el !== panel) el.scrollIntoView({block: 'center'});
    }
    return !!panel;
  }
  buttons.forEach(function (b) {
    b.addEventListener('click', function (ev) {
      ev.preventDefault();
      show(b.getAttribute('data-machine'));
      history.replaceState(null, '', '#gpu-' + b.getAttribute('data-machine'));
    });
  });
  window.addEventListener('hashchange', sync);
  if (!sync()) show(document.getElementById('gpu-select').getAttribute('data-default'));
})();
"""
