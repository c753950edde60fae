"""The first screen's data: its columns, and per GPU a table per kernel of the latest
values with their history, verdict, step and source file."""

from __future__ import annotations

import functools
import importlib
import inspect
import math
import os
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ltx2k.analysis.model import Cell, Report, Row, StepInfo
from ltx2k.analysis.thresholds import Thresholds
from ltx2k.report import links, plots
from ltx2k.runner import asv_compat
from ltx2k.workload import cases, variants

# How many of a GPU's commits a sparkline spans (the regress window's length).
SPARK_COMMITS = 20


@dataclass(frozen=True)
class Column:
    """One first-screen column: a metric of the default variant, or a speedup over a peer.

    ``peer`` set: the value is the peer variant's ``metric`` divided by the
    default variant's (how many times faster the default is). ``optional``:
    the column is shown only when some result has the metric.
    """

    key: str
    title: str
    metric: str
    unit: str  # display unit: "µs", "%", "×"
    peer: str | None = None
    optional: bool = False
    # What the number is, in its unit, shown under the title; "{peer}" is the peer variant.
    explain: str = ""

    @property
    def derived(self) -> bool:
        return self.peer is not None

    def peer_variant(self, kernel: str) -> str | None:
        """The variant this column divides by for *kernel*, None where it has none: sglang's
        original (BASELINE_PEER) and current (UPSTREAM_PEER) kernels are per kernel, and so
        is the peer a kernel is compared with as "eager" or "torch.compile"
        (variants.SPEEDUP_PEERS: the fused prologue's is the unfused one)."""
        if self.peer == BASELINE_PEER:
            return variants.BASELINE_VARIANT.get(kernel)
        if self.peer == UPSTREAM_PEER:
            return variants.UPSTREAM_CURRENT_VARIANT.get(kernel)
        if self.peer is None:
            return None
        return variants.SPEEDUP_PEERS.get(kernel, {}).get(self.peer, self.peer)

    def explanation(self, kernel: str) -> str:
        return self.explain.format(peer=self.peer_variant(kernel) or "")


# Column.peer for "the kernel's baseline variant" (variants.BASELINE_VARIANT: sglang's
# original kernel) and for sglang's current design (variants.UPSTREAM_CURRENT_VARIANT),
# which differ per kernel.
BASELINE_PEER = "baseline"
UPSTREAM_PEER = "upstream"
_SPEEDUP = "{peer}'s cold-L2 device time ÷ this variant's (higher: this one is faster)"


# The first screen's columns, in order. A metric the results do not have
# leaves its column empty (n/a), unless the column is optional.
COLUMNS: tuple[Column, ...] = (
    Column("cold", "device time, cold L2", "time_device_cold", "µs",
           explain="µs per launch on the GPU, inputs rotated past L2 (CUDA graph, events)"),
    Column("kernel", "kernel duration", "time_kernel", "µs", optional=True,
           explain="µs of the kernels alone per call (CUPTI), no gaps between them"),
    Column("bw", "% of copy bandwidth", "track_pct_copy_bandwidth", "%",
           explain="bytes moved ÷ cold time, as % of this GPU's measured copy bandwidth"),
    Column("x-baseline", "speedup over sglang's original", "time_device_cold", "×",
           peer=BASELINE_PEER, explain=_SPEEDUP),
    Column("x-upstream", "speedup over sglang's current", "time_device_cold", "×",
           peer=UPSTREAM_PEER, explain=_SPEEDUP),
    Column("x-eager", "speedup over eager", "time_device_cold", "×", peer="eager",
           explain=_SPEEDUP),
    Column("x-compiled", "speedup over torch.compile", "time_device_cold", "×",
           peer="compiled", explain=_SPEEDUP.replace("{peer}", "torch.compile")),
    Column("host", "host latency", "time_host_latency", "µs",
           explain="µs per call from Python, launch included, as a caller gets it"),
    # Host latency in units of a reference call timed in the same processes (host-bound
    # shapes of the default variant only): comparable across runners and runs.
    Column("host-cal", "host latency, calibrated", "track_host_calibrated", "calls",
           optional=True,
           explain="host latency in eager torch.add calls timed in the same process "
           "(2 calls: as long as two such adds)"),
)  # fmt: skip

_THRESHOLDS = Thresholds()


def higher_is_better(column: Column) -> bool:
    """Speedups: higher. Metrics: the direction regress judges them by (any kernel)."""
    return True if column.derived else _THRESHOLDS.higher_is_better(f"*.{column.metric}")


@functools.cache
def default_variant(kernel: str) -> str | None:
    """The ``variant=`` default of the kernel's public function, None for an unknown kernel."""
    spec = cases.KERNELS.get(kernel)
    if spec is None:
        return None
    try:
        fn = getattr(importlib.import_module(spec.triton_module), spec.public_fn)
    except ModuleNotFoundError:  # the kernel's module is not installed: the data's default
        return variants.DEFAULT_VARIANT.get(kernel)
    param = inspect.signature(fn).parameters.get("variant")
    return None if param is None or param.default is inspect.Parameter.empty else param.default


def _shape_order(kernel: str) -> list[str]:
    spec = cases.KERNELS.get(kernel)
    return [s.label for s in spec.gpu_shapes + spec.cpu_shapes] if spec else []


def anchor(prefix: str, machine: str, benchmark: str, params) -> str:
    """A stable HTML id for one cell of one GPU (used by the status line's links)."""
    p = "-".join(v for _, v in sorted(dict(params).items()))
    return re.sub(r"[^A-Za-z0-9_-]+", "-", f"{prefix}-{machine}-{benchmark}-{p}").strip("-")


# --- values and provenance ----------------------------------------------------------


def display(value: float | None, unit: str) -> float | None:
    """A stored value in display units (µs for seconds)."""
    if value is None or not math.isfinite(value):
        return None
    return value * 1e6 if unit == "seconds" else value


def fmt(value: float | None, unit: str) -> str:
    if value is None or not math.isfinite(value):
        return "n/a"
    if unit == "×":
        return f"{value:.2f}×"
    if unit == "%":
        # Two significant digits under 0.1%: the CPU interpreter's shares (~1e-4 %) are not 0.
        return f"{value:.1f}%" if value == 0 or abs(value) >= 0.1 else f"{value:.2g}%"
    if unit == "µs":
        v, suffix = (value, "µs") if value < 1000 else (value / 1000, "ms")
        # three significant digits, trailing zeros kept so columns line up
        digits = 0 if v >= 100 else 1 if v >= 10 else 2
        return f"{v:.{digits}f} {suffix}"
    return f"{value:.4g} {unit}".strip()


@dataclass
class Provenance:
    """Which file a value came from: the result file, relative to the results folder."""

    results_label: str = "results"
    results_dir: Path | None = None
    _tags: dict = field(default_factory=dict)

    def path(self, record) -> str:
        rel = asv_compat.result_filename(record.machine, record.commit, record.env)
        return f"{self.results_label}/{rel.replace(chr(92), '/')}"

    def tag(self, record) -> Mapping:
        """The GPU identity (ltx2k run, shard-run) in the file for this benchmark ({} if none)."""
        if self.results_dir is None:
            return {}
        path = self.results_dir / asv_compat.result_filename(
            record.machine, record.commit, record.env
        )
        if path not in self._tags:
            from ltx2k.history.tags import read_tags

            try:
                self._tags[path] = read_tags(path)
            except (OSError, ValueError):
                self._tags[path] = {}
        tag = self._tags[path].get(record.benchmark)
        return tag if isinstance(tag, Mapping) else {}

    def describe(self, record) -> str:
        what = (
            f"median of {len(record.samples)} samples"
            if record.samples
            else ("value" if record.unit != "seconds" else "median")
        )
        parts = [
            what,
            f"file {self.path(record)}",
            f"machine {record.machine}",
            f"commit {record.commit[:8]}",
        ]
        tag = self.tag(record)
        if tag.get("gpu_uuid"):
            parts.append(f"GPU {tag.get('gpu_index', '?')} {tag['gpu_uuid']}")
        return ", ".join(parts)


# --- the model --------------------------------------------------------------------------


@dataclass
class ScreenCell:
    column: Column
    value: float | None  # display units
    flag: str | None  # the report's verdict; None for derived columns or without a report
    step: StepInfo | None
    history: tuple[float | None, ...]  # display units, oldest first, the last is the head
    title: str  # provenance, shown on hover
    link: str | None  # asv's graph of this cell
    cell_id: str
    benchmark: str = ""
    # "index UUID" of the GPU that measured this value (ltx2k run, shard-run), if recorded
    gpu_id: str = ""
    not_measured: bool = False  # no result has this metric at this shape: not a failure


@dataclass
class KernelTable:
    kernel: str
    variant: str | None  # the variant shown
    columns: list[Column]
    rows: list[tuple[str, list[ScreenCell]]]  # (shape, cells in column order)
    default: str | None = None  # the kernel's default, when another variant stands in for it


@dataclass
class MachineView:
    machine: str
    info: Mapping
    commits: tuple[str, ...]  # this GPU's last commits, oldest first
    n_commits: int  # all of this GPU's commits with results
    date: int | None
    tables: list[KernelTable]
    gpu_ids: tuple[str, ...]  # "index UUID" of the GPUs that measured the head commit (result tags)
    regressions: list[tuple[Row, Cell]]
    improvements: list[tuple[Row, Cell]]

    @property
    def head(self) -> str | None:
        return self.commits[-1] if self.commits else None

    @property
    def first_run(self) -> bool:
        return self.n_commits == 1


def _params_key(params) -> frozenset:
    return frozenset(dict(params).items())


def _by_commit(records: Sequence, variant: str) -> dict:
    return {r.commit: r for r in records if r.param_dict.get("variant") == variant}


def _screen_cell(
    col, recs, variant, window, machine, rows_by_key, prov, *, kernel="", measured=True
) -> ScreenCell:
    """One first-screen cell: the head value, its history, verdict, provenance and link.

    *measured*: whether any result (failed ones included) has the column's metric at
    this shape; a metric not taken there says so instead of "n/a"."""
    if not measured:
        return ScreenCell(col, None, None, None, (), f"{col.metric} is not taken at this shape",
                          None, "", not_measured=True)  # fmt: skip
    mine = _by_commit(recs[col.metric], variant)
    head = window[-1] if window else None
    rec = mine.get(head)
    if col.derived:
        peer_variant = col.peer_variant(kernel)
        peer = _by_commit(recs[col.metric], peer_variant)

        def ratio(c):
            a, b = peer.get(c), mine.get(c)
            return a.value / b.value if a and b and b.value else None

        prec = peer.get(head)
        if rec and prec:
            # Both usually come from one result file: name it once.
            sources = dict.fromkeys((prov.describe(prec), prov.describe(rec)))
            title = (
                f"{col.explanation(kernel)}: {peer_variant} "
                f"{fmt(display(prec.value, prec.unit), 'µs')} / {variant} "
                f"{fmt(display(rec.value, rec.unit), 'µs')}; {'; '.join(sources)}"
            )
        else:
            title = f"needs both {peer_variant} and {variant} at this commit"
        return ScreenCell(col, ratio(head), None, None, tuple(ratio(c) for c in window), title,
                          None, "")  # fmt: skip
    hist = tuple(display(mine[c].value, mine[c].unit) if c in mine else None for c in window)
    if rec is None:
        # No value at head. A benchmark that failed there after a value is the report's
        # regression: the cell shows that verdict and why, not a neutral "n/a".
        seen = next(iter(mine.values()), None)
        row = rows_by_key.get((seen.benchmark, _params_key(seen.params))) if seen else None
        cell = row.cells.get(machine) if row is not None else None
        if cell is not None and cell.flag in (plots.FLAG_REGRESSION, plots.FLAG_IMPROVEMENT):
            return ScreenCell(col, None, cell.flag, None, hist, cell.why or cell.flag, None,
                              anchor("fs", machine, seen.benchmark, seen.params),
                              seen.benchmark)  # fmt: skip
        return ScreenCell(col, None, None, None, hist, "no result at this GPU's latest commit",
                          None, "")  # fmt: skip
    row = rows_by_key.get((rec.benchmark, _params_key(rec.params)))
    cell = row.cells.get(machine) if row is not None else None
    step = cell.step if cell is not None else None
    link = links.asv_graph_url(
        rec.benchmark,
        rec.params,
        machine=machine,
        commits=(step.last_good[:8], step.first_bad[:8]) if step else None,
    )
    tag = prov.tag(rec)
    gpu_id = f"{tag.get('gpu_index', '?')} {tag['gpu_uuid']}" if tag.get("gpu_uuid") else ""
    return ScreenCell(
        col,
        display(rec.value, rec.unit),
        cell.flag if cell is not None else None,
        step,
        hist,
        prov.describe(rec),
        link,
        anchor("fs", machine, rec.benchmark, rec.params),
        rec.benchmark,
        gpu_id,
    )


def _judged_window(report: Report | None, machine: str, dates: Mapping[str, int]) -> list:
    """The machine's commits as the report judged them, oldest first; [] if it did not."""
    if report is None or report.baseline.kind != "last-n" or report.head not in dates:
        return []
    before = report.baseline.by_machine.get(machine)
    if before is None:
        return []
    return [c for c in reversed(before) if c in dates] + [report.head]


def _shown_variant(kernel: str, default: str, index, machine: str, head: str | None) -> str:
    """The default variant, or, when it has no cold time at head (a run of a subset, an old
    commit), the Triton variant that has one and shares the most leading name words with it."""

    def has(v):
        return any(
            r.commit == head and r.param_dict.get("variant") == v
            for (mm, kk, metric, _), recs in index.items()
            if mm == machine and kk == kernel and metric == COLUMNS[0].metric
            for r in recs
        )

    if has(default):
        return default
    spec = cases.KERNELS[kernel]
    present = [v for v in spec.variants if v not in spec.peers and has(v)]
    if not present:
        return default
    for former in variants.FORMER_DEFAULTS.get(kernel, ()):
        if former in present:
            return former
    # The nearest relative by name, in whole "_"-separated words, the kernel's own order
    # breaking ties: "blocked" for "blocked_native" (the kernel it launches), "slab" for
    # "slab_dconst".
    words = default.split("_")

    def shared(v):
        return len(os.path.commonprefix([v.split("_"), words]))

    return max(present, key=lambda v: (shared(v), -present.index(v)))


def build_views(
    records: Sequence,
    report: Report | None,
    machines: Sequence[str],
    *,
    machines_info: Mapping[str, Mapping] | None = None,
    provenance: Provenance | None = None,
    last: int = SPARK_COMMITS,
    columns: Sequence[Column] = COLUMNS,
) -> list[MachineView]:
    """One :class:`MachineView` per machine, tables for every kernel with results."""
    prov = provenance or Provenance()
    # One benchmark version per machine and cell, as asv publish draws: a sparkline joining
    # two codes shows a change of code as a change of speed.
    usable = [r for r in plots.current_version(records) if r.value is not None]
    kernels = plots.kernels_in(usable)
    metrics_present = {plots.split_benchmark(r.benchmark)[1] for r in usable}
    cols = [c for c in columns if not c.optional or c.metric in metrics_present]

    # (machine, kernel, metric, shape) -> [records]; (machine) -> {commit: date}
    index: dict[tuple, list] = defaultdict(list)
    dates: dict[str, dict[str, int]] = defaultdict(dict)
    for r in usable:
        kernel, metric = plots.split_benchmark(r.benchmark)
        index[(r.machine, kernel, metric, r.param_dict.get("shape", ""))].append(r)
    # Every (machine, kernel, metric, shape) some result has, failed ones included:
    # an empty cell is "not measured here" only where none does.
    tried: set[tuple] = set()
    for r in records:
        dates[r.machine][r.commit] = r.date
        tried.add((r.machine, *plots.split_benchmark(r.benchmark), r.param_dict.get("shape", "")))
    rows_by_key: dict[tuple, Row] = {}
    for row in report.rows if report is not None else ():
        rows_by_key[(row.benchmark, _params_key(row.params))] = row

    views = []
    for m in machines:
        order = sorted(dates.get(m, {}), key=lambda c: (dates[m][c], c))
        # The commits the report judged, in its (git) order: stored dates tie for
        # commits made in one go, and then only the report knows their order.
        window = tuple((_judged_window(report, m, dates.get(m, {})) or order)[-last:])
        head = window[-1] if window else None
        regs, imps = [], []
        for row in report.rows if report is not None else ():
            cell = row.cells.get(m)
            if cell is not None and cell.flag == plots.FLAG_REGRESSION:
                regs.append((row, cell))
            elif cell is not None and cell.flag == plots.FLAG_IMPROVEMENT:
                imps.append((row, cell))
        tables, gpu_ids = [], set()
        for k in kernels:
            default = default_variant(k)
            if default is None:
                continue  # a kernel ltx2k.workload.cases does not know has no default to show
            variant = _shown_variant(k, default, index, m, head)
            shapes_here = {s for (mm, kk, _, s) in index if mm == m and kk == k and s}
            # A speedup over a variant the kernel does not have (sglang's current design of
            # a kernel it has none of) is no column of its table.
            kcols = [c for c in cols if not c.derived or c.peer_variant(k) is not None]
            table_rows = []
            for shape in plots.ordered(shapes_here, _shape_order(k)):
                recs = {
                    metric: index.get((m, k, metric, shape), ())
                    for metric in {c.metric for c in kcols}
                }
                cells = [
                    _screen_cell(col, recs, variant, window, m, rows_by_key, prov, kernel=k,
                                 measured=(m, k, col.metric, shape) in tried)
                    for col in kcols
                ]  # fmt: skip
                gpu_ids |= {c.gpu_id for c in cells if c.gpu_id}
                table_rows.append((shape, cells))
            tables.append(KernelTable(k, variant, kcols, table_rows, default))
        info = dict((machines_info or {}).get(m) or {})
        if not info:
            for r in records:
                if r.machine == m and r.machine_info:
                    info = dict(r.machine_info)
                    break
        views.append(
            MachineView(
                machine=m,
                info=info,
                commits=window,
                n_commits=len(order),
                date=dates[m][head] if head else None,
                tables=tables,
                gpu_ids=tuple(sorted(gpu_ids)),
                regressions=regs,
                improvements=imps,
            )
        )
    return views
