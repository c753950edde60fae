"""Plots, the summary page and ``publish`` on a synthetic multi-GPU history.

Expectations come from what the synthetic history injects (steps, failures,
broken files), never from the code's own output: the regression matrix must
flag exactly the injected head-commit changes (and name the head commit
as their step), every GPU must be listed
even when all of its files are broken, and a corrupt file must be listed,
not fatal.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import io
import json
import math
import re
import struct
from html.parser import HTMLParser
from pathlib import Path

import pytest

from ltx2k.analysis import changepoint
from ltx2k.analysis.model import Baseline, Cell, Report, Row, StepInfo
from ltx2k.history.records import load_results
from ltx2k.report import asv_site, firstscreen, links, page, plots, publish
from ltx2k.report.firstscreen import markup
from ltx2k.report.plots import kernel_history, style
from ltx2k.workload import cases, shapes, variants
from tools.synthetic_history import generate_history

N_COMMITS = 12
HEAD = N_COMMITS - 1
# Older than the runs whose steps count as "now", so the matrix must not flag it.
MID = 3
assert HEAD - MID >= changepoint.RECENT
# Injected at the head commit, so judging head along its history must flag exactly these.
REGRESSION = ("h100-80gb-hbm3", "SplitRope", "time_device_cold", "blocked", "B1_S1024_H32_D128")
IMPROVEMENT = ("h200", "AdaValues9", "time_device_cold", "slab", "B1_S1_D4096_bf16")
STEPS = (
    f"{REGRESSION[0]}:{REGRESSION[1]}.{REGRESSION[2]}:{REGRESSION[3]}:{REGRESSION[4]}"
    f":commit={HEAD}:+30%",
    f"{IMPROVEMENT[0]}:{IMPROVEMENT[1]}.{IMPROVEMENT[2]}:{IMPROVEMENT[3]}:{IMPROVEMENT[4]}"
    f":commit={HEAD}:-25%",
    # Mid-history step: shows up in the history plot, not in the head matrix.
    f"a100-sxm4-80gb:SplitRope.time_device_*:per_head:B4_S25_H32_D64:commit={MID}:+40%",
)
FAILURE = f"h200:SplitRope.time_host_latency:compiled:B4_S25_H32_D64:commit={HEAD}"
BROKEN_GPU = "l40s"  # a runner whose only result file is garbage
CORRUPT_NAME = "0badc0de-existing-py_opt_torch_.venv_bin_python.json"


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", data[16:24])


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    h = generate_history(
        tmp_path_factory.mktemp("synth") / "h",
        n_commits=N_COMMITS,
        steps=STEPS,
        failures=[FAILURE],
        seed=7,
        n_samples=8,
    )
    (h.results_dir / "a100-sxm4-80gb" / CORRUPT_NAME).write_text('{"commit_hash": "0ba')
    broken = h.results_dir / BROKEN_GPU
    broken.mkdir()
    info = json.loads((h.results_dir / "h200" / "machine.json").read_text())
    info.update(machine=BROKEN_GPU, gpu="NVIDIA L40S")
    (broken / "machine.json").write_text(json.dumps(info))
    (broken / CORRUPT_NAME).write_text("\x00\x01 not json")
    return h


@pytest.fixture(scope="module")
def loaded(history):
    return load_results(history.results_dir)


@pytest.fixture(scope="module")
def report(history, loaded):
    return publish.latest_vs_previous(history.results_dir, repo=history.repo)


@pytest.fixture(scope="module")
def site(history, report, tmp_path_factory):
    log = io.StringIO()
    html = tmp_path_factory.mktemp("site") / "html"
    result = publish.publish(
        history.conf, history.results_dir, html, regress_json=report, repo=history.repo, log=log
    )
    return result, log.getvalue()


class _Tables(HTMLParser):
    """Collects <td> attributes and text per table id, and <tr> data attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.table: str | None = None
        self.cells: dict[str, list[list[tuple[dict, str]]]] = {}
        self.row_attrs: dict[str, list[dict]] = {}
        self._td: dict | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table":
            self.table = a.get("id", "")
            self.cells.setdefault(self.table, [])
            self.row_attrs.setdefault(self.table, [])
        elif tag == "tr" and self.table is not None:
            self.cells[self.table].append([])
            self.row_attrs[self.table].append(a)
        elif tag == "td" and self.table is not None:
            self._td, self._text = a, []

    def handle_data(self, data):
        if self._td is not None:
            self._text.append(data)

    def handle_endtag(self, tag):
        if tag == "td" and self._td is not None:
            self.cells[self.table][-1].append((self._td, "".join(self._text).strip()))
            self._td = None
        elif tag == "table":
            self.table = None


def _parse(path: Path) -> _Tables:
    return _parse_text(path.read_text(encoding="utf-8"))


def _parse_text(text: str) -> _Tables:
    t = _Tables()
    t.feed(text)
    return t


# A hand-made history report: a step somewhere in a 3-commit range, and an exact one.
C1, C2, C3, C4, C5, C6 = (str(i) * 40 for i in range(1, 7))
_RANGE_STEP = StepInfo(C1, C4, (C2, C3, C4), 1.2, (1.15, 1.25), 1e-4, True, 4, "regression")
_EXACT_STEP = StepInfo(C5, C6, (C6,), 0.8, (0.78, 0.83), 1e-3, False, 1, "improvement")


def _hand_report() -> Report:
    def row(cls, metric, cells):
        return Row(
            f"bench_kernels.{cls}.{metric}", cls, metric, "blocked", "B1_S1024_H32_D128",
            (("variant", "blocked"), ("shape", "B1_S1024_H32_D128")),
            "seconds", False, 1.03, cells,
        )  # fmt: skip

    return Report(
        head=C6,
        baseline=Baseline("last-n", "20", (C5, C1), {"h200": (C5, C1), "a100": (C5, C1)}),
        status="regression",
        machines=("a100", "h200"),
        rows=(
            row(
                "SplitRope",
                "time_device_cold",
                {
                    "h200": Cell(
                        1.2, "regression", 12e-6, 10e-6, 1e-4, "change-point", _RANGE_STEP
                    ),
                    "a100": Cell(1.0, "ok", 10e-6, 10e-6, None, "change-point"),
                },
            ),
            row(
                "AdaValues9",
                "time_device_cold",
                {
                    "h200": Cell(1.0, "ok", 10e-6, 10e-6, None, "change-point"),
                    "a100": Cell(
                        0.8, "improvement", 8e-6, 10e-6, 1e-3, "change-point", _EXACT_STEP
                    ),
                },
            ),
        ),
    )


# --- plots -----------------------------------------------------------------------------


def test_every_plot_renders_a_nontrivial_png(loaded, report, tmp_path):
    records, _ = loaded
    figures = {
        "matrix": plots.regression_heatmap(report),
        "history": plots.history(records, "split_rope", report=report),
        "speedup": plots.speedup(records, "ada_values9"),
        "bandwidth": plots.copy_bandwidth(records, "split_rope"),
        "roofline": plots.roofline(records, "ada_values9"),
        "cross_gpu": plots.cross_gpu(records, "split_rope", "blocked"),
    }
    for name, fig in figures.items():
        path = plots.save(fig, tmp_path / f"{name}.png")
        width, height = _png_size(path)
        assert width >= 600 and height >= 300, (name, width, height)
        assert path.stat().st_size > 20_000, f"{name}.png is suspiciously small"
        assert all(ax.get_title() or not ax.axison for ax in fig.axes), f"{name}: untitled axes"


def test_history_has_a_panel_per_shape_and_gpu_and_honours_last(loaded, history):
    records, _ = loaded
    n_shapes = len(shapes.ROPE_SHAPES)
    fig = plots.history(records, "split_rope")
    assert len(fig.axes) == n_shapes * len(history.machines)
    assert {ax.get_yscale() for ax in fig.axes} == {"log"}
    ticks = [t.get_text() for t in fig.axes[-1].get_xticklabels()]
    assert len(ticks) == N_COMMITS
    short = plots.history(records, "split_rope", metric=plots.HOST_LATENCY, last=3)
    assert len([t.get_text() for t in short.axes[-1].get_xticklabels()]) == 3
    with pytest.raises(ValueError, match="last"):
        plots.history(records, "split_rope", last=0)


def _axis(fig, title):
    return next(ax for ax in fig.axes if ax.get_title() == title)


def test_history_marks_the_injected_mid_history_step(loaded):
    records, _ = loaded
    fig = plots.history(records, "split_rope")
    # The +40% step at commit MID on a100 per_head B4_S25 must get a step marker
    # ("v") at x=MID in that GPU and shape's panel, and nowhere else in it.
    ax = _axis(fig, "a100-sxm4-80gb · B4_S25_H32_D64")
    marked = {
        int(x) for line in ax.get_lines() if line.get_marker() == "v" for x in line.get_xdata()
    }
    assert marked == {MID}


def test_history_colours_variants_apart_and_labels_each_line(loaded):
    records, _ = loaded
    fig = plots.history(records, "ada_values9")
    ax = fig.axes[0]
    lines = [ln for ln in ax.get_lines() if ln.get_linestyle() == "-"]
    colours = {ln.get_color() for ln in lines}
    assert len(colours) == len(lines) == len(variants.TIMED_VARIANTS["ada_values9"])
    assert plots.FLAG_COLOURS["regression"] not in colours
    assert {t.get_text() for t in ax.texts} == set(
        variants.TIMED_VARIANTS["ada_values9"]
    )  # labels on the lines
    for kernel, spec_variants in plots.KERNEL_VARIANTS.items():
        own = [v for v in spec_variants if v not in plots.PEER_COLOURS]
        assert len(set(plots.variant_colours(kernel, own).values())) == len(own) <= 8


def test_a_single_commit_is_drawn_as_a_dot(loaded):
    records, _ = loaded
    first = min(r.date for r in records)
    fig = plots.history([r for r in records if r.date == first], "split_rope")
    drawn = [ln for ln in fig.axes[0].get_lines() if len(ln.get_xdata()) == 1]
    assert drawn and all(ln.get_markersize() >= 4 for ln in drawn)
    assert "one commit so far" in fig.get_suptitle()
    # Dots at one spot stay apart: a marker of their own each, and each drawn on top
    # of the bigger ones before it.
    dots = [ln for ln in drawn if ln.get_linestyle() == "-"]
    assert len({ln.get_marker() for ln in dots}) == len(dots) > 1
    by_z = sorted(dots, key=lambda ln: ln.get_zorder())
    sizes = [ln.get_markersize() for ln in by_z]
    assert sizes == sorted(sizes, reverse=True) and len(set(sizes)) == len(sizes)


def _no_overlap(boxes) -> bool:
    return not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])


@pytest.mark.parametrize("one_commit", [True, False], ids=["one-commit", "history"])
@pytest.mark.parametrize("one_gpu", [True, False], ids=["one-gpu", "three-gpus"])
def test_plots_fit_their_canvas_and_label_every_panel(loaded, report, one_commit, one_gpu):
    """No title, legend or tick label runs past the PNG's edges (the rendered
    artists' extents against the canvas), each panel labels its top y value, and the
    line-end labels never print over each other."""
    records, _ = loaded
    if one_commit:
        first = min(r.date for r in records)
        records = [r for r in records if r.date == first]
    if one_gpu:
        records = [r for r in records if r.machine == records[0].machine]
    figures = {
        "history": plots.history(records, "split_rope", report=report),
        "history_ada": plots.history(records, "ada_values9"),
        "speedup": plots.speedup(records, "ada_values9"),
        "bandwidth": plots.copy_bandwidth(records, "split_rope"),
        "roofline": plots.roofline(records, "ada_values9"),
        "cross_gpu": plots.cross_gpu(records, "split_rope", "blocked"),
        "matrix": plots.regression_heatmap(report),
    }
    for name, fig in figures.items():
        plots.fit_to_contents(fig)
        assert max(plots.overflow(fig)) <= 0.01, (name, plots.overflow(fig))
        if not name.startswith("history"):
            continue
        renderer = fig.canvas.get_renderer()
        for ax in fig.axes:
            top = ax.get_ylim()[1]
            locs = [t for t in ax.get_yticks() if ax.get_ylim()[0] <= t <= top * 1.0001]
            assert locs and math.isclose(max(locs), top, rel_tol=1e-6), (name, ax.get_title())
            labels = [t.get_window_extent(renderer) for t in ax.texts if t.get_text()]
            assert _no_overlap(labels), (name, ax.get_title())


@pytest.mark.parametrize("data", [(20.0, 50.0), (19.99, 100.0), (1.96, 2.02), (8.04, 611.0)])
def test_history_limits_leave_room_for_the_markers_at_both_ends(data):
    """Limits on the 1-2-5 ticks, the data inside them with room for a marker: a value
    on a tick (20.0 µs, H200 B2_S1536_H32_D128) used to sit on the panel's bottom edge."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.set_yscale("log")
    ax.plot([0, 1], data, "o")
    kernel_history._limits_on_ticks(ax)
    lo, hi = ax.get_ylim()
    assert (
        lo * kernel_history._EDGE_ROOM <= min(data) and max(data) * kernel_history._EDGE_ROOM <= hi
    )
    assert any(math.isclose(lo, s * 10.0**e) for s in style.LOG_SUBS for e in range(-1, 4))
    plt.close(fig)


def test_a_wide_title_would_be_cut_off_without_fitting(loaded):
    """The check above can fail: one GPU at one commit used to cut its title."""
    records, _ = loaded
    first = min(r.date for r in records)
    one = [r for r in records if r.date == first and r.machine == records[0].machine]
    fig = plots.history(one, "split_rope")
    assert max(plots.overflow(fig)) > 0.05
    plots.fit_to_contents(fig)
    assert max(plots.overflow(fig)) <= 0.01


def test_roofline_draws_each_gpus_copy_ceiling(loaded, history):
    records, _ = loaded
    ceilings = plots.copy_ceilings(records, "split_rope")
    assert set(ceilings) == set(history.machines)
    fig = plots.roofline(records, "split_rope")
    for ax in fig.axes:
        machine = ax.get_title().split(" @ ")[0]
        dashed = [ln for ln in ax.get_lines() if ln.get_linestyle() == "--"]
        assert [ln.get_ydata()[0] for ln in dashed] == [pytest.approx(ceilings[machine] / 1e9)]


def test_cross_gpu_view_shows_a_one_gpu_step_on_that_gpu_only(loaded, history):
    records, _ = loaded
    fig = plots.cross_gpu(records, "split_rope", "per_head")
    ax = _axis(fig, "B4_S25_H32_D64")
    by_colour = {ln.get_color(): list(ln.get_ydata()) for ln in ax.get_lines()}
    colours = plots.machine_colours(history.machines)
    for m in history.machines:
        ys = by_colour[colours[m]]
        before, after = sum(ys[:MID]) / MID, sum(ys[MID:]) / (len(ys) - MID)
        if m == "a100-sxm4-80gb":  # +40% time is 1/1.4 of the bandwidth
            assert after / before == pytest.approx(1 / 1.4, rel=0.03)
        else:
            assert after / before == pytest.approx(1.0, rel=0.03)


def test_speedup_follows_the_variant_model(loaded):
    # The synthetic model makes "slab" (1 launch) beat "separate" (9 launches)
    # on every AdaLN shape and GPU, and "eager" (12 launches) lose to it.
    records, _ = loaded
    fig = plots.speedup(records, "ada_values9")
    assert len(fig.axes) == 3  # one panel per GPU with data
    for ax in fig.axes:
        bars = {
            c.get_label(): [p.get_y() + p.get_height() for p in c.patches] for c in ax.containers
        }
        assert bars["slab"] and min(bars["slab"]) > 1.0
        assert bars["eager"] and max(bars["eager"]) < 1.0


def test_heatmap_draws_a_hand_made_report():
    fig = plots.regression_heatmap(_hand_report())
    texts = {t.get_text() for ax in fig.axes for t in ax.texts}
    assert {"1.20", "0.80"} <= texts  # only the flagged cells carry numbers
    assert "steps over the last 20 commits" in fig.get_suptitle()
    vs_commit = dataclasses.replace(_hand_report(), baseline=Baseline("commit", C1, (C1,)))
    assert f"vs commit {C1[:12]}" in plots.regression_heatmap(vs_commit).get_suptitle()


def test_speedup_rejects_a_kernel_without_baseline(loaded):
    with pytest.raises(ValueError, match="nope"):
        plots.speedup(loaded[0], "nope")


# --- the published site ------------------------------------------------------------------


@pytest.mark.slow
def test_publish_survives_a_corrupt_file_and_lists_it(site, history):
    result, log = site
    assert result.asv_ok
    assert (result.html_dir / "index.html").is_file()
    assert result.summary == result.html_dir / "summary.html"
    corrupt = [p for p in result.problems if CORRUPT_NAME in p.path]
    assert {p.machine for p in corrupt} == {"a100-sxm4-80gb", BROKEN_GPU}
    assert CORRUPT_NAME in log
    tables = _parse(result.summary)
    listed = [cells for cells in tables.cells["problems-files"] if cells]
    assert any(cells[0][1] == "a100-sxm4-80gb" and CORRUPT_NAME in cells[2][1] for cells in listed)
    # asv still got every good result: one graph per GPU for the benchmark.
    graphs = result.html_dir / "graphs"
    for m in history.machines:
        assert list(graphs.rglob(f"machine-{m}/**/bench_kernels.SplitRope.time_device_cold.json"))


@pytest.mark.slow
def test_page_lists_every_machine_and_marks_the_broken_one(site, history):
    result, _ = site
    tables = _parse(result.summary)
    rows = {
        a["data-machine"]: cells
        for a, cells in zip(
            tables.row_attrs["machines-table"][1:], tables.cells["machines-table"][1:], strict=True
        )
    }
    assert set(rows) == {*history.machines, BROKEN_GPU}
    assert "no usable results" in rows[BROKEN_GPU][1][1]
    for m in history.machines:
        assert rows[m][1][1].startswith("ok")
        assert rows[m][-2][1] == str(N_COMMITS)  # commits column
    # The broken GPU keeps its column in the matrix, with no verdict in it.
    flags = [
        attrs["data-flag"]
        for cells in tables.cells["matrix-all"]
        for attrs, _ in cells[4:]
        if attrs.get("data-machine") == BROKEN_GPU
    ]
    assert flags and set(flags) <= {"insufficient", "missing"}
    # And the failed benchmark is listed.
    runs = [cells for cells in tables.cells["problems-runs"] if cells]
    assert any(cells[0][1] == "h200" and "time_host_latency" in cells[2][1] for cells in runs)


@pytest.mark.slow
def test_flagged_cells_are_exactly_the_injected_steps(site):
    result, _ = site
    tables = _parse(result.summary)
    flagged = {"regression": set(), "improvement": set()}
    for cells in tables.cells["matrix-all"]:
        if not cells:
            continue
        kernel, metric, variant, shape = (text for _, text in cells[:4])
        for attrs, _text in cells[4:]:
            flag = attrs.get("data-flag")
            if flag in flagged:
                assert f"flag-{flag}" in attrs["class"].split()
                flagged[flag].add((attrs["data-machine"], kernel, metric, variant, shape))

    def expect(step):
        machine, cls, metric, variant, shape = step
        return (machine, plots.ASV_CLASS_KERNEL[cls], metric, variant, shape)

    def derived(step):
        # % of copy bandwidth is computed from the cold time: it shares that cell's verdict.
        return expect((*step[:2], "track_pct_copy_bandwidth", *step[3:]))

    # The benchmark that failed at head after a value before it is one too (asv compare's
    # "introduced a failure").
    broken = tuple(
        FAILURE.split(":")[:1] + FAILURE.split(":")[1].split(".") + FAILURE.split(":")[2:4]
    )
    assert flagged["regression"] == {expect(REGRESSION), derived(REGRESSION), expect(broken)}
    assert flagged["improvement"] == {expect(IMPROVEMENT), derived(IMPROVEMENT)}
    html = result.summary.read_text(encoding="utf-8")
    red = plots.FLAG_COLOURS["regression"]
    assert re.search(r"td\.flag-regression \{[^}]*background: " + re.escape(red), html)


@pytest.mark.slow
def test_flagged_cells_name_their_step(site, history):
    result, _ = site
    head = history.commits[HEAD]
    flagged = [
        (attrs, text)
        for cells in _parse(result.summary).cells["matrix-flagged"]
        for attrs, text in cells[4:]
        if attrs.get("data-flag") in ("regression", "improvement")
    ]
    # The benchmark that failed at head has no step, and no ratio to show.
    failed = [(a, t) for a, t in flagged if "data-first-bad" not in a]
    assert [t for _, t in failed] == ["n/a"]
    assert "failed at head" in failed[0][0]["title"]
    flagged = [f for f in flagged if f not in failed]
    # Two injected cold-time steps and the % of copy bandwidth computed from each.
    assert len(flagged) == 4
    for attrs, text in flagged:
        # Both injected steps are at head, with a run of every commit: exact steps.
        assert attrs["data-first-bad"] == head
        assert head[:8] in text and ".." not in text
        assert re.search(r"[+-]\d+\.\d% \[[+-]\d+\.\d, [+-]\d+\.\d\]", text), text


def test_summary_shows_a_step_range_and_its_size():
    html = page.render_summary(records=[], problems=[], report=_hand_report(), images={})
    cells = {
        attrs["data-machine"]: (attrs, text)
        for row in _parse_text(html).cells["matrix-flagged"]
        for attrs, text in row[4:]
        if attrs.get("data-flag") in ("regression", "improvement")
    }
    attrs, text = cells["h200"]
    assert attrs["data-first-bad"] == C4
    assert f"{C2[:8]}..{C4[:8]} (3 commits)" in text
    assert "+20.0% [+15.0, +25.0]" in text
    attrs, text = cells["a100"]
    assert f"{C6[:8]} -20.0% [-22.0, -17.0], new level seen once" in text
    assert ".." not in text and "commits)" not in text


@pytest.mark.slow
def test_summary_images_exist_and_index_links_to_summary(site):
    result, _ = site
    html = result.summary.read_text(encoding="utf-8")
    srcs = re.findall(r'<img src="([^"]+)"', html)
    # matrix + per kernel: two histories, speedup over each of sglang's kernels (one figure
    # where original and current are one variant), bandwidth, roofline, cross-GPU
    per_kernel = {k: 5 + len(plots.speedup_baselines(k)) for k in cases.KERNELS}
    assert len(srcs) == 1 + sum(per_kernel.values())
    for kernel in cases.KERNELS:
        assert f"summary/speedup_{kernel}.png" in srcs
    for src in srcs:
        assert not src.startswith(("/", "http")), "images must be relative for static hosts"
        assert _png_size(result.html_dir / src)[0] > 0
    index = (result.html_dir / "index.html").read_text(encoding="utf-8")
    assert f'href="{page.SUMMARY_HTML}"' in index


@pytest.mark.slow
def test_index_loads_nothing_from_the_network(site):
    result, _ = site
    index = (result.html_dir / "index.html").read_text(encoding="utf-8")
    tags = re.findall(r"<(?:script|link)\b[^>]*>", index)
    assert not [t for t in tags if re.search(r'(?:src|href)="https?://', t)]
    for tag in tags:
        src = re.search(r'(?:src|href)="(vendor/[^"]+)"', tag)
        pinned = re.search(r'integrity="(sha\d+)-([^"]+)"', tag)
        if src and pinned:
            # A kept integrity attribute must match, or the browser refuses the file.
            data = (result.html_dir / src.group(1)).read_bytes()
            digest = base64.b64encode(hashlib.new(pinned.group(1), data).digest()).decode()
            assert digest == pinned.group(2), src.group(1)


@pytest.mark.slow
def test_publish_survives_unpublishable_machine_and_failed_asv(history, tmp_path):
    # A copy of the results with a broken machine.json (asv publish would crash
    # on it) and, second, without benchmarks.json (asv publish cannot run at all).
    import shutil

    results = tmp_path / "results"
    shutil.copytree(history.results_dir, results)
    (results / "h200" / "machine.json").write_text("{")
    log = io.StringIO()
    res = publish.publish(history.conf, results, tmp_path / "html", repo=history.repo, log=log)
    assert res.asv_ok
    assert "bad-machine-json" in {p.kind for p in res.problems}
    rows = _parse(res.summary).row_attrs["machines-table"][1:]
    assert "h200" in {a["data-machine"] for a in rows}

    (results / "benchmarks.json").unlink()
    res = publish.publish(history.conf, results, tmp_path / "html2", repo=history.repo, log=log)
    assert not res.asv_ok
    assert "asv-publish-failed" in {p.kind for p in res.problems}
    assert res.summary.is_file()
    assert "asv-publish-failed" in res.summary.read_text(encoding="utf-8")


@pytest.mark.slow
def test_cli_publish_computes_the_report(history, tmp_path, capsys):
    from ltx2k import cli

    html = tmp_path / "html"
    code = cli.main(["publish", "--config", str(history.conf), "--html", str(html), "--last", "5"])
    assert code == cli.EXIT_OK
    err = capsys.readouterr().err
    assert "summary.html" in err and CORRUPT_NAME in err
    text = (html / "summary.html").read_text(encoding="utf-8")
    assert 'status-regression">regression' in text  # the injected head step, found by regress


def test_publish_rejects_bad_arguments(history, tmp_path):
    with pytest.raises(ValueError, match="asv_conf"):
        publish.publish(tmp_path / "missing.json", history.results_dir, tmp_path / "h")
    with pytest.raises(ValueError, match="results_dir"):
        publish.publish(history.conf, tmp_path / "missing", tmp_path / "h")
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    with pytest.raises(ValueError, match="regress_json"):
        publish.publish(history.conf, history.results_dir, tmp_path / "h", regress_json=bad)
    with pytest.raises(ValueError, match="regress_json"):
        publish.publish(history.conf, history.results_dir, tmp_path / "h", regress_json=1)
    with pytest.raises(ValueError, match="last"):
        publish.publish(history.conf, history.results_dir, tmp_path / "h", last=0)


@pytest.mark.parametrize(
    "content",
    ['{"head": "abc", "basel', '{"head": "abc", "rows": []}', "[1, 2]", "\x00 not json"],
    ids=["truncated", "missing-keys", "not-an-object", "garbage"],
)
def test_a_corrupt_regress_json_is_an_error_naming_the_file(history, tmp_path, content):
    bad = tmp_path / "corrupt-report.json"
    bad.write_text(content)
    with pytest.raises(ValueError, match=re.escape(repr(str(bad)))):
        publish.publish(history.conf, history.results_dir, tmp_path / "h", regress_json=bad)


def test_a_report_file_loads_as_the_report_it_was(report, tmp_path):
    path = tmp_path / "report.json"
    path.write_text(json.dumps(report.to_json()))
    assert isinstance(report, Report)
    assert publish._load_report(path) == report
    assert publish._load_report(report.to_json()) == report


@pytest.mark.slow
def test_results_for_commits_missing_from_the_repo_are_reported_per_machine(history, tmp_path):
    import subprocess

    other = tmp_path / "other-repo"
    other.mkdir()
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t.invalid", "-C", str(other)]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "unrelated"], check=True)
    res = publish.publish(
        history.conf, history.results_dir, tmp_path / "html", repo=other, log=io.StringIO()
    )
    assert res.asv_ok  # asv itself would crash on a commit it cannot place
    unknown = [p for p in res.problems if p.kind == "unknown-commit"]
    assert sorted(p.machine for p in unknown) == sorted(history.machines)
    assert all(f"{N_COMMITS} result file(s)" in p.message for p in unknown)
    rows = _parse(res.summary).row_attrs["machines-table"][1:]
    assert {a["data-machine"] for a in rows} >= set(history.machines)


# --- the first screen ----------------------------------------------------------------------


def _head_value(records, machine, kernel, metric, variant, shape):
    """The stored median of one cell at that machine's latest commit, in display units."""
    mine = [
        r
        for r in records
        if r.machine == machine
        and plots.split_benchmark(r.benchmark) == (kernel, metric)
        and r.param_dict == {"variant": variant, "shape": shape}
    ]
    rec = max(mine, key=lambda r: r.date)
    return rec, (rec.value * 1e6 if rec.unit == "seconds" else rec.value)


def _fs_cells(tables, machine, kernel, shape_index=0):
    rows = [cells for cells in tables.cells[firstscreen.table_id(machine, kernel)] if cells]
    return {attrs["data-col"]: (attrs, text) for attrs, text in rows[shape_index]}


@pytest.mark.slow
def test_first_screen_shows_the_default_variants_head_medians(site, loaded):
    result, _ = site
    records, _ = loaded
    tables = _parse(result.summary)
    rope = firstscreen.default_variant("split_rope")
    assert rope in variants.TIMED_VARIANTS["split_rope"]
    first_shape = shapes.ROPE_SHAPES[0].label
    for machine in ("h200", "a100-sxm4-80gb"):
        cells = _fs_cells(tables, machine, "split_rope")
        # Columns follow the spec; the kernel-duration column only exists with its metric,
        # a speedup column only where the kernel has its variant (no sglang-current AdaLN).
        assert list(cells) == [
            c.key
            for c in firstscreen.COLUMNS
            if not c.optional and (not c.derived or c.peer_variant("split_rope"))
        ]
        # sglang's current single-tensor RoPE is its original design: one peer, two columns
        assert cells["x-upstream"][0]["data-value"] == cells["x-baseline"][0]["data-value"]
        assert "per_head" in cells["x-upstream"][0]["title"]
        ada = _fs_cells(tables, machine, "ada_values9")
        assert "x-upstream" not in ada and "x-baseline" in ada
        for key, metric in (
            ("cold", "time_device_cold"),
            ("host", "time_host_latency"),
            ("bw", "track_pct_copy_bandwidth"),
        ):
            rec, want = _head_value(records, machine, "split_rope", metric, rope, first_shape)
            attrs, _ = cells[key]
            assert float(attrs["data-value"]) == pytest.approx(want, rel=1e-12)
            # Each number names its result file and machine.
            assert f"machine {machine}" in attrs["title"]
            assert f"results/{machine}/{rec.commit[:8]}-" in attrs["title"]
        _, eager = _head_value(
            records, machine, "split_rope", "time_device_cold", "eager", first_shape
        )
        _, mine = _head_value(records, machine, "split_rope", "time_device_cold", rope, first_shape)
        assert float(cells["x-eager"][0]["data-value"]) == pytest.approx(eager / mine)
        # The fused prologue's table: speedup over sglang's current design (row), and over
        # eager and torch.compile as LTX-2 runs them, the unfused prologue.
        kernel = "qknorm_rope_pair"
        shape = cases.KERNELS[kernel].gpu_shapes[0].label
        fused = _fs_cells(tables, machine, kernel)
        assert {"x-baseline", "x-upstream", "x-eager", "x-compiled"} <= set(fused)
        default = firstscreen.default_variant(kernel)
        _, mine = _head_value(records, machine, kernel, "time_device_cold", default, shape)
        for key, peer in (
            ("x-upstream", "row"),
            ("x-eager", "unfused_eager"),
            ("x-compiled", "unfused_compiled"),
        ):
            _, theirs = _head_value(records, machine, kernel, "time_device_cold", peer, shape)
            assert float(fused[key][0]["data-value"]) == pytest.approx(theirs / mine), key
            assert peer in fused[key][0]["title"]


@pytest.mark.slow
def test_status_line_names_the_gpu_and_links_to_the_flagged_cell(site, history):
    result, _ = site
    text = result.summary.read_text(encoding="utf-8")
    line = re.search(r'<p id="status-line"[^>]*>(.*?)</p>', text, re.S).group(1)
    machine = REGRESSION[0]
    # The cold time and the % of copy bandwidth computed from it.
    assert f"2 regressions</a> on <b>{machine}</b>" in line
    assert history.commits[HEAD][:8] in line and "0 elsewhere" in line
    # The link goes to the flagged cell: the first screen's, or the matrix's for a variant
    # the first screen does not show.
    target = re.search(r'href="#([^"]+)"', line).group(1)
    assert re.search(
        rf'<td[^>]*id="{re.escape(target)}"[^>]*data-flag|'
        rf'<td[^>]*data-flag="regression"[^>]*id="{re.escape(target)}"',
        text,
    )
    assert REGRESSION[3] in target and machine in target


def _with_metric(records, metric):
    extra = [
        dataclasses.replace(r, benchmark=r.benchmark.rsplit(".", 1)[0] + "." + metric)
        for r in records
        if r.benchmark.endswith(".time_device_cold")
    ]
    return list(records) + extra


@pytest.mark.parametrize(
    ("metric", "key", "after"),
    [("time_kernel", "kernel", "cold"), ("track_host_calibrated", "host-cal", "host")],
)
def test_optional_columns_appear_with_their_metric(loaded, metric, key, after):
    records, _ = loaded
    machines = ["h200"]
    plain = firstscreen.build_views(records, None, machines)
    assert key not in [c.key for c in plain[0].tables[0].columns]
    views = firstscreen.build_views(_with_metric(records, metric), None, machines)
    keys = [c.key for c in views[0].tables[0].columns]
    assert keys.index(after) < keys.index(key)


def test_first_run_shows_numbers_and_says_nothing_to_compare(loaded):
    records, _ = loaded
    first = min(r.date for r in records)
    one = [r for r in records if r.date == first and r.machine == "h200"]
    html = page.render_summary(records=one, problems=[], report=None, images={})
    assert "First commit on h200: nothing to compare yet" in html
    assert "first commit on this GPU: nothing to compare yet" in html
    tables = _parse_text(html)
    cells = _fs_cells(tables, "h200", "split_rope")
    assert float(cells["cold"][0]["data-value"]) > 0
    assert 'data-points="1"' in html  # one-point sparklines are drawn, and say so
    assert "one point: a line needs a second commit" in html


def test_problems_label_counts_what_the_section_lists():
    from ltx2k.history.records import Problem

    probs = [Problem("p", "h200", "skipped", "s")] * 3 + [Problem("p", "h200", "corrupt", "c")]
    html = page.render_summary(records=[], problems=probs, report=None, images={})
    assert ">problems (1) · 3 skipped</a>" in html
    assert "3 skipped combination group(s)" in html


# --- links and provenance --------------------------------------------------------------------


@pytest.mark.parametrize(
    "remote",
    [
        "git@github.com:owner/proj.git",
        "git@github.com:owner/proj",
        "ssh://git@github.com/owner/proj.git",
        "ssh://git@github.com:22/owner/proj.git",
        "https://github.com/owner/proj.git",
        "https://github.com/owner/proj",
        "https://user:s3cret@github.com/owner/proj.git",
        "git://github.com/owner/proj.git",
    ],
)
def test_github_commit_base_from_every_remote_form(remote):
    assert links.github_commit_base(remote) == "https://github.com/owner/proj/commit/"


@pytest.mark.parametrize(
    "remote",
    [None, "", "/srv/git/proj.git", "https://gitlab.com/owner/proj.git", "git@github.com:proj.git",
     "file:///tmp/x.git", "https://github.com/owner/proj/extra"],
)  # fmt: skip
def test_github_commit_base_refuses_what_it_cannot_map(remote):
    assert links.github_commit_base(remote) is None


def test_commit_url_base_prefers_the_config_then_the_origin_remote(tmp_path):
    import subprocess

    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    assert links.commit_url_base("#", repo) is None  # no remote, no absolute config value
    assert links.commit_url_base("../commit/", repo) is None
    subprocess.run(
        ["git", "-C", str(repo), "remote", "add", "origin", "git@github.com:o/r.git"], check=True
    )
    assert links.commit_url_base("#", repo) == "https://github.com/o/r/commit/"
    mine = "https://git.example.org/r/commit/"
    assert links.commit_url_base(mine, repo) == mine
    assert links.commit_url(mine, "abc") == mine + "abc"


def test_asv_graph_url_uses_asvs_hash_format():
    url = links.asv_graph_url(
        "bench_kernels.SplitRope.time_device_cold",
        (("variant", "blocked"), ("shape", "B1_S1024_H32_D128")),
        machine="a100-sxm4-80gb",
        commits=("abc", "def"),
    )
    assert url == (
        "index.html#bench_kernels.SplitRope.time_device_cold?machine=a100-sxm4-80gb"
        "&p-variant='blocked'&p-shape='B1_S1024_H32_D128'&commits=abc-def"
    )


def test_flagged_cells_link_their_commits_with_the_configured_base():
    base = "https://github.com/o/r/commit/"
    html = page.render_summary(
        records=[], problems=[], report=_hand_report(), images={}, commit_base=base
    )
    for sha in (C2, C4, C6):  # the range's ends and the exact step
        assert f'href="{base}{sha}"' in html
    plain = page.render_summary(records=[], problems=[], report=_hand_report(), images={})
    assert "/commit/" not in plain  # no base: hashes without links


@pytest.mark.slow
def test_publish_links_commits_and_names_files_and_gpus(history, tmp_path):
    import shutil
    import subprocess

    from ltx2k.history.tags import TAG_KEY

    results = tmp_path / "results"
    shutil.copytree(history.results_dir, results)
    shutil.rmtree(results / BROKEN_GPU)
    (results / "a100-sxm4-80gb" / CORRUPT_NAME).unlink()
    head_file = next((results / "h200").glob(f"{history.commits[HEAD][:8]}-*.json"))
    data = json.loads(head_file.read_text())
    uuid = "GPU-0123abcd-4567-89ef-0123-456789abcdef"
    data[TAG_KEY] = {
        "version": 1,
        "benchmarks": {
            name: {"gpu_index": 3, "gpu_uuid": uuid, "gpu_name": "NVIDIA H200", "mode": "shared",
                   "concurrent_gpus": 2}
            for name in data["results"]
        },
    }  # fmt: skip
    head_file.write_text(json.dumps(data))
    repo = tmp_path / "repo"
    subprocess.run(["git", "clone", "-q", str(history.repo), str(repo)], check=True)
    subprocess.run(
        ["git", "-C", str(repo), "remote", "set-url", "origin", "https://github.com/o/r.git"],
        check=True,
    )
    res = publish.publish(history.conf, results, tmp_path / "html", repo=repo, log=io.StringIO())
    assert res.asv_ok
    text = res.summary.read_text(encoding="utf-8")
    head = history.commits[HEAD]
    assert f'href="https://github.com/o/r/commit/{head}"' in text
    index_json = json.loads((res.html_dir / "index.json").read_text())
    assert index_json["show_commit_url"] == "https://github.com/o/r/commit/"  # asv's pages too
    # The environment line and every first-screen value of the tagged GPU name the UUID.
    assert f'measured on <span data-env="gpu_uuid">GPU 3 ({uuid})</span>' in text
    tables = _parse_text(text)
    attrs, _ = _fs_cells(tables, "h200", "split_rope")["cold"]
    assert (
        f"GPU 3 {uuid}" in attrs["title"]
        and f"file results/h200/{head_file.name}" in attrs["title"]
    )
    for field in ("driver", "cuda", "torch", "triton"):
        assert f'data-env="{field}"' in text


# --- publish is all or nothing -----------------------------------------------------------------


def _site_state(html: Path) -> dict[str, str] | None:
    """Every file of the site with its hash; None when html/ does not exist."""
    if not html.exists():
        return None
    return {
        p.relative_to(html).as_posix(): hashlib.sha1(p.read_bytes()).hexdigest()
        for p in sorted(html.rglob("*"))
        if p.is_file()
    }


def _complete(html: Path) -> bool:
    """A finished site: asv's post-processed index, the summary and every image it shows."""
    index, summary = html / "index.html", html / page.SUMMARY_HTML
    if not (index.is_file() and summary.is_file() and (html / "index.json").is_file()):
        return False
    if asv_site.SUMMARY_LINK_ID not in index.read_text(encoding="utf-8"):
        return False
    text = summary.read_text(encoding="utf-8")
    srcs = re.findall(r'<img src="([^"]+)"', text)
    return text.rstrip().endswith("</html>") and srcs and all((html / s).is_file() for s in srcs)


@pytest.fixture(scope="module")
def small_history(tmp_path_factory):
    return generate_history(
        tmp_path_factory.mktemp("small") / "h", n_commits=3, machines=("h200",), n_samples=3
    )


def _publish_cmd(h, html: Path) -> list[str]:
    import sys

    code = (
        "import io, sys\n"
        "from ltx2k.report import publish\n"
        "publish.publish(sys.argv[1], sys.argv[2], sys.argv[3], repo=sys.argv[4],"
        " log=io.StringIO())\n"
    )
    return [sys.executable, "-c", code, str(h.conf), str(h.results_dir), str(html), str(h.repo)]


@pytest.mark.slow
def test_a_killed_publish_leaves_the_old_site_or_the_new_one(small_history, tmp_path):
    import shutil
    import signal
    import subprocess
    import time

    h = small_history
    html = tmp_path / "html"

    def run(delay: float | None) -> None:
        proc = subprocess.Popen(_publish_cmd(h, html))
        if delay is None:
            assert proc.wait(timeout=300) == 0
            return
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)

    # Killed before html/ ever existed: nothing, or a complete site.
    start = time.monotonic()
    run(None)
    full = time.monotonic() - start
    assert _complete(html)
    shutil.rmtree(html)
    run(full * 0.6)
    assert _site_state(html) is None or _complete(html)

    run(None)
    old = _site_state(html)
    seen_new = seen_old = 0
    for frac in (0.2, 0.5, 0.8, 0.95, 1.05):
        run(full * frac)
        now = _site_state(html)
        assert now is not None, f"killed at {frac:.0%} of a publish: html/ is gone"
        if now == old:
            seen_old += 1
        else:
            assert _complete(html), f"killed at {frac:.0%}: html/ is neither old nor new: {now}"
            seen_new += 1
            old = now
    assert seen_old, "no kill landed before the swap: the test did not test anything"
    # The next publish removes what the killed ones left next to html/.
    run(None)
    assert _complete(html)
    assert not list(tmp_path.glob(".html.publish-*"))


def test_swap_in_without_an_atomic_exchange_keeps_or_restores_the_old_site(tmp_path, monkeypatch):
    import subprocess

    html = tmp_path / "html"
    html.mkdir()
    (html / "index.html").write_text("old")
    monkeypatch.setattr(publish, "_rename_exchange", lambda a, b: False)
    work = tmp_path / ".html.publish-1-a"
    (work / "html").mkdir(parents=True)
    (work / "html" / "index.html").write_text("new")
    publish.swap_in(work / "html", html)
    assert (html / "index.html").read_text() == "new"
    assert (work / "old" / "index.html").read_text() == "old"
    # A publish killed between the two renames: html/ is missing, the old site is aside.
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = tmp_path / f".html.publish-{dead.pid}-b"
    (stale / "old").mkdir(parents=True)
    (stale / "old" / "index.html").write_text("older")
    import shutil

    shutil.rmtree(html)
    assert publish.sweep_stale_builds(html) == [stale]
    assert (html / "index.html").read_text() == "older"
    assert not stale.exists()


def test_a_live_publishs_build_folder_is_left_alone(tmp_path):
    import os

    live = tmp_path / f".html.publish-{os.getpid()}-c"
    live.mkdir()
    assert publish.sweep_stale_builds(tmp_path / "html") == []
    assert live.is_dir()


def test_a_missing_default_variant_is_stood_in_for_by_its_nearest_relative(loaded):
    records, _ = loaded
    default = firstscreen.default_variant("split_rope")
    without = [r for r in records if r.param_dict.get("variant") != default]
    (view,) = firstscreen.build_views(without, None, ["h200"])
    table = next(t for t in view.tables if t.kernel == "split_rope")
    assert table.default == default and table.variant != default
    # The former default stands in where it has results, else a relative by name.
    assert table.variant == variants.FORMER_DEFAULTS["split_rope"][0]
    html = page.render_summary(records=without, problems=[], report=None, images={})
    assert f"the default, {default}, has no results at this commit" in html


def _view(machine, n_commits):
    commits = tuple(f"{i:02d}" * 20 for i in range(n_commits))
    return firstscreen.MachineView(
        machine=machine, info={}, commits=commits, n_commits=n_commits, date=None, tables=[],
        gpu_ids=(), regressions=[], improvements=[],
    )  # fmt: skip


def _report_flags(**flags):
    from types import SimpleNamespace

    cells = {m: SimpleNamespace(flag=f) for m, f in flags.items()}
    return SimpleNamespace(rows=[SimpleNamespace(cells=cells)], head="01" * 20)


def test_status_line_does_not_call_a_gpu_without_verdicts_clean():
    line = firstscreen.status_line([_view("h200", 2)], _report_flags(h200="insufficient"), None)
    assert "No regressions" not in line
    assert "Too little history to judge yet on h200 (2 commits)" in line
    mixed = firstscreen.status_line(
        [_view("h200", 2), _view("a100", 9), _view("h100", 1)],
        _report_flags(h200="insufficient", a100="unchanged", h100="insufficient"),
        None,
    )
    assert "No regressions on 1 GPU(s)" in mixed  # only the GPU that was judged
    assert "too little history to judge yet on h200 (2 commits)" in mixed
    assert "first commit on h100: nothing to compare yet" in mixed


# --- Markdown tables ------------------------------------------------------------------------


def _md_tables(text: str) -> list[list[list[str]]]:
    """Every table in *text*: its lines' cells, split on unescaped pipes."""
    tables, current = [], []
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            assert line.endswith("|"), line
            current.append([c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]])
        elif current:
            tables.append(current)
            current = []
    return tables


def _launch_report(machines: tuple[str, ...], *, with_rows: bool) -> Report:
    step = StepInfo(
        last_good="a" * 40, first_bad="b" * 40, range=("b" * 40,), ratio=1.2,
        ci=(1.1, 1.3), p_value=1e-6, persists=True, runs_after=3, direction="regression",
    )  # fmt: skip
    rows = []
    for launch in variants.LAUNCH_PATHS if with_rows else ():
        shape = "B1_S1_H32_D128"
        cell = Cell(1.2, "regression", 1.2e-5, 1e-5, 1e-6, "change-point", step=step)
        rows.append(
            Row(
                benchmark="bench_kernels.SplitRope.time_host_launch",
                kernel="SplitRope",
                metric="time_host_launch",
                variant=None,
                shape=shape,
                params=(("launch", launch), ("shape", shape)),
                unit="seconds",
                higher_is_better=False,
                threshold=1.03,
                cells={m: cell for m in machines},
            )
        )
    return Report(
        head="f" * 40,
        baseline=Baseline(kind="last-n", ref="20", commits=()),
        status="regression" if rows else "insufficient",
        machines=machines,
        rows=tuple(rows),
    )


@pytest.mark.parametrize(
    "machines, with_rows",
    [((), False), (("h200",), False), (("a100", "h200"), True)],
    ids=["no-gpu", "no-rows", "launch-rows"],
)
def test_every_markdown_table_is_well_formed(machines, with_rows):
    from ltx2k.report.markdown import render_markdown

    tables = _md_tables(render_markdown(_launch_report(machines, with_rows=with_rows)))
    assert tables
    for t in tables:
        header, sep, *body = t
        assert len(sep) == len(header) and all(re.fullmatch(r"-{3,}:?", c) for c in sep), t
        assert all(len(r) == len(header) for r in body), t
        assert all(header), t  # no empty header cell


def test_the_launch_path_is_a_column_wherever_a_launch_metric_appears():
    from ltx2k.report.markdown import render_markdown

    report = _launch_report(("h200",), with_rows=True)
    for t in _md_tables(render_markdown(report)):
        header, _, *body = t
        col = header.index("launch path")
        assert sorted(r[col] for r in body) == sorted(variants.LAUNCH_PATHS)
        assert len({tuple(r) for r in body}) == len(body)  # no two rows look alike
    assert [r["launch"] for r in report.to_json()["rows"]] == list(variants.LAUNCH_PATHS)
    html = page._matrix_table(report.rows, report.machines, "matrix-all")
    assert "<th>launch path</th>" in html
    assert all(f"<td>{launch}</td>" in html for launch in variants.LAUNCH_PATHS)


def _cell_of(table, shape, key):
    return next(c for s, cells in table.rows if s == shape for c in cells if c.column.key == key)


def test_first_screen_compares_with_sglangs_original_and_explains_each_unit(loaded):
    records, _ = loaded
    view = firstscreen.build_views(_with_metric(records, "track_host_calibrated"), None, ["h200"])[
        0
    ]
    for t in view.tables:
        baseline = variants.BASELINE_VARIANT[t.kernel]
        shape = t.rows[0][0]
        _, peer = _head_value(records, "h200", t.kernel, "time_device_cold", baseline, shape)
        _, mine = _head_value(records, "h200", t.kernel, "time_device_cold", t.variant, shape)
        assert _cell_of(t, shape, "x-baseline").value == pytest.approx(peer / mine)
        html_text = markup._table_html(view, t, None)
        explained = re.findall(r'<span class="explain">([^<]+)</span>', html_text)
        assert len(explained) == len(t.columns)  # every column says what its number is
        by_key = dict(zip((c.key for c in t.columns), explained, strict=True))
        assert baseline in by_key["x-baseline"] and "÷" in by_key["x-baseline"]
        assert "torch.add calls" in by_key["host-cal"]  # the unit "calls" explained
        # The hover of a speedup names what it divides, and its source once.
        title = _cell_of(t, shape, "x-eager").title
        assert "cold-L2 device time" in title
        assert len(re.findall(r"machine h200", title)) == 1


def test_a_metric_not_taken_at_a_shape_is_not_measured_not_na(loaded):
    records, _ = loaded
    first, second = shapes.ROPE_SHAPES[0].label, shapes.ROPE_SHAPES[1].label
    kernel_time = [
        dataclasses.replace(r, benchmark=r.benchmark.rsplit(".", 1)[0] + ".time_kernel")
        for r in records
        if r.benchmark.endswith("SplitRope.time_device_cold")
        and r.param_dict.get("shape") in (first, second)
    ]
    # At the second shape the metric was taken but failed at every commit: that is n/a.
    kernel_time = [
        dataclasses.replace(r, value=None) if r.param_dict["shape"] == second else r
        for r in kernel_time
    ]
    view = firstscreen.build_views(list(records) + kernel_time, None, ["h200"])[0]
    (t,) = [t for t in view.tables if t.kernel == "split_rope"]
    html_text = markup._table_html(view, t, None)
    cells = dict(re.findall(r'<tr data-shape="([^"]+)">(.*?)</tr>', html_text))

    def kernel_cell(shape):
        return re.search(r'data-col="kernel".*?class="v"[^>]*>([^<]+)<', cells[shape]).group(1)

    assert kernel_cell(first).endswith("µs")
    assert kernel_cell(second) == "n/a"
    third = shapes.ROPE_SHAPES[2].label
    assert kernel_cell(third) == firstscreen.NOT_MEASURED


def test_verdicts_are_told_in_plain_words():
    assert plots.FLAG_WORDS[plots.FLAG_INSUFFICIENT] == "not enough history yet"
    assert "not enough history yet" in page._status_badge("insufficient")
    cell = Cell(None, plots.FLAG_INSUFFICIENT, 1e-5, None, None, "none")
    assert 'title="not enough history yet:' in page._cell(cell, "h200", "seconds")


def test_speedups_are_over_sglangs_original_and_current_kernels():
    """Each kernel's speedup figures: over sglang's original kernel, and over its current
    design where the suite times it; one figure where the two are one variant."""
    assert plots.speedup_baselines("split_rope") == {"per_head": "sglang's original and current"}
    assert plots.speedup_baselines("ada_values9") == {"separate": "sglang's original"}
    assert plots.speedup_baselines("qknorm_rope_pair") == {"row": "sglang's original and current"}
    for kernel in cases.KERNELS:
        assert variants.BASELINE_VARIANT[kernel] in plots.speedup_baselines(kernel)
    upstream = firstscreen.Column("x", "x", "time_device_cold", "×", peer="upstream")
    assert upstream.peer_variant("split_rope_pair") == "row"
    assert upstream.peer_variant("ada_values9") is None
    eager = next(c for c in firstscreen.COLUMNS if c.key == "x-eager")
    assert eager.peer_variant("qknorm_rope_pair") == "unfused_eager"
    assert eager.peer_variant("split_rope_pair") == "eager"


def test_a_kernel_whose_module_is_not_installed_shows_the_datas_default(monkeypatch):
    from ltx2k.report.firstscreen import views

    spec = cases.KERNELS["qknorm_rope_pair"]
    gone = dataclasses.replace(spec, triton_module="ltx2k.kernels.no_such_module")
    monkeypatch.setitem(cases.KERNELS, "qknorm_rope_pair", gone)
    views.default_variant.cache_clear()
    try:
        assert views.default_variant("qknorm_rope_pair") == "tiled_pdl"
    finally:
        views.default_variant.cache_clear()


def test_first_screen_sparklines_draw_only_the_newest_benchmark_version(loaded):
    """A benchmark whose code changed three commits before head (asv stores a new version
    hash): each sparkline keeps the new code's runs and leaves the old code's out, as asv
    publish draws one version; the derived speedups are of one version too."""
    import dataclasses

    records, _ = loaded
    h200 = [r for r in records if r.machine == "h200"]
    dates = sorted({r.date for r in h200})
    new_from = dates[-3]
    changed = [
        dataclasses.replace(
            r,
            bench_version="new" if r.date >= new_from else "old",
            value=r.value if r.date >= new_from or r.value is None else r.value * 0.5,
        )
        for r in h200
    ]
    (view,) = firstscreen.build_views(changed, None, ["h200"])
    (plain,) = firstscreen.build_views(h200, None, ["h200"])
    assert view.commits == plain.commits and len(view.commits) > 3
    drawn = 0
    for table, before in zip(view.tables, plain.tables, strict=True):
        for (_, cells), (_, cells_before) in zip(table.rows, before.rows, strict=True):
            for cell, cell_before in zip(cells, cells_before, strict=True):
                assert all(v is None for v in cell.history[:-3]), (table.kernel, cell)
                assert cell.history[-3:] == cell_before.history[-3:]
                drawn += sum(v is not None for v in cell.history)
    assert drawn > 0


@pytest.mark.parametrize(
    "value, shown",
    [(45.67, "45.7%"), (0.1, "0.1%"), (0.0, "0.0%"), (0.000123, "0.00012%"), (0.05, "0.05%")],
)
def test_a_small_share_of_copy_bandwidth_is_not_shown_as_zero(value, shown):
    from ltx2k.report.markdown import format_value

    assert firstscreen.fmt(value, "%") == shown
    assert format_value(value, "%") == shown
