"""The static summary page (``html/summary.html`` + PNGs under ``html/summary/``).

One self-contained HTML file, so it opens from any static host or straight
from disk; its only script (inline) shows one GPU at a time, and without it
every GPU is shown. The first screen (:mod:`ltx2k.report.firstscreen`)
answers "how fast, ahead of eager and compile, anything regressed where";
figures come from :mod:`ltx2k.report.plots`; this module lays them out next
to the tables that make the same facts searchable (the regression matrix,
the machines, the problems).
"""

from __future__ import annotations

import datetime as _dt
import html
import math
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from importlib import resources
from pathlib import Path
from string import Template

from ltx2k.analysis.model import Cell, Report, Row, StepInfo
from ltx2k.history.records import QUIET_KINDS
from ltx2k.report import firstscreen, links, plots
from ltx2k.report.markdown import format_step, format_value
from ltx2k.report.plots.data import latest_per_machine
from ltx2k.workload.variants import BASELINE_VARIANT

SUMMARY_HTML = "summary.html"
SUMMARY_DIR = "summary"  # PNGs, next to summary.html so the page works from any host
MACHINE_FIELDS = ("gpu", "gpu_count", "driver", "cuda", "torch", "triton")
RUN_KINDS = ("failed", "timeout")
# Problems that mean a machine contributed no data at all.
NO_DATA_KINDS = ("no-usable-results", "empty-machine")
_FLAGGED = (plots.FLAG_REGRESSION, plots.FLAG_IMPROVEMENT)


def _e(x) -> str:
    return html.escape(str(x), quote=True)


# --- machines ---------------------------------------------------------------------


def all_machines(
    records: Iterable,
    problems: Iterable,
    report: Report | None = None,
    machines_info: Mapping[str, Mapping] | None = None,
) -> list[str]:
    """Every machine any input mentions: a GPU whose files are all broken is still listed."""
    names = {r.machine for r in records}
    names |= {p.machine for p in problems if p.machine}
    names |= set(report.machines if report is not None else ())
    names |= set(machines_info or {})
    return sorted(names)


def _machines_table(machines, records, problems, machines_info, order=None) -> str:
    info = {r.machine: r.machine_info for r in records if getattr(r, "machine_info", None)}
    info.update({m: i for m, i in (machines_info or {}).items() if i})
    by_machine = defaultdict(list)
    for r in records:
        by_machine[r.machine].append(r)
    issues = defaultdict(list)
    for p in problems:
        if p.machine and p.kind not in QUIET_KINDS + RUN_KINDS:
            issues[p.machine].append(p.kind)
    head = "".join(f"<th>{_e(h)}</th>" for h in ("machine", "status", *MACHINE_FIELDS))
    head += '<th class="num">commits</th><th>latest commit</th>'
    rows = []
    for m in machines:
        recs = by_machine.get(m, [])
        usable = [r for r in recs if r.value is not None]
        broken = not usable
        if broken:
            status = '<span class="badge">no usable results</span>'
        elif issues.get(m):
            status = "ok, with problems"
        else:
            status = "ok"
        if issues.get(m):
            status += " (" + ", ".join(_e(k) for k in sorted(set(issues[m]))) + ")"
        fields = "".join(f"<td>{_e(info.get(m, {}).get(f, ''))}</td>" for f in MACHINE_FIELDS)
        # Latest in git's order where known, as the figures and the first screen place
        # commits: a re-run of an old commit is not the GPU's latest.
        latest = latest_per_machine(recs, order).get(m)
        when = max((r.date for r in recs if r.commit == latest), default=None)
        latest_txt = f"<code>{_e(latest[:8])}</code> {_e(_date(when))}" if latest else "&mdash;"
        n_commits = len({r.commit for r in recs})
        cls = ' class="machine-broken"' if broken else ""
        rows.append(
            f'<tr{cls} data-machine="{_e(m)}"><td><b>{_e(m)}</b></td><td>{status}</td>{fields}'
            f'<td class="num">{n_commits}</td><td>{latest_txt}</td></tr>'
        )
    if not rows:
        return '<p class="empty">No machines found in the results directory.</p>'
    return (
        f'<table id="machines-table"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def _date(ms: int) -> str:
    return _dt.datetime.fromtimestamp(ms / 1000, _dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


# --- 1. regression matrix -----------------------------------------------------------


def _fmt_value(x, unit: str) -> str:
    if not isinstance(x, (int, float)) or not math.isfinite(x):
        return "n/a"
    return format_value(float(x), unit)


def _step_html(step: StepInfo, commit_base: str | None = None) -> str:
    # format_step writes Markdown whose only markup is `code` around commit hashes.
    full = {c[:8]: c for c in (*step.range, step.first_bad, step.last_good)}

    def code(m: re.Match) -> str:
        url = links.commit_url(commit_base, full.get(m.group(1), ""))
        inner = f"<code>{m.group(1)}</code>"
        return f'<a class="commit" href="{_e(url)}">{inner}</a>' if url else inner

    return re.sub(r"`([^`]*)`", code, _e(format_step(step)))


def _cell(
    cell: Cell | None,
    machine: str,
    unit: str,
    cell_id: str = "",
    *,
    head: str = "",
    commit_base: str | None = None,
) -> str:
    if cell is None:
        return (
            f'<td class="flag-missing" data-machine="{_e(machine)}" data-flag="missing">'
            "&mdash;</td>"
        )
    flag, ratio, p = cell.flag, cell.ratio, cell.p_value
    if ratio is not None and math.isfinite(ratio):
        text = f"{ratio:.3f}"
    elif cell.base == 0 and cell.head is not None and flag != "insufficient":
        text = f"{_fmt_value(cell.head, unit)} vs 0"  # a level of 0 has no ratio
    else:
        text = "n/a"
    text = _e(text)
    p_txt = f", p={p:.2g}" if p is not None and math.isfinite(p) else ""
    words = plots.FLAG_WORDS.get(flag, flag)
    tip = f"{words}: head {_fmt_value(cell.head, unit)}, base {_fmt_value(cell.base, unit)}{p_txt}"
    if cell.why:
        tip += f" ({cell.why})"
    if head:
        tip += f"; machine {machine}, head from its result file of commit {head[:8]}"
    attrs = ""
    if cell.step is not None and flag in _FLAGGED:
        attrs = f' data-first-bad="{_e(cell.step.first_bad)}"'
        text += f'<div class="step">{_step_html(cell.step, commit_base)}</div>'
        tip += "; step " + format_step(cell.step).replace("`", "")
    if cell_id:
        attrs += f' id="{_e(cell_id)}"'
    return (
        f'<td class="num flag-{_e(flag)}" data-machine="{_e(machine)}" data-flag="{_e(flag)}"'
        f'{attrs} title="{_e(tip)}">{text}</td>'
    )


def _matrix_table(
    rows: Sequence[Row],
    machines: Sequence[str],
    table_id: str,
    *,
    head: str = "",
    commit_base: str | None = None,
) -> str:
    launch = any(row.launch for row in rows)  # a column only where a launch path is timed
    labels = ("kernel", "metric", "variant", *(("launch path",) if launch else ()), "shape")
    header = "".join(f"<th>{h}</th>" for h in labels)
    header += "".join(f'<th class="num">{_e(m)}</th>' for m in machines)
    body = []
    for row in rows:
        kernel, metric = plots.report_row_kernel_metric(row)
        tds = "".join(
            _cell(
                row.cells.get(m),
                m,
                row.unit,
                # ids only in the flagged table: the status line links there
                firstscreen.anchor("mx", m, row.benchmark, row.params)
                if table_id == "matrix-flagged"
                else "",
                head=head,
                commit_base=commit_base,
            )
            for m in machines
        )
        body.append(
            f'<tr data-benchmark="{_e(row.benchmark)}"><td>{_e(kernel)}</td>'
            f"<td>{_e(metric)}</td><td>{_e(row.variant or '')}</td>"
            + (f"<td>{_e(row.launch or '')}</td>" if launch else "")
            + f'<td class="mono">{_e(row.shape or "")}</td>{tds}</tr>'
        )
    return (
        f'<table id="{table_id}"><thead><tr>{header}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table>"
    )


def _matrix_section(
    report: Report | None,
    machines: Sequence[str],
    image: str | None,
    commit_base: str | None = None,
) -> str:
    if report is None:
        return (
            '<p class="empty">No regression report was given or computed '
            "(need at least two commits); see the asv regressions page.</p>"
        )
    base = report.baseline
    cols = list(report.machines)
    missing = [m for m in machines if m not in cols]
    cols += missing  # a GPU the report left out still gets a column, marked missing
    rows = report.rows
    n_reg = len(report.cells(plots.FLAG_REGRESSION))
    n_imp = len(report.cells(plots.FLAG_IMPROVEMENT))
    flagged = [r for r in rows if any(c.flag in _FLAGGED for c in r.cells.values())]
    counts = (
        f"status {_status_badge(report.status)}, {n_reg} regression(s), {n_imp} improvement(s)."
    )
    if base.kind == "last-n":
        intro = (
            f"<p>Head <code>{_e(report.head[:12])}</code>, judged on the change points of each "
            f"GPU's last {_e(base.ref)} commits: {counts} A cell is flagged when a step "
            "starts within its last few runs. Its number is the new level / the old one; "
            "below it are the step's first bad commit (or the range of commits it lies in), "
            "its size with a 95% interval, and a note when the new level was seen only once "
            "or was undone later. Hover for values.</p>"
        )
    else:
        intro = (
            f"<p>Head <code>{_e(report.head[:12])}</code> against {_e(base.kind)} "
            f"<code>{_e(base.ref[:12])}</code> ({len(base.commits)} baseline commit(s)): "
            f"{counts} Cells are the report's head/base ratio; hover for values and p-value.</p>"
        )
    parts = [intro]
    if missing:
        parts.append(
            "<p><span class='badge'>no data</span> not in the regression report: "
            + ", ".join(f"<b>{_e(m)}</b>" for m in missing)
            + "</p>"
        )
    if image:
        parts.append(
            _figure(image, "Regression matrix heatmap", "Red: regression, green: improvement.")
        )
    elif not any(c.flag != plots.FLAG_INSUFFICIENT for _, _, c in report.cells()):
        parts.append(
            '<p class="empty">No cell has a verdict yet: every GPU needs a few commits of '
            "history before a step can be told from noise.</p>"
        )
    parts.append("<h3>Flagged cells</h3>")
    if flagged:
        parts.append(
            _matrix_table(
                flagged, cols, "matrix-flagged", head=report.head, commit_base=commit_base
            )
        )
    else:
        parts.append('<p class="empty">No cell is flagged.</p>')
    parts.append(f"<details><summary>All {len(rows)} rows</summary>")
    parts.append(_matrix_table(rows, cols, "matrix-all", head=report.head, commit_base=commit_base))
    parts.append("</details>")
    return "\n".join(parts)


def _status_badge(status) -> str:
    s = str(status or "none")
    # no report: nothing was compared
    label = "not judged" if s == "none" else plots.FLAG_WORDS.get(s, s)
    return f'<span class="status status-{_e(s)}">{_e(label)}</span>'


# --- figures and problems -----------------------------------------------------------


def _figure(src: str, alt: str, caption: str = "") -> str:
    cap = f"<figcaption>{_e(caption)}</figcaption>" if caption else ""
    return f'<figure><img src="{_e(src)}" alt="{_e(alt)}">{cap}</figure>'


def _figures(images: Sequence[tuple[str, str]]) -> str:
    if not images:
        return '<p class="empty">No data for this view.</p>'
    return "\n".join(_figure(src, alt) for src, alt in images)


def _problems_section(problems: Sequence) -> str:
    files = [p for p in problems if p.kind not in QUIET_KINDS + RUN_KINDS]
    runs = [p for p in problems if p.kind in RUN_KINDS]
    quiet = [p for p in problems if p.kind in QUIET_KINDS]

    def table(items, table_id):
        rows = "".join(
            f'<tr data-kind="{_e(p.kind)}"><td>{_e(p.machine or "")}</td><td>{_e(p.kind)}</td>'
            f"<td>{_e(p.message)}</td></tr>"
            for p in items
        )
        return (
            f'<table id="{table_id}"><thead><tr><th>machine</th><th>kind</th><th>message</th>'
            f"</tr></thead><tbody>{rows}</tbody></table>"
        )

    parts = ["<h3>Result files and machines</h3>"]
    parts.append(
        table(files, "problems-files") if files else '<p class="empty">None: every file loaded.</p>'
    )
    parts.append("<h3>Failed benchmarks</h3>")
    parts.append(
        table(runs, "problems-runs")
        if runs
        else '<p class="empty">None: every run has a value.</p>'
    )
    if quiet:
        parts.append(
            f"<details><summary>{len(quiet)} skipped combination group(s) "
            "(setup raised NotImplementedError, e.g. a shape a GPU does not support)</summary>"
        )
        parts.append(table(quiet, "problems-skipped"))
        parts.append("</details>")
    return "\n".join(parts)


# --- page ---------------------------------------------------------------------------


def _problems_label(problems: Sequence) -> str:
    """The nav link's count: real problems, and the skipped groups the section also lists."""
    n = len([p for p in problems if p.kind not in QUIET_KINDS])
    quiet = len([p for p in problems if p.kind in QUIET_KINDS])
    return f"problems ({n})" + (f" · {quiet} skipped" if quiet else "")


def render_summary(
    *,
    records: Sequence,
    problems: Sequence,
    report: Report | None,
    images: Mapping[str, Sequence[tuple[str, str]]],
    machines_info: Mapping[str, Mapping] | None = None,
    generated: _dt.datetime | None = None,
    title: str = "ltx2k performance summary",
    commit_base: str | None = None,
    provenance: firstscreen.Provenance | None = None,
    order: Sequence[str] | None = None,
) -> str:
    """The page's HTML. ``images`` maps section ("matrix", "history", "speedup",
    "bandwidth", "roofline", "cross_gpu") to ``(relative src, alt text)`` pairs.
    ``commit_base`` is the commit-link prefix (:func:`ltx2k.report.links.commit_url_base`),
    ``provenance`` names the result files values come from; ``order`` is git's history of
    the commits, oldest first, where known (the machines table's latest commit)."""
    generated = generated or _dt.datetime.now(_dt.timezone.utc)
    machines = all_machines(records, problems, report, machines_info)
    matrix_img = (images.get("matrix") or [(None, "")])[0][0]
    views = firstscreen.build_views(
        records, report, machines, machines_info=machines_info, provenance=provenance
    )
    template = Template(
        resources.files("ltx2k.report").joinpath("templates", SUMMARY_HTML).read_text("utf-8")
    )
    return template.substitute(
        title=_e(title),
        generated=_e(generated.strftime("%Y-%m-%d %H:%M:%S UTC")),
        n_machines=len(machines),
        n_commits=len({r.commit for r in records}),
        problems_label=_e(_problems_label(problems)),
        head=_e(report.head[:12] if report is not None else "n/a"),
        status_badge=_status_badge(report.status if report is not None else None),
        status_line=firstscreen.status_line(views, report, commit_base),
        first_screen=firstscreen.render(views, report, commit_base),
        script=firstscreen.SCRIPT,
        colour_regression=plots.FLAG_COLOURS[plots.FLAG_REGRESSION],
        colour_improvement=plots.FLAG_COLOURS[plots.FLAG_IMPROVEMENT],
        colour_insufficient=plots.FLAG_COLOURS[plots.FLAG_INSUFFICIENT],
        machines=_machines_table(machines, records, problems, machines_info, order),
        matrix=_matrix_section(report, machines, matrix_img, commit_base),
        history=_figures(images.get("history", ())),
        speedup=_figures(images.get("speedup", ())),
        bandwidth=_figures(images.get("bandwidth", ()) + images.get("roofline", ())),
        cross_gpu=_figures(images.get("cross_gpu", ())),
        problems=_problems_section(problems),
    )


def _judged(report: Report | None) -> bool:
    """Whether any cell has a verdict: a matrix of dashes only is not worth an image."""
    return report is not None and any(
        c.flag != plots.FLAG_INSUFFICIENT for _, _, c in report.cells()
    )


def build_summary(
    html_dir: str | Path,
    records: Sequence,
    problems: Sequence,
    *,
    report: Report | None = None,
    machines_info: Mapping[str, Mapping] | None = None,
    last: int | None = None,
    title: str = "ltx2k performance summary",
    commit_base: str | None = None,
    results_dir: str | Path | None = None,
    results_label: str = "results",
    failed: list[tuple[str, BaseException]] | None = None,
    order: Sequence[str] | None = None,
) -> Path:
    """Draw every figure into ``html_dir/summary/`` and write ``html_dir/summary.html``.

    ``order``: git's history of the commits, oldest first, where known; the figures
    place commits by it (:func:`ltx2k.report.plots.data.commit_order`), else by date.

    ``results_dir`` (with ``results_label``, how the page names it) lets each
    value name its result file and the GPU identity ltx2k run or shard-run wrote there.

    Each figure is drawn on its own: one that raises (a bug in ltx2k) is left out, and
    ``(what, exception)`` goes to *failed* for the caller to report; without *failed*
    the error is raised. The page itself is written either way.
    """
    html_dir = Path(html_dir)
    out = html_dir / SUMMARY_DIR
    out.mkdir(parents=True, exist_ok=True)
    images: dict[str, list[tuple[str, str]]] = defaultdict(list)

    def add(section: str, draw, name: str, alt: str) -> None:
        try:
            plots.save(draw(), out / name)
        except Exception as e:
            if failed is None:
                raise
            failed.append((f"the figure {SUMMARY_DIR}/{name}", e))
            return
        images[section].append((f"{SUMMARY_DIR}/{name}", alt))

    if _judged(report) and report.rows:
        add("matrix", lambda: plots.regression_heatmap(report), "matrix.png", "regression matrix")
    for k in plots.kernels_in(records):
        for metric in (plots.DEVICE_COLD, plots.HOST_LATENCY):
            add(
                "history",
                lambda k=k, metric=metric: plots.history(
                    records, k, metric=metric, report=report, last=last, order=order
                ),
                f"history_{k}_{metric}.png",
                f"{k} {plots.METRIC_TITLES[metric]} history",
            )
        # Over sglang's original kernel and over its current design, where the kernel has
        # them (one figure where they are one variant).
        for over, what in plots.speedup_baselines(k).items():
            own = "" if over == BASELINE_VARIANT.get(k) else f"_{over}"
            name = f"speedup_{k}{own}.png"
            add(
                "speedup",
                lambda k=k, over=over: plots.speedup(records, k, over=over, order=order),
                name,
                f"{k} speedup over {over} ({what})",
            )
        add(
            "bandwidth",
            lambda k=k: plots.copy_bandwidth(records, k, order=order),
            f"bandwidth_{k}.png",
            f"{k} % of copy bandwidth",
        )
        add(
            "roofline",
            lambda k=k: plots.roofline(records, k, order=order),
            f"roofline_{k}.png",
            f"{k} roofline",
        )
        variant = firstscreen.default_variant(k)
        if variant is not None:
            add(
                "cross_gpu",
                lambda k=k, variant=variant: plots.cross_gpu(
                    records, k, variant, last=last, order=order
                ),
                f"cross_gpu_{k}.png",
                f"{k} {variant} on every GPU, as % of its copy bandwidth",
            )
    provenance = firstscreen.Provenance(
        results_label, Path(results_dir) if results_dir is not None else None
    )
    page = render_summary(
        records=records,
        problems=problems,
        report=report,
        images=images,
        machines_info=machines_info,
        title=title,
        commit_base=commit_base,
        provenance=provenance,
        order=order,
    )
    path = html_dir / SUMMARY_HTML
    path.write_text(page, encoding="utf-8")
    return path


def write_unavailable(html_dir: str | Path, error: BaseException) -> Path:
    """A summary page that says it could not be built, linking asv's pages: what
    ``publish`` writes when the real one fails, so the link to it never dangles."""
    path = Path(html_dir) / SUMMARY_HTML
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        "<title>ltx2k performance summary</title></head><body>"
        "<h1>ltx2k performance summary</h1>"
        "<p>This page could not be built: an internal error in ltx2k "
        f"(<code>{_e(type(error).__name__)}: {_e(str(error))}</code>); "
        "the publish log has its traceback. "
        '<a href="index.html">asv\'s pages</a> are complete.</p></body></html>\n',
        encoding="utf-8",
    )
    return path
