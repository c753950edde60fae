"""What the figures read from history records and report rows: kernel and metric names,
parameters, values in display units, the order of commits, the benchmark version drawn."""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable, Sequence

from ltx2k.analysis.model import Row
from ltx2k.history.series import same_version
from ltx2k.workload import cases

# asv class name in benchmarks/bench_kernels.py -> kernel name in ltx2k.workload.cases.
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


def split_benchmark(name: str) -> tuple[str, str]:
    """``"bench_kernels.SplitRope.time_device_cold"`` -> ``("split_rope", "time_device_cold")``."""
    parts = name.split(".")
    if len(parts) < 2:
        raise ValueError(f"benchmark name must look like module.Class.metric, got {name!r}")
    cls, metric = parts[-2], parts[-1]
    return ASV_CLASS_KERNEL.get(cls, cls), metric


def report_row_kernel_metric(row: Row) -> tuple[str, str]:
    """(kernel, metric) of a regress report row, named as in ltx2k.workload.cases.

    Derived from the benchmark name because the row's ``kernel`` is asv's
    class name ("SplitRope"), while ltx2k.workload.cases speaks "split_rope".
    """
    return split_benchmark(row.benchmark)


def row_params(row: Row) -> tuple[str, str]:
    return row.variant or "", row.shape or ""


def param(record, key: str) -> str:
    return dict(record.params).get(key, "")


def display_value(record) -> float | None:
    """The record's value in display units (µs for times), None when missing."""
    v = record.value
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    return v * 1e6 if record.unit == "seconds" else v


def ordered(values: Iterable[str], canonical: Sequence[str]) -> list[str]:
    """Unique values in canonical order; unknown ones after, sorted."""
    present = set(values)
    known = [v for v in canonical if v in present]
    return known + sorted(present - set(known))


def kernels_in(records: Iterable) -> list[str]:
    """Kernels with at least one record, known kernels first."""
    found = {split_benchmark(r.benchmark)[0] for r in records}
    return ordered(found, list(ASV_CLASS_KERNEL.values()))


def commit_order(records: Iterable, order: Sequence[str] | None = None) -> list[str]:
    """Commits of all machines, oldest first: by stored date (ties by hash, so it is
    stable), with the commits of *order* (git's history, oldest first) in its order.

    asv stores author dates, so a rebase-merged commit can be dated before commits it
    follows; git's order is the truth where known. The commits of *order* take, in git's
    order, the places their dates gave them; the others (a pull request's, measured off
    the branch) keep their places by date.
    """
    dates: dict[str, int] = {}
    for r in records:
        dates[r.commit] = r.date
    by_date = sorted(dates, key=lambda c: (dates[c], c))
    if not order:
        return by_date
    pos = {c: i for i, c in enumerate(order)}
    on_branch = iter(sorted((c for c in by_date if c in pos), key=pos.__getitem__))
    return [next(on_branch) if c in pos else c for c in by_date]


def commit_rank(records: Iterable, order: Sequence[str] | None = None):
    """A sort key over the commits of *records*: their place in :func:`commit_order`."""
    rank = {c: i for i, c in enumerate(commit_order(records, order))}
    return rank.__getitem__


def latest_per_machine(records: Iterable, order: Sequence[str] | None = None) -> dict[str, str]:
    """machine -> its most recent commit (machines need not have run the same commits),
    in :func:`commit_order`."""
    records = list(records)
    rank = commit_rank(records, order)
    best: dict[str, str] = {}
    for r in records:
        if r.machine not in best or rank(r.commit) > rank(best[r.machine]):
            best[r.machine] = r.commit
    return best


def kernel_records(records: Iterable, kernel: str, metric: str) -> list:
    return [r for r in records if split_benchmark(r.benchmark) == (kernel, metric)]


def line_key(record) -> tuple:
    """The line a record is a point of: one machine's runs of one benchmark cell."""
    return record.machine, record.benchmark, record.params


def benchmark_key(record) -> str:
    """One key for every machine's and cell's results of a benchmark: what figures that put
    machines side by side group by, as asv publish draws one version on every machine."""
    return record.benchmark


def current_version(
    records: Iterable,
    order: Sequence[str] | None = None,
    *,
    key: Callable[[object], Hashable] = line_key,
) -> list:
    """The records of *records* a figure draws: in each group (*key*: a
    :func:`line_key` by default), those of the newest record's benchmark version, the
    newest in :func:`commit_order` with *order*.

    Results of two versions measured different code, so a line joining them shows a
    change of code as a change of speed (the rule of :func:`ltx2k.history.series.build`
    and ``asv compare``). A result without a version matches any (asv's rule): it is
    always kept, and the version is that of the newest record that has one, so that
    versionless results after it do not let a second version in. Of a group's records at
    one commit the last one given is the newest, as a figure drawing them in turn shows
    the last.
    """
    records = list(records)
    rank = commit_rank(records, order)
    newest: dict = {}  # key -> (commit rank, version)
    for r in records:
        if r.bench_version is None:
            continue
        k, at = key(r), rank(r.commit)
        if k not in newest or at >= newest[k][0]:
            newest[k] = (at, r.bench_version)
    return [
        r for r in records if same_version(r.bench_version, newest.get(key(r), (None, None))[1])
    ]
