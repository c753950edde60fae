"""The metrics of the asv suite: name, unit and a title for tables and plots.

The one list of them outside ``benchmarks/bench_kernels.py``, which defines
the benchmark methods these names are: analysis, reports and the synthetic
history take names, units and titles from here. Whether higher is better is
the thresholds' business (:data:`ltx2k.analysis.thresholds.DEFAULT_DIRECTIONS`),
since a user's thresholds file may declare it for metrics of their own.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Metric:
    name: str  # the benchmark method's name in benchmarks/bench_kernels.py
    unit: str  # asv's unit of its values
    title: str
    # The metric of the same cell this one is computed from (its value is a function
    # of that measurement, not a measurement of its own): it shares that verdict.
    derived_from: str | None = None


METRICS: dict[str, Metric] = {
    m.name: m
    for m in (
        Metric("time_device_cold", "seconds", "device time, cold L2"),
        Metric("time_device_warm", "seconds", "device time, warm L2"),
        Metric("time_kernel", "seconds", "kernel duration"),
        Metric("time_device_launch", "seconds", "device time per launch path, cold L2"),
        Metric("time_host_latency", "seconds", "host latency"),
        Metric("time_host_launch", "seconds", "host latency per launch path"),
        Metric("time_host_context", "seconds", "host latency per call context"),
        Metric("track_host_calibrated", "torch.add calls", "host latency, calibrated"),
        Metric("track_allocations", "allocations", "allocations"),
        # Minimum bytes / the cold time's median, as % of the runner's copy bandwidth.
        Metric("track_pct_copy_bandwidth", "%", "% of copy bandwidth", "time_device_cold"),
    )
}


def title(name: str) -> str:
    """A metric's title; an unknown name (a user's own benchmark) stands for itself."""
    metric = METRICS.get(name)
    return metric.title if metric else name
