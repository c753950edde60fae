"""Prepared measurements of one kernel x variant x shape, for asv, pytest-benchmark and the CLI.

A benchmark process asks for one metric; :func:`prepare` builds inputs, runs
the correctness gate (a mismatch raises, so no number is ever posted for a
wrong kernel), builds the clock and caches it for the process -- asv re-runs
``setup`` before every sample, and rebuilding a CUDA graph each time would
dominate the suite's cost.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ltx2k import runtime
from ltx2k.measure import allocations as _alloc
from ltx2k.measure import bandwidth, device_time, forked, gate, host, kernel_time
from ltx2k.workload import cases, contexts, variants

METRICS = ("device_cold", "device_warm", "host", "kernel")
# Calls per host-latency sample: one device sync per batch, amortised. In the
# interpreter a call takes ~10-100 ms, so one call is already a long sample.
HOST_BATCH_GPU = 50


@dataclass
class Timed:
    """``run()`` is the timed body; ``timer()`` the clock asv reads around it.

    Both clocks return seconds *per call* (the device clock divides by the
    launches in a replay, the host clock by the batch), so asv records
    per-call statistics with ``number = 1``.
    """

    run: Callable[[], Any]
    timer: Callable[[], float]


class _ScaledHostClock(host.HostClock):
    def __init__(self, on_gpu: bool, batch: int):
        super().__init__(on_gpu)
        self.batch = batch

    def __call__(self) -> float:
        return super().__call__() / self.batch


_CACHE: dict[tuple, Any] = {}


def _on_gpu() -> bool:
    return runtime.device() == "cuda"


def _args(kernel: str, shape, seed: int = 0):
    spec = cases.KERNELS[kernel]
    return spec.make_inputs(
        shape, runtime.device(), seed=seed, exact=runtime.interpreter_requested()
    )


def _input_sets(kernel: str, shape, count: int) -> list[tuple]:
    return cases.input_sets(kernel, shape, runtime.device(), count)


# The compiled peers are compiled at static shapes, one graph per shape and call context, as
# each benchmark process compiles its own. A process that prepares many cells (ltx2k quick,
# a script at a desk) compiles one code object that many times: past dynamo's recompile
# limit (8 by default), fullgraph=True makes the next shape a hard error. Cells are
# prepared under a limit no suite reaches; a compiled graph is looked up most recent first,
# so the timed calls of one cell do not walk the others' guards.
MAX_COMPILED_GRAPHS = 1024


def _compiles(variant: str):
    """The context a variant's first calls run in: room for its graphs if it is compiled."""
    return gate.recompiles_allowed(
        MAX_COMPILED_GRAPHS if variant in variants.COMPILED_VARIANTS else 0
    )


def _gated_fn(kernel: str, variant: str, shape, launch: str = "auto") -> Callable:
    key = ("gate", kernel, variant, launch, shape.label)
    if key not in _CACHE:
        fn = cases.variant_fn(kernel, variant, launch)  # VariantUnavailable -> asv skip
        with _compiles(variant):
            gate.check_case(kernel, variant, shape, runtime.device(), launch=launch)
        _CACHE[key] = fn
    return _CACHE[key]


def device_launch(variant: str, kernel: str | None = None) -> str:
    """The launch path device metrics time a variant through.

    The kernel's default variant: ``auto``, the path its callers get (the native replay).
    Under programmatic dependent launch the device time of one compiled kernel depends on
    how it was launched and captured (docs/kernels/split_rope.md, "Device time by launch
    path"), so the cell callers read is timed through their path; ``time_device_launch``
    keeps each path's own cell. Other Triton variants: ``kernel[grid]``, the path the
    CUDA-graph clock was validated on and their history was measured through. A peer has
    no launch path.
    """
    if variant in (cases.PEERS if kernel is None else cases.KERNELS[kernel].peers):
        return "auto"
    if kernel is not None and variant == variants.DEFAULT_VARIANT[kernel]:
        return "auto"
    return "triton"


def prepare(
    kernel: str,
    variant: str,
    shape,
    metric: str,
    launch: str | None = None,
    context: str = "plain",
) -> Timed:
    """*launch*: the host path; by default ``device_launch`` for device metrics, else "auto".
    *context*: the host clock's call context (:mod:`ltx2k.workload.contexts`)."""
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}, got {metric!r}")
    contexts.get(context)
    if context != "plain" and metric != "host":
        raise ValueError(f"context={context!r} applies to the host metric only, not {metric!r}")
    if launch is None:
        launch = "auto" if metric == "host" else device_launch(variant, kernel)
    key = (metric, kernel, variant, launch, shape.label, context)
    if key not in _CACHE:
        # the first calls (the gate's, the warm-up's) compile a compiled peer
        with _compiles(variant):
            _CACHE[key] = _build(kernel, variant, shape, metric, launch, context)
    return _CACHE[key]


def _build(kernel: str, variant: str, shape, metric: str, launch: str, context: str) -> Timed:
    fn = _gated_fn(kernel, variant, shape, launch)
    on_gpu = _on_gpu()
    if metric == "host":
        args = contexts.arguments(kernel, _args(kernel, shape), context)
        n = HOST_BATCH_GPU if on_gpu else 1

        def batch() -> None:
            # The context is entered once per batch, as a serving loop enters it once.
            with contexts.entered(context):
                for _ in range(n):
                    fn(*args)

        batch()  # warm-up: these tensors' first calls (asv takes no warm-up of its own)
        timed = Timed(run=batch, timer=_ScaledHostClock(on_gpu, n))
    elif metric == "kernel" and on_gpu:
        spec = cases.KERNELS[kernel]
        clock = kernel_time.build_clock(
            fn, functools.partial(_input_sets, kernel, shape), spec.bytes_moved(shape)
        )
        timed = Timed(run=clock.run, timer=clock)
    else:  # device time; in the interpreter, kernel duration too: both are its wall time
        cold = metric != "device_warm"
        spec = cases.KERNELS[kernel]
        if on_gpu:
            clock = device_time.build_clock(
                fn, functools.partial(_input_sets, kernel, shape), spec.bytes_moved(shape), cold
            )
        else:
            clock = device_time.WallClock(fn, [_args(kernel, shape, seed=i) for i in range(2)])
        timed = Timed(run=clock.run, timer=clock)
    return timed


def forget() -> None:
    """Drop every prepared clock and gated function of this process (their inputs and
    CUDA graphs with them): for a process that measures many cells one after another."""
    _CACHE.clear()


def device_seconds(
    kernel: str,
    variant: str,
    shape,
    cold: bool = True,
    samples: int = 20,
    seconds: float | None = None,
) -> float:
    """Median per-launch device time: *samples* replays, more while *seconds* last."""
    timed = prepare(kernel, variant, shape, "device_cold" if cold else "device_warm")
    return statistics.median(device_time.device_times(timed.timer, samples, seconds))


def pct_of_copy_bandwidth(kernel: str, shape, seconds: float, bw: float | None = None) -> float:
    """Minimum bytes moved in *seconds* of cold-L2 device time, as % of measured copy bandwidth.

    *bw*: the copy bandwidth in bytes/s, where the caller has it; by default this
    device's (``bandwidth.copy_bandwidth``, which asks the GPU who it is: a CUDA context).
    """
    if not seconds > 0:
        raise ValueError(f"seconds must be > 0, got {seconds!r}")
    if bw is None:
        bw = bandwidth.copy_bandwidth(_on_gpu())
    elif not bw > 0:
        raise ValueError(f"bw must be > 0 bytes/s, got {bw!r}")
    return 100.0 * cases.KERNELS[kernel].bytes_moved(shape) / seconds / bw


def pct_copy_bandwidth(kernel: str, variant: str, shape) -> float:
    """Achieved bandwidth (minimum bytes / cold-L2 device time) as % of measured copy bandwidth."""
    return pct_of_copy_bandwidth(kernel, shape, device_seconds(kernel, variant, shape, cold=True))


def allocations(kernel: str, variant: str, shape) -> int:
    fn = _gated_fn(kernel, variant, shape)  # as a caller gets it (launch "auto")
    args = _args(kernel, shape)
    with _compiles(variant):
        return _alloc.allocations_per_call(lambda: fn(*args), _on_gpu())


# Calibrated host latency: processes per value and samples per process. The
# spread it has to beat is between processes (docs/history.md, "Host
# latency"), so a value is the median of several processes; samples are cheap
# (about a millisecond each) next to a process's start.
HOST_CALIBRATED_PROCESSES_GPU = 4
HOST_CALIBRATED_SAMPLES_GPU = 100


def calibrated_in_this_process(kernel: str, variant: str, shape) -> float:
    """This process's host latency per call, in reference calls (``host.REFERENCE_CALL``)."""
    timed = prepare(kernel, variant, shape, "host")  # gated: a wrong kernel raises here
    on_gpu = _on_gpu()
    calls = HOST_BATCH_GPU if on_gpu else 1
    samples = HOST_CALIBRATED_SAMPLES_GPU if on_gpu else 2
    return host.calibrated_ratio(timed.run, calls, on_gpu, samples)


def _calibrated_child(kernel: str, variant: str, shape) -> dict:
    return {"ratio": calibrated_in_this_process(kernel, variant, shape)}


def host_calibrated(kernel: str, variant: str, shape, processes: int | None = None) -> list[float]:
    """Host latency per call in reference calls, one value per forked process.

    Forked, as asv forks its benchmark processes (a caller that has created a
    CUDA context gets fresh interpreters instead, ``forked.run_isolated``).
    Fresh interpreters would be independent of each other inside one run,
    but measured along a history of no-op commits on the H200 they moved
    between runs as much as forked children do, at four times the cost
    (docs/history.md, "Host latency").
    A process that fails raises ``RuntimeError`` with its error: a
    kernel that fails its correctness gate never gets a number.
    """
    if processes is None:
        processes = HOST_CALIBRATED_PROCESSES_GPU if _on_gpu() else 2
    if processes < 1:
        raise ValueError(f"processes must be >= 1, got {processes}")
    runtime.warm_before_fork()  # inherited by the forked children
    values = []
    for _ in range(processes):
        got, _ = forked.run_isolated(functools.partial(_calibrated_child, kernel, variant, shape))
        if "ratio" not in got:
            raise RuntimeError(
                f"calibrated host latency of {kernel} {variant} {shape.label}: "
                f"a measuring process failed: {got.get('error')}"
            )
        values.append(got["ratio"])
    return values


def host_seconds(
    kernel: str,
    variant: str,
    shape,
    samples: int = 10,
    launch: str = "auto",
    seconds: float | None = None,
) -> float:
    """Median host latency per call: *samples* batches, more while *seconds* last."""
    timed = prepare(kernel, variant, shape, "host", launch)
    return statistics.median(device_time.sampled(timed.timer, timed.run, samples, seconds))


QUICK_COLUMNS = ("kernel", "variant", "shape", "cold us", "warm us", "host us", "%copyBW", "allocs")


MAX_QUICK_SECONDS = 60.0


def quick_rows(kernels=None, shapes=None, seconds: float = 0.2, on_error=None):
    """Time every variant now (no asv), yielding one row of ``QUICK_COLUMNS`` per case
    as soon as it is measured (``ltx2k quick`` prints them as they come).

    *seconds* is each measurement's time budget (cold, warm and host apart): samples
    go on past the minimum until it is spent.

    *on_error*: ``on_error(kernel, variant, label, exc)`` for a case that fails (its gate
    among them: a wrong output posts no number); its row then says ``failed`` and the
    table goes on. Without it, the failure is raised."""
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise TypeError(f"seconds must be a number of seconds, got {type(seconds).__name__}")
    if not (math.isfinite(seconds) and seconds > 0):
        raise ValueError(f"seconds must be a finite number > 0, got {seconds!r}")
    if seconds > MAX_QUICK_SECONDS:
        # Three measurements a cell, dozens of cells: a larger budget is hours at a desk.
        raise ValueError(
            f"seconds must be at most {MAX_QUICK_SECONDS:g} per measurement, got {seconds!r}; "
            "for long measurements use `ltx2k run` (asv)"
        )
    on_gpu = _on_gpu()
    n = 20 if on_gpu else 2
    for kernel, spec in cases.KERNELS.items():
        if kernels and kernel not in kernels:
            continue
        for shape in cases.shapes_for(kernel, on_gpu):
            if shapes and shape.label not in shapes:
                continue
            for variant in spec.variants:
                if variant in variants.COMPILED_VARIANTS and not on_gpu:
                    continue  # inductor's CPU C++ build takes minutes; a GPU-only peer
                try:
                    cold = device_seconds(kernel, variant, shape, True, n, seconds)
                    warm = device_seconds(kernel, variant, shape, False, n, seconds)
                    hst = host_seconds(kernel, variant, shape, 10 if on_gpu else 3, seconds=seconds)
                    pct = pct_of_copy_bandwidth(kernel, shape, cold)
                    al = allocations(kernel, variant, shape)
                except cases.VariantUnavailable:
                    continue
                except Exception as e:
                    if on_error is None:
                        raise
                    on_error(kernel, variant, shape.label, e)
                    forget()  # what the failed case prepared: its inputs, its graphs
                    yield (kernel, variant, shape.label, "failed", *("-",) * 4)
                    continue
                yield (
                    kernel,
                    variant,
                    shape.label,
                    f"{cold * 1e6:.2f}",
                    f"{warm * 1e6:.2f}",
                    f"{hst * 1e6:.2f}",
                    f"{pct:.1f}",
                    str(al),
                )


def check_quick_filters(kernels: list[str] | None, shapes: list[str] | None, on_gpu: bool):
    """Unknown --kernel/--shape names would select nothing: name the valid ones instead."""
    for k in kernels or ():
        if k not in cases.KERNELS:
            raise ValueError(f"--kernel {k!r}: unknown kernel; valid: {', '.join(cases.KERNELS)}")
    chosen = kernels or list(cases.KERNELS)
    here = [s.label for k in chosen for s in cases.shapes_for(k, on_gpu)]
    anywhere = [
        s.label for k in chosen for s in cases.shapes_for(k, True) + cases.shapes_for(k, False)
    ]
    device = "GPU" if on_gpu else "CPU interpreter"
    for label in shapes or ():
        if label in here:
            continue
        other = "the CPU interpreter" if on_gpu else "a GPU"
        where = f"measured only on {other}" if label in anywhere else "unknown shape"
        of = f" of --kernel {', '.join(kernels)}" if kernels else ""
        raise ValueError(
            f"--shape {label!r}: {where}{of}; valid on this device ({device}): "
            + ", ".join(dict.fromkeys(here))
        )


def quick_widths(on_gpu: bool) -> list[int]:
    """Column widths known before the first row, so each row can be printed as measured."""
    names = {0: list(cases.KERNELS), 1: [v for k in cases.KERNELS.values() for v in k.variants]}
    names[2] = [s.label for k in cases.KERNELS for s in cases.shapes_for(k, on_gpu)]
    return [
        max([len(col), 8, *(len(n) for n in names.get(i, ()))])
        for i, col in enumerate(QUICK_COLUMNS)
    ]


def format_row(row, widths) -> str:
    return "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()


def quick_table(kernels=None, shapes=None, seconds: float = 0.2) -> str:
    """Time every variant now (no asv) and return a text table; the pre-asv main job."""
    rows = [QUICK_COLUMNS, *quick_rows(kernels, shapes, seconds)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(QUICK_COLUMNS))]
    return "\n".join(format_row(r, widths) for r in rows)
