"""asv suite: every LTX-2 kernel of ltx2k (one class each), every variant, every shape.

Metrics per (variant, shape):
  time_device_cold   per-launch device time, inputs rotated past L2 (CUDA graph + events)
  time_device_warm   the same with one resident input set
                     (the default variant through the path its callers get, "auto";
                     the other Triton variants through kernel[grid], as their history was)
  time_kernel        summed CUPTI kernel durations per call in the same cold-L2 graph
                     (no inter-kernel gaps: sees below the graph's launch floor);
                     decode shapes and one >= 10 us shape per kernel
  time_host_latency  wall time per call of the public function, one sync per batch
                     (launch "auto": what a caller of that variant gets)
  time_host_launch   the same for the default variant through each host launch path
                     (kernel[grid], lean, native); params (launch, shape)
  time_device_launch cold-L2 device time of the default variant through each host launch
                     path (kernel[grid], lean, native): under programmatic dependent
                     launch it depends on the path; params (launch, shape)
  time_host_context  the same for the default variant in each call context: "plain"
                     tensors, and "model", as LTX-2 serving calls it (the block's
                     nn.Parameter weights, inference mode); params (context, shape)
  track_allocations  device allocations per call (lower is better)
  track_pct_copy_bandwidth  minimum bytes / cold device time, % of this GPU's measured copy
                     bandwidth (HIGHER is better: ltx2k regress knows; asv assumes lower);
                     the cold device time is the median its cell's time_device_cold
                     process of the same run left (measured here when there is none)
  track_host_calibrated  host latency per call in units of one eager torch.add timed
                     interleaved in the same process; median of several processes. Only
                     the default variant at host-bound shapes (shapes.HOST_BOUND_SHAPES):
                     the host-latency number a percent-level step can be seen in

The time_* benchmarks use custom asv ``timer``s (ltx2k.measure) that return
per-call device or host seconds, so asv's own samples, CIs and
``stats_ci_99_*`` apply and ``asv continuous/compare/publish`` judge them.

The kernels, their asv classes, variants and shapes come from the working tree's
ltx2k/workload/variants.py and shapes.json: a kernel added there gets its class here
with no edit of this file.

Guards for old commits: everything from ltx2k is imported inside setup; a
commit that lacks the measurement core, a kernel or a variant raises
NotImplementedError, which asv records as a skip, never a crash.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import os
import statistics
import sys
import time
from pathlib import Path

# Decide the CUDA question through NVML, which does not initialise a CUDA
# context: asv's forkserver imports this module once and forks per benchmark,
# and a context created before fork() is unusable in the child.
os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
# Inductor compiles through a pool of worker processes by default; each forked
# benchmark process of the torch.compile peer would start that pool afresh
# (each worker re-imports torch) for a graph of one or two kernels. Measured on
# the H200 (tools/experiments/process_cost.py, removed; in git history at
# 6b69a44): that made a "compiled" process cost ~8 s.
os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
# Every benchmark process creates a CUDA context and tears it down at exit; with one
# hardware work queue instead of CUDA's default eight, that took 0.10 + 0.03 s instead
# of 0.15 + 0.06 s on the H200 (tools/process_floor.py), ~0.08 s of every one of the
# ~420 GPU processes of a commit. Each clock launches into one stream, so one queue
# serialises nothing it measures: cold device time moved by at most 2% either way in
# an asv compare of the two settings (docs/measurement.md, "Suite cost").
os.environ.setdefault("CUDA_DEVICE_MAX_CONNECTIONS", "1")
TRACE = os.environ.get("LTX2K_TRACE") == "1"


def _load_tree_module(folder: str, name: str):
    # ltx2k/<folder>/<name>.py of the working tree (the package layout of docs/layout.md).
    # The parameter lists come from the working tree's ltx2k/workload/shapes.py and
    # ltx2k/workload/variants.py, not the installed (benchmarked) commit: asv maps
    # results to params by index, so the lists must be identical for every
    # commit in a run. Both files sit next to this one in the same tree and so
    # always match it; an old commit's own ltx2k (where the variants were still
    # in shapes.py) is never read for them, so no fallback is needed. The same
    # holds for process_values.py, the record format ltx2k confirm reads.
    path = Path(__file__).resolve().parent.parent / "ltx2k" / folder / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"_ltx2k_bench_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses need the module registered
    spec.loader.exec_module(mod)
    return mod


def _installed_cases():
    """The benchmarked commit's own ``cases`` module: ``ltx2k.workload.cases`` in the package
    layout of docs/layout.md, ``ltx2k.cases`` at the commits before it. ImportError where
    the commit has neither."""
    import importlib

    try:
        return importlib.import_module("ltx2k.workload.cases")
    except ModuleNotFoundError as e:
        if e.name not in ("ltx2k.workload", "ltx2k.workload.cases"):
            raise
        return importlib.import_module("ltx2k.cases")


def _has_gpu() -> bool:
    if os.environ.get("TRITON_INTERPRET") == "1":
        return False
    import torch

    return torch.cuda.is_available()


def _in_asv_runner() -> bool:
    # asv runs the suite through asv_runner's benchmark.py: its discovery, its
    # forkserver and the benchmark processes it forks, its setup_cache process.
    return os.path.basename(sys.argv[0]) == "benchmark.py"


# Before torch is imported: on a runner that writes no bytecode, each of asv's
# interpreters would compile torch, Triton and inductor from source
# (ltx2k/runner/bytecode.py). `ltx2k run` sets this up in the environment already.
if _in_asv_runner():
    _load_tree_module("runner", "bytecode").enable_in_this_process()

_SHAPES = _load_tree_module("workload", "shapes")
_VARIANTS = _load_tree_module("workload", "variants")
_PROCESS_VALUES = _load_tree_module("runner", "process_values")
# Created in asv's forkserver when it imports this module: every benchmark process of
# this commit's run is forked after it and shares the table (ltx2k/runner/sibling_values.py).
_SIBLINGS = _load_tree_module("runner", "sibling_values").SiblingValues()
ON_GPU = _has_gpu()
if not ON_GPU:
    os.environ["TRITON_INTERPRET"] = "1"

# kernel -> (its timed variants, this machine's shapes), one per asv class.
_KERNELS = {
    kernel: (_VARIANTS.TIMED_VARIANTS[kernel], _SHAPES.shapes_of(kernel, ON_GPU))
    for kernel in _VARIANTS.ASV_CLASS
}


def _metric_shapes(kernel: str, metric: str, shape_list) -> tuple:
    """The shapes *metric* times on this machine: on a GPU, an opt-in metric's list in the
    data file (ltx2k/workload/shapes.json, "metric_shapes"); otherwise the whole list."""
    opt_in = getattr(_SHAPES, "METRIC_SHAPES", {})
    if ON_GPU and metric in opt_in:
        return opt_in[metric][kernel]
    return tuple(shape_list)


def _forks_no_benchmark() -> bool:
    # asv lists the benchmarks (`benchmark.py discover`) and checks their
    # signatures (`check`) in processes that run none of them, and runs a
    # setup_cache (`setup_cache`: the allocation counts) in a fresh interpreter
    # that calls it and exits. None of them forks benchmark processes: they need
    # the parameters, not the warm imports below (seconds each: docs/measurement.md).
    return _in_asv_runner() and sys.argv[1:2] in (
        ["discover"],
        ["check"],
        ["setup_cache"],
    )


def _preimport() -> None:
    # asv's forkserver imports this module once and forks a process per
    # benchmark x params. Importing triton, the kernels and torch.compile's
    # machinery here (none of which creates a CUDA context) makes every child
    # inherit them instead of paying the imports again: per-process overhead is
    # what the suite's cost per commit is made of (~270 processes).
    if _forks_no_benchmark():
        return
    import importlib

    try:
        cases = _installed_cases()
        import ltx2k.measure.suite  # noqa: F401
    except ImportError:  # an old commit without them: setup will skip
        return
    for spec in getattr(cases, "KERNELS", {}).values():  # the benchmarked commit's kernels
        with contextlib.suppress(ImportError, AttributeError):  # not there: its cells skip
            importlib.import_module(spec.triton_module)
    if ON_GPU:
        import torch._dynamo  # noqa: F401
        import torch._inductor.compile_fx  # noqa: F401

        from ltx2k import runtime

        if hasattr(runtime, "warm_before_fork"):  # older commits lack it
            runtime.warm_before_fork()


_preimport()

# Metrics timed per variant, where not all (data, so the suite's cost is visible
# in one place: every benchmark x params is a process of its own): the
# torch.compile peer answers "is the Triton kernel worth it?" (cold device time,
# host latency); each of its processes pays a dynamo trace.
# "tiled_pdl" lets the next launch start while it drains: a CUPTI kernel duration would
# count the time its programs wait for the launch before them, so it has no time_kernel
# (its device time is the graph replay's, launch after launch).
VARIANT_METRICS = {
    **{compiled: ("device_cold", "host", "kernel") for compiled in _VARIANTS.COMPILED_VARIANTS},
    "tiled_pdl": ("device_cold", "device_warm", "host", "allocations", "pct_copy_bandwidth"),
}


def _check_metric(variant: str, metric: str, kernel: str | None = None) -> None:
    """NotImplementedError (a skip) where *variant* is not timed for *metric*: the
    variant's own list (VARIANT_METRICS), and, with *kernel*, its role in that kernel
    (variants.OTHER_ALGORITHMS: another device algorithm is timed for device time)."""
    if variant in _VARIANTS.COMPILED_VARIANTS and not ON_GPU:
        raise NotImplementedError("the torch.compile peer is timed on GPUs only")
    allowed = VARIANT_METRICS.get(variant)
    if allowed is not None and metric not in allowed:
        raise NotImplementedError(f"variant {variant} is timed for {allowed} only")
    # getattr: a variants.py from before the rule (a suite module of another checkout)
    others = getattr(_VARIANTS, "OTHER_ALGORITHMS", {}).get(kernel, ())
    device_only = getattr(_VARIANTS, "OTHER_ALGORITHM_METRICS", ())
    if variant in others and metric not in device_only:
        raise NotImplementedError(
            f"{kernel}'s variant {variant} is another device algorithm, timed for "
            f"{device_only} only"
        )


def _timed_variants(variants, metric: str, kernel: str | None = None) -> list[str]:
    out = []
    for v in variants:
        try:
            _check_metric(v, metric, kernel)
        except NotImplementedError:
            continue
        out.append(v)
    return out


def _check_kernel(cases, kernel: str) -> None:
    """NotImplementedError (a skip) where the benchmarked commit has no such kernel: the
    suite is the working tree's, and older commits predate the newer kernels."""
    if kernel not in getattr(cases, "KERNELS", {}):
        raise NotImplementedError(f"no kernel {kernel!r} at this commit")


def _host_calibrated_setup(kernel, variant, shape):
    try:
        cases = _installed_cases()
        from ltx2k.measure import suite
    except ImportError as e:
        raise NotImplementedError(f"ltx2k.measure unavailable at this commit: {e}") from e
    _check_kernel(cases, kernel)
    if not hasattr(suite, "host_calibrated"):
        raise NotImplementedError("calibrated host latency is not measured at this commit")
    cases.variant_fn(kernel, variant)  # VariantUnavailable is a NotImplementedError


def _host_launch_setup(kernel, launch, shape):
    _prepare(kernel, "host", _VARIANTS.DEFAULT_VARIANT[kernel], shape, launch)


def _device_launch_setup(kernel, launch, shape):
    _prepare(kernel, "device_cold", _VARIANTS.DEFAULT_VARIANT[kernel], shape, launch)


# The call contexts' names: fixed here, not read from ltx2k, so that the parameter list
# is the same at every commit (asv keys results by position); a commit without a context
# skips it (_host_context_setup).
_CONTEXT_NAMES = ("plain", "model")


def _host_context_setup(kernel, context, shape):
    try:
        from ltx2k.workload import contexts
    except ImportError as e:
        raise NotImplementedError(f"no call contexts at this commit: {e}") from e
    if context not in contexts.CONTEXTS:
        raise NotImplementedError(f"no call context {context!r} at this commit")
    _prepare(kernel, "host", _VARIANTS.DEFAULT_VARIANT[kernel], shape, context=context)


class _State:
    timed = None
    cell = None  # (metric, kernel, variant, shape label) that `timed` measures


def _shape(kernel, label):
    for s in _KERNELS[kernel][1]:
        if s.label == label:
            _check_layout(s)
            return s
    raise NotImplementedError(f"shape {label} is not in this machine's list")


def _check_layout(shape) -> None:
    # A commit from before the cos/sin layout was part of a shape builds every
    # RoPE input token-major: timing a head-major shape there would time the wrong one.
    # (A kernel newer than the layout's data builds every layout; one the commit lacks
    # skips in _prepare.)
    if getattr(shape, "layout", _SHAPES.DEFAULT_LAYOUT) == _SHAPES.DEFAULT_LAYOUT:
        return
    try:
        cases = _installed_cases()
    except ImportError as e:
        raise NotImplementedError(f"ltx2k cases unavailable at this commit: {e}") from e
    if not hasattr(cases, "rope_layout"):
        raise NotImplementedError(f"no {shape.layout} cos/sin inputs at this commit")


def _skip_warm_beyond_l2(kernel, shape) -> None:
    # With one input set of 2x the L2 or more, at most half of it can be
    # resident: "warm" is cold L2 again (within 1-3% on the H200) and would
    # cost a process per variant for a number time_device_cold already gives.
    try:
        cases = _installed_cases()
        from ltx2k.measure import device_time
    except ImportError:
        return

    if not ON_GPU:
        return
    try:
        nbytes, l2 = cases.KERNELS[kernel].bytes_moved(shape), device_time.l2_bytes()
    except (AttributeError, KeyError):  # an old commit: time it as before
        return
    if nbytes >= 2 * l2:
        raise NotImplementedError(
            f"warm L2 is cold L2 at {shape.label}: one input set ({nbytes >> 20} MiB) "
            f">= 2x the L2 ({l2 >> 20} MiB)"
        )


def _prepare(kernel, metric, variant, shape, launch=None, context=None):
    _State.timed = _State.cell = None
    try:
        from ltx2k.measure import suite
    except ImportError as e:  # commit predates the measurement core
        raise NotImplementedError(f"ltx2k.measure unavailable at this commit: {e}") from e
    _check_kernel(_installed_cases(), kernel)
    _check_metric(variant, metric, kernel)
    if metric not in getattr(suite, "METRICS", ()):
        raise NotImplementedError(f"metric {metric!r} is not measured at this commit")
    if metric == "device_warm":
        _skip_warm_beyond_l2(kernel, _shape(kernel, shape))
    t0 = time.perf_counter()
    if context is not None:
        _State.timed = suite.prepare(
            kernel, variant, _shape(kernel, shape), metric, context=context
        )
    elif launch is None:
        _State.timed = suite.prepare(kernel, variant, _shape(kernel, shape), metric)
    else:
        try:
            _State.timed = suite.prepare(kernel, variant, _shape(kernel, shape), metric, launch)
        except TypeError as e:  # a commit before the launch path was its own parameter
            raise NotImplementedError(f"no launch= at this commit: {e}") from e
    _State.cell = (metric, kernel, variant, shape)
    if TRACE:  # where a benchmark process's time goes (suite cost); asv --show-stderr shows it
        print(
            f"ltx2k-trace {kernel} {metric} {variant} {shape}: setup "
            f"{time.perf_counter() - t0:.3f} s",
            file=sys.stderr,
        )


def _cold_key(kernel, variant, shape) -> str:
    return f"time_device_cold/{kernel}/{variant}/{shape}"


def _leave_cold_median(kernel, variant, shape):
    # asv runs teardown after every sample and at the end: each time, the median so
    # far of the samples asv has taken (one graph replay each, number = 1), so the
    # last one left is the median of all of them, the value asv records for the cell.
    if _State.cell != ("device_cold", kernel, variant, shape):
        return  # setup skipped or failed: nothing measured, nothing to leave
    samples = getattr(_State.timed.timer, "samples", None)  # older commits' clocks lack it
    if samples:
        _SIBLINGS.put(_cold_key(kernel, variant, shape), statistics.median(samples))


# Allocations per call is an exact count: it does not depend on the process that
# counts it. One asv setup_cache process counts every cell of both kernels, each
# behind the same correctness gate; each cell's own process only reads its value.
# A benchmark process costs a CUDA context and a kernel load, so this spares one
# per allocation cell. Timed metrics keep a process per cell: measured in one
# shared process, cold device time at small shapes moved (where each cell's input
# sets land in memory depends on what the process allocated before;
# docs/measurement.md, "Suite cost").


def _count_allocations():
    """Allocations per call of every variant x shape of both kernels, in this one process.

    Returns {(kernel, variant, shape label): (status, value)}, status "ok"
    (value: the count), "skip" or "error" (value: why). It never raises: asv
    would fail every cell that reads it, where one bad cell must fail alone.
    """
    try:
        cases = _installed_cases()
        from ltx2k.measure import suite
    except ImportError as e:  # commit predates the measurement core: every cell skips
        return {"*": ("skip", f"ltx2k.measure unavailable at this commit: {e}")}
    out = {}
    for kernel, (variants, shape_list) in _KERNELS.items():
        for variant in _timed_variants(variants, "allocations", kernel):
            for shape in _metric_shapes(kernel, "allocations", shape_list):
                key = (kernel, variant, shape.label)
                try:
                    _check_kernel(cases, kernel)  # not at this commit: a skip
                    cases.variant_fn(kernel, variant)  # VariantUnavailable: a skip
                    out[key] = ("ok", suite.allocations(kernel, variant, shape))
                except NotImplementedError as e:
                    out[key] = ("skip", str(e) or type(e).__name__)
                except Exception as e:  # noqa: BLE001 - failed alone, in its own cell
                    out[key] = ("error", f"{type(e).__name__}: {e}")
                # Drop what the cell prepared (its gated function) before the next.
                # Older commits lack forget().
                getattr(suite, "forget", lambda: None)()
    return out


# asv reads the timeout of a setup_cache from the function: all cells in one process.
_count_allocations.timeout = 1200


def _counted_setup(kernel, counts, variant, shape):
    status, value = counts.get((kernel, variant, shape), counts.get("*", (None, None)))
    if status == "ok":
        return
    if status == "error":  # e.g. a failed correctness gate: the cell fails, no number
        raise RuntimeError(value)
    raise NotImplementedError(value or f"{variant} {shape} is not measured at this commit")


_COPY_BANDWIDTH_KEY = "copy_bandwidth"


def _copy_bandwidth_of_this_run() -> float | None:
    """The copy bandwidth % of copy bandwidth divides by, shared by this commit's processes.

    It is cached per GPU, and asking torch which GPU this is creates a CUDA context: most
    of the cost of a process that only turns a sibling's median into a %. So the first
    such process of the run reads it (measuring it, where no run has yet) and leaves it
    for the others. None at a commit whose ltx2k takes no bandwidth argument: its
    ``pct_of_copy_bandwidth`` looks it up itself.
    """
    import inspect

    from ltx2k.measure import bandwidth, suite

    if "bw" not in inspect.signature(suite.pct_of_copy_bandwidth).parameters:
        return None
    bw = _SIBLINGS.get(_COPY_BANDWIDTH_KEY)
    if bw is None:
        bw = bandwidth.copy_bandwidth(ON_GPU)
        _SIBLINGS.put(_COPY_BANDWIDTH_KEY, bw)
    return bw


def _track_setup(kernel, metric, variant, shape):
    try:
        from ltx2k.measure import suite  # noqa: F401
    except ImportError as e:
        raise NotImplementedError(f"ltx2k.measure unavailable at this commit: {e}") from e
    _check_metric(variant, metric, kernel)
    cases = _installed_cases()
    _check_kernel(cases, kernel)
    cases.variant_fn(kernel, variant)  # VariantUnavailable is a NotImplementedError


# asv versions a benchmark by a hash of its source and hides results of any
# other version from its pages. These benchmarks' sources changed without a
# change to what they measure (the allocation counts moved to one shared
# process; the calibrated host latency also writes each process's value for
# ltx2k confirm; % of copy bandwidth reads the cold-L2 median its cell's
# time_device_cold process measured, the same quantity it measured itself
# before), so they keep the versions asv computed before, and their history
# stays on asv's pages. tests/test_suite_module.py holds every version.
PINNED_VERSIONS = {
    "track_allocations": "c83aa27d7abe5bb24906314d2a0c6902451bc94bb3bd3cd6c485d48cbc87ac1b",
    "track_host_calibrated": "0a48f240bd1c4ac7dca0a3c9494c2265bdafdf7471b60aa21a91af081ced9be3",
    "track_pct_copy_bandwidth": "958f9e4fe1b72a4d34f908b3edcf546548b0119e413c21abaae6c77d4267d05f",
}


class _Proxy:
    """asv reads ``timer`` before setup has built the clock; forward to it."""

    def __call__(self):
        return _State.timed.timer()


def _suite(kernel: str, class_name: str):
    variants, shape_list = _KERNELS[kernel]

    class Suite:
        params = [list(variants), [s.label for s in shape_list]]
        param_names = ["variant", "shape"]
        timeout = 300
        timer = _Proxy()
        number = 1  # each body call is a whole graph replay / host batch
        # (min samples, max samples, max seconds). The interpreter is ~1e5x
        # slower than a GPU: its machine takes a few samples in one round.
        # One round: a GPU sample is a whole graph replay over >= 3x L2 of
        # inputs, so samples are stable within a process; measured on the H200,
        # 2 rounds x up to 2 s per process made the suite cost ~23 min/commit.
        repeat = (10, 20, 0.5) if ON_GPU else (2, 3, 0.5)
        rounds = 1
        # No time-based warm-up: setup warms each clock once, deterministically (the JIT,
        # the graph capture, one replay per graph, one host batch). asv's 0.05 s of
        # warm-up calls cost every one of ~270 processes that much again for nothing.
        warmup_time = 0

        def time_device_cold(self, variant, shape):
            _State.timed.run()

        def time_device_warm(self, variant, shape):
            _State.timed.run()

        def time_host_latency(self, variant, shape):
            _State.timed.run()

        def time_host_launch(self, launch, shape):
            _State.timed.run()

        def time_host_context(self, context, shape):
            _State.timed.run()

        def time_device_launch(self, launch, shape):
            _State.timed.run()

        def time_kernel(self, variant, shape):
            _State.timed.run()

        def track_allocations(self, counts, variant, shape):
            return counts[(kernel, variant, shape)][1]

        def track_pct_copy_bandwidth(self, variant, shape):
            from ltx2k.measure import suite

            # The cold-L2 device time this commit's time_device_cold process of the same
            # cell measured (its median, behind the same correctness gate), when it ran
            # earlier in this run; otherwise measured here, as that process would.
            cold = _SIBLINGS.get(_cold_key(kernel, variant, shape))
            if cold is not None and hasattr(suite, "pct_of_copy_bandwidth"):
                bw = _copy_bandwidth_of_this_run()
                if bw is None:
                    return suite.pct_of_copy_bandwidth(kernel, _shape(kernel, shape), cold)
                return suite.pct_of_copy_bandwidth(kernel, _shape(kernel, shape), cold, bw=bw)
            return suite.pct_copy_bandwidth(kernel, variant, _shape(kernel, shape))

        def track_host_calibrated(self, variant, shape):
            import statistics

            from ltx2k.measure import suite

            values = suite.host_calibrated(kernel, variant, _shape(kernel, shape))
            # asv keeps the median only; ltx2k confirm judges an A/B on every process.
            name = f"{__name__.rpartition('.')[2]}.{type(self).__name__}.track_host_calibrated"
            _PROCESS_VALUES.append(name, (variant, shape), values)
            return statistics.median(values)

        # Its own parameters, so no process is spent on cells it does not time.
        track_host_calibrated.params = [
            [_VARIANTS.DEFAULT_VARIANT[kernel]],
            [s.label for s in _metric_shapes(kernel, "host_calibrated", shape_list)],
        ]
        track_host_calibrated.param_names = ["variant", "shape"]
        track_host_calibrated.setup = functools.partial(_host_calibrated_setup, kernel)
        track_host_calibrated.unit = "torch.add calls"

        # Kernel duration: every variant at the shapes where it tells more than the
        # graph-replay device time, plus one where the two must agree.
        time_kernel.params = [
            list(variants),
            [s.label for s in _metric_shapes(kernel, "kernel", shape_list)],
        ]
        time_kernel.param_names = ["variant", "shape"]
        time_kernel.setup = functools.partial(_prepare, kernel, "kernel")

        # Each metric lists only the variants it times, so asv spends no process on
        # a cell that would only skip (the peer's metrics, the interpreter's).
        for fn, metric in (
            (time_device_cold, "device_cold"),
            (time_device_warm, "device_warm"),
            (time_host_latency, "host"),
            (track_allocations, "allocations"),
            (track_pct_copy_bandwidth, "pct_copy_bandwidth"),
        ):
            fn.params = [
                _timed_variants(variants, metric, kernel),
                [s.label for s in _metric_shapes(kernel, metric, shape_list)],
            ]
            fn.param_names = ["variant", "shape"]
        time_kernel.params[0] = _timed_variants(variants, "kernel", kernel)

        time_device_cold.setup = functools.partial(_prepare, kernel, "device_cold")
        time_device_cold.teardown = functools.partial(_leave_cold_median, kernel)
        time_device_warm.setup = functools.partial(_prepare, kernel, "device_warm")
        time_host_latency.setup = functools.partial(_prepare, kernel, "host")
        # The default algorithm through each host launch path (time_host_latency
        # times every variant as a caller gets it, launch "auto").
        time_host_launch.params = [
            list(_VARIANTS.LAUNCH_PATHS),
            [s.label for s in _metric_shapes(kernel, "host_launch", shape_list)],
        ]
        time_host_launch.param_names = ["launch", "shape"]
        time_host_launch.setup = functools.partial(_host_launch_setup, kernel)
        # The default algorithm in each call context: plain tensors, and as the model
        # calls it (its weights an nn.Parameter, inference mode; ltx2k/workload/contexts.py).
        time_host_context.params = [
            list(_CONTEXT_NAMES),
            [s.label for s in _metric_shapes(kernel, "host_context", shape_list)],
        ]
        time_host_context.param_names = ["context", "shape"]
        time_host_context.setup = functools.partial(_host_context_setup, kernel)
        # Cold-L2 device time of the default algorithm through each host launch path: under
        # programmatic dependent launch it depends on the path (time_device_cold times the
        # default through the callers' path, "auto").
        time_device_launch.params = [
            list(_VARIANTS.LAUNCH_PATHS),
            [s.label for s in _metric_shapes(kernel, "device_launch", shape_list)],
        ]
        time_device_launch.param_names = ["launch", "shape"]
        time_device_launch.setup = functools.partial(_device_launch_setup, kernel)
        track_allocations.setup_cache = _count_allocations
        track_allocations.setup = functools.partial(_counted_setup, kernel)
        track_allocations.unit = "allocations"
        track_pct_copy_bandwidth.setup = functools.partial(
            _track_setup, kernel, "pct_copy_bandwidth"
        )
        track_pct_copy_bandwidth.unit = "%"

    for name, version in PINNED_VERSIONS.items():
        getattr(Suite, name).version = version
    # A metric that times no shape of this kernel on this machine is no benchmark of its
    # class: asv would keep an empty parameter grid for it (a new kernel need not be in
    # every opt-in list of shapes.json).
    for name, fn in list(vars(Suite).items()):
        if callable(fn) and name.startswith(("time_", "track_")) and not all(fn.params):
            delattr(Suite, name)
    Suite.__name__ = Suite.__qualname__ = class_name
    return Suite


# One asv class per kernel, named by the working tree's variants.ASV_CLASS (the first part
# of each of its benchmarks' names): SplitRope, AdaValues9, SplitRopePair, QKNormRopePair.
for _kernel, _class_name in _VARIANTS.ASV_CLASS.items():
    globals()[_class_name] = _suite(_kernel, _class_name)
