"""The asv suite module's own decisions (benchmarks/bench_kernels.py), without running asv:
which cells skip and why, where its parameters come from, and its environment defaults."""

from __future__ import annotations

import ast
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ltx2k.measure import device_time
from ltx2k.workload import cases, shapes, variants

ROOT = Path(__file__).resolve().parent.parent
L2 = 60 << 20  # the H200's


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location(
        "_bench_kernels_under_test", ROOT / "benchmarks" / "bench_kernels.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _imported_on_gpu(bench) -> bool:
    """Whether the suite module decided, at import, that it runs on a GPU (its parameter
    lists are fixed then; the ``on_gpu`` fixture patches only the later decisions)."""
    return [s.label for s in bench._KERNELS["split_rope"][1]] == [
        s.label for s in shapes.ROPE_SHAPES
    ]


@pytest.fixture
def on_gpu(bench, monkeypatch):
    monkeypatch.setattr(bench, "ON_GPU", True)
    monkeypatch.setattr(device_time, "l2_bytes", lambda device=None: L2)
    return bench


@pytest.mark.parametrize(
    "kernel, shape, skipped",
    [
        ("ada_values9", shapes.AdaShape(2, 6144, 4096), True),  # 1.7 GiB per set
        ("ada_values9", shapes.AdaShape(1, 1024, 4096), True),  # 144 MiB
        ("ada_values9", shapes.AdaShape(1, 1, 4096), False),
        ("split_rope", shapes.RopeShape(1, 16384, 32, 128), True),
        ("split_rope", shapes.RopeShape(4, 1152, 32, 128), False),  # 108 MiB < 120 MiB
        ("split_rope", shapes.RopeShape(1, 1024, 32, 128), False),
    ],
    ids=lambda v: getattr(v, "label", str(v)),
)
def test_warm_l2_is_skipped_only_where_one_set_is_twice_the_l2(on_gpu, kernel, shape, skipped):
    nbytes = cases.KERNELS[kernel].bytes_moved(shape)
    assert (nbytes >= 2 * L2) == skipped  # the premise of each case
    if skipped:
        with pytest.raises(NotImplementedError, match=f"warm L2 is cold L2 at {shape.label}"):
            on_gpu._skip_warm_beyond_l2(kernel, shape)
    else:
        on_gpu._skip_warm_beyond_l2(kernel, shape)


def test_warm_skip_boundary_is_inclusive(on_gpu, monkeypatch):
    shape = shapes.RopeShape(1, 1024, 32, 128)
    n = cases.KERNELS["split_rope"].bytes_moved(shape)
    monkeypatch.setattr(device_time, "l2_bytes", lambda device=None: n // 2)
    with pytest.raises(NotImplementedError):
        on_gpu._skip_warm_beyond_l2("split_rope", shape)
    monkeypatch.setattr(device_time, "l2_bytes", lambda device=None: n // 2 + 1)
    on_gpu._skip_warm_beyond_l2("split_rope", shape)


def test_no_warm_skip_in_the_interpreter(bench, monkeypatch):
    monkeypatch.setattr(bench, "ON_GPU", False)
    bench._skip_warm_beyond_l2("ada_values9", shapes.AdaShape(2, 6144, 4096))


@pytest.mark.parametrize(
    "variant, metric, allowed",
    [
        ("compiled", "host", True),
        ("compiled", "device_cold", True),
        ("compiled", "device_warm", False),
        ("compiled", "allocations", False),
        ("blocked", "device_warm", True),
        ("slab_dconst", "device_cold", True),
        ("unfused_compiled", "host", True),
        ("unfused_compiled", "device_warm", False),
        ("unfused_compiled", "allocations", False),
        ("two_launches", "device_warm", True),
        ("unfused_ltx2k", "allocations", True),
    ],
)
def test_metric_sets_per_variant(on_gpu, variant, metric, allowed):
    if allowed:
        on_gpu._check_metric(variant, metric)
    else:
        with pytest.raises(NotImplementedError, match=variant):
            on_gpu._check_metric(variant, metric)


@pytest.mark.parametrize("variant", variants.COMPILED_VARIANTS)
def test_compiled_peers_are_gpu_only(bench, monkeypatch, variant):
    monkeypatch.setattr(bench, "ON_GPU", False)
    with pytest.raises(NotImplementedError, match="GPUs only"):
        bench._check_metric(variant, "host")


def test_params_are_the_working_tree_lists(bench):
    # the lists of this machine's kind, fixed at import: a GPU's or the interpreter's
    rope, ada = (
        (shapes.ROPE_SHAPES, shapes.ADA_SHAPES)
        if _imported_on_gpu(bench)
        else (shapes.ROPE_SHAPES_CPU, shapes.ADA_SHAPES_CPU)
    )
    names, labels = bench.SplitRope.params
    assert names == list(variants.TIMED_VARIANTS["split_rope"])
    assert labels == [s.label for s in rope]
    names, labels = bench.AdaValues9.params
    assert names == list(variants.TIMED_VARIANTS["ada_values9"])
    assert labels == [s.label for s in ada]
    # every kernel of the data has its class, named as the data says
    for kernel, class_name in variants.ASV_CLASS.items():
        names, labels = getattr(bench, class_name).params
        assert names == list(variants.TIMED_VARIANTS[kernel])
        assert labels == [s.label for s in shapes.shapes_of(kernel, _imported_on_gpu(bench))]
    assert list(variants.ASV_CLASS)[-2:] == ["split_rope_pair", "qknorm_rope_pair"]
    assert bench.SplitRopePair.__name__ == "SplitRopePair"
    assert bench.QKNormRopePair.__name__ == "QKNormRopePair"


def _gpu_class(bench, monkeypatch, kernel):
    """*kernel*'s asv class as a GPU runner builds it (the module fixes its classes at
    import, here in the interpreter)."""
    monkeypatch.setattr(bench, "ON_GPU", True)
    gpu = {k: (v, shapes.shapes_of(k, True)) for k, (v, _) in bench._KERNELS.items()}
    monkeypatch.setattr(bench, "_KERNELS", gpu)
    return bench._suite(kernel, variants.ASV_CLASS[kernel])


def _benchmarks(cls) -> dict:
    return {n: fn.params for n, fn in vars(cls).items() if n.startswith(("time_", "track_"))}


@pytest.mark.parametrize("kernel", ["split_rope_pair", "qknorm_rope_pair"])
def test_the_attention_prologue_kernels_metrics_on_a_gpu(bench, monkeypatch, kernel):
    """Cold device time (and % of copy bandwidth, derived from it) at every GPU shape for
    every variant; host latency at the decode shape for all but the other device
    algorithm, allocations there; the fused prologue's call contexts there too (its
    weights are the model's Parameters); nothing else: a metric the data file lists no
    shape of is no benchmark of the class."""
    spec = cases.KERNELS[kernel]
    every = [s.label for s in spec.gpu_shapes]
    decode = ["B4_Sq25_Sk25_H32_D64_shared"]
    untimed_compiled = [v for v in spec.variants if v not in variants.COMPILED_VARIANTS]
    expected = {
        "time_device_cold": [list(spec.variants), every],
        "track_pct_copy_bandwidth": [untimed_compiled, every],
        "time_host_latency": [
            [v for v in spec.variants if v not in variants.OTHER_ALGORITHMS[kernel]],
            decode,
        ],
        "track_allocations": [untimed_compiled, decode],
    }
    if kernel == "qknorm_rope_pair":
        expected["time_host_context"] = [["plain", "model"], decode]
    assert _benchmarks(_gpu_class(bench, monkeypatch, kernel)) == expected
    # the older kernels keep every benchmark
    assert len(_benchmarks(_gpu_class(bench, monkeypatch, "split_rope"))) == 10


def test_a_kernel_the_benchmarked_commit_lacks_skips_every_cell(bench, monkeypatch):
    """The suite is the working tree's; a commit from before a kernel has no KernelSpec of
    it: each of its cells skips (NotImplementedError), the shared allocation counts too."""
    import types

    old = types.SimpleNamespace(
        KERNELS={k: v for k, v in cases.KERNELS.items() if k in ("split_rope", "ada_values9")},
        variant_fn=cases.variant_fn,
    )
    monkeypatch.setattr(bench, "_installed_cases", lambda: old)
    label = bench._KERNELS["split_rope_pair"][1][0].label
    for call in (
        lambda: bench._prepare("split_rope_pair", "device_cold", "tiled_pdl", label),
        lambda: bench._track_setup("qknorm_rope_pair", "pct_copy_bandwidth", "row", label),
        lambda: bench._host_calibrated_setup("split_rope_pair", "tiled_pdl", label),
    ):
        with pytest.raises(NotImplementedError, match="no kernel '.*' at this commit"):
            call()
    from ltx2k.measure import suite

    monkeypatch.setattr(suite, "allocations", lambda kernel, variant, shape: 1)
    counts = bench._count_allocations()
    new = {k: v for k, v in counts.items() if k[0] in ("split_rope_pair", "qknorm_rope_pair")}
    assert new and all(status == "skip" for status, _ in new.values())
    assert counts[("split_rope", "blocked", bench._KERNELS["split_rope"][1][0].label)][0] == "ok"


@pytest.mark.parametrize("name", ["TORCHINDUCTOR_COMPILE_THREADS", "CUDA_DEVICE_MAX_CONNECTIONS"])
@pytest.mark.parametrize("given, expected", [(None, "1"), ("4", "4")])
def test_the_suites_process_settings_hold_unless_told_otherwise(name, given, expected):
    """Inductor compiles in the process and CUDA opens one hardware queue, each unless the
    runner's environment says otherwise, before the suite imports torch."""
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != name}
    if given is not None:
        env[name] = given
    path = str(ROOT / "benchmarks" / "bench_kernels.py")
    code = (
        "import importlib.util, os, sys\n"
        f"spec = importlib.util.spec_from_file_location('b', {path!r})\n"
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
        f"print(os.environ[{name!r}])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    assert out[-1] == expected


def test_calibrated_host_latency_times_only_the_default_variant_at_host_bound_shapes(on_gpu):
    for kernel, spec in cases.KERNELS.items():
        suite = getattr(on_gpu, spec.asv_class)
        if not hasattr(suite, "track_host_calibrated"):  # no host-bound shape of it listed
            assert _imported_on_gpu(on_gpu) and not shapes.HOST_BOUND_SHAPES[kernel]
            continue
        fn = suite.track_host_calibrated
        assert fn.param_names == ["variant", "shape"]
        # params are fixed at import: on a GPU the host-bound shapes, in the interpreter
        # its own shapes
        assert fn.params[0] == [variants.DEFAULT_VARIANT[kernel]]
        expected = shapes.HOST_BOUND_SHAPES[kernel] if _imported_on_gpu(on_gpu) else spec.cpu_shapes
        assert fn.params[1] == [s.label for s in expected]
        assert set(shapes.HOST_BOUND_SHAPES[kernel]) <= set(spec.gpu_shapes)
        assert fn.unit == "torch.add calls"


def test_calibrated_host_latency_skips_a_commit_without_it(bench, monkeypatch):
    from ltx2k.measure import suite

    monkeypatch.delattr(suite, "host_calibrated")
    with pytest.raises(NotImplementedError, match="not measured at this commit"):
        bench._host_calibrated_setup("split_rope", "blocked_native", "B1_S4_H3_D64")


def test_every_variant_row_is_timed_on_device_and_the_launch_paths_on_host(bench):
    """No cell without a number: every variant is timed for cold-L2 device time; the
    default, sglang's kernels and the non-compiled peers for every device and host metric;
    the default algorithm's host launch paths are a benchmark of their own."""
    for kernel, spec in cases.KERNELS.items():
        others = variants.OTHER_ALGORITHMS[kernel]
        for variant in spec.variants:
            if variant in variants.COMPILED_VARIANTS:
                continue
            bench._check_metric(variant, "device_cold", kernel)
            if variant in others:
                continue
            for metric in ("device_warm", "host", "allocations"):
                bench._check_metric(variant, metric, kernel)
        suite = getattr(bench, spec.asv_class)
        if hasattr(suite, "time_host_launch"):  # on a GPU: where the data file lists shapes
            assert suite.time_host_launch.param_names == ["launch", "shape"]
            assert suite.time_host_launch.params[0] == list(variants.LAUNCH_PATHS)
    from ltx2k.measure import suite as measure_suite

    assert measure_suite.device_launch("blocked") == "triton"
    assert measure_suite.device_launch("eager") == "auto"
    # the default variant's device time is timed through the path its callers take
    for kernel, default in variants.DEFAULT_VARIANT.items():
        assert measure_suite.device_launch(default, kernel) == "auto"
        assert measure_suite.device_launch("per_head", kernel) == "triton"
        for peer in cases.KERNELS[kernel].peers:
            assert measure_suite.device_launch(peer, kernel) == "auto"
        suite = getattr(bench, cases.KERNELS[kernel].asv_class)
        if hasattr(suite, "time_device_launch"):
            assert suite.time_device_launch.param_names == ["launch", "shape"]
            assert suite.time_device_launch.params[0] == list(variants.LAUNCH_PATHS)


def test_kernel_duration_covers_every_variant_at_its_shapes(bench):
    for kernel, spec in cases.KERNELS.items():
        if not shapes.KERNEL_TIME_SHAPES[kernel]:
            continue  # not timed for kernel duration on GPUs (the interpreter times all)
        fn = getattr(bench, spec.asv_class).time_kernel
        assert fn.param_names == ["variant", "shape"]
        # every variant timed for it (not "tiled_pdl": VARIANT_METRICS; not another device
        # algorithm: variants.OTHER_ALGORITHMS); the torch.compile peer on GPUs only
        assert fn.params[0] == [
            v
            for v in spec.variants
            if "kernel" in bench.VARIANT_METRICS.get(v, ("kernel",))
            and v not in variants.OTHER_ALGORITHMS[kernel]
            and (v not in variants.COMPILED_VARIANTS or _imported_on_gpu(bench))
        ]
        assert set(shapes.KERNEL_TIME_SHAPES[kernel]) <= set(spec.gpu_shapes)
        # a decode shape (below the graph floor) and one the device time must agree at
        assert any(
            s.label in [h.label for h in shapes.HOST_BOUND_SHAPES[kernel]]
            for s in shapes.KERNEL_TIME_SHAPES[kernel]
        )
        assert any(
            cases.KERNELS[kernel].bytes_moved(s) > 20 << 20
            for s in shapes.KERNEL_TIME_SHAPES[kernel]
        )


@pytest.mark.parametrize(
    "kernel, variant, metric, allowed",
    [
        ("split_rope", "tiled", "device_cold", True),
        ("split_rope", "tiled", "pct_copy_bandwidth", True),
        ("split_rope", "tiled", "allocations", True),
        ("split_rope", "tiled", "host", False),
        ("split_rope", "blocked", "device_warm", False),
        ("split_rope", "blocked_wide", "kernel", False),
        ("split_rope", "per_head", "host", True),  # sglang's kernel: every metric
        ("split_rope", "tiled_pdl", "host", True),  # the default
        ("ada_values9", "slab_grid", "kernel", False),
        ("ada_values9", "separate", "kernel", True),
        ("split_rope_pair", "tiled", "host", False),
        ("split_rope_pair", "row", "host", True),
        ("qknorm_rope_pair", "tiled", "device_cold", True),
        ("qknorm_rope_pair", "tiled", "host", False),
    ],
)
def test_other_algorithms_are_timed_for_device_time(on_gpu, kernel, variant, metric, allowed):
    if allowed:
        on_gpu._check_metric(variant, metric, kernel)
    else:
        with pytest.raises(NotImplementedError, match="another device algorithm"):
            on_gpu._check_metric(variant, metric, kernel)
    # without a kernel the variant's own list alone decides (a name is not a role)
    on_gpu._check_metric("tiled", "host")


def test_other_algorithms_are_the_variants_no_role_claims():
    """OTHER_ALGORITHMS is the data's rule, written out: every timed variant that is not
    the default, not sglang's kernel and not a peer. A new kernel's entry must agree."""
    assert set(variants.OTHER_ALGORITHMS) == set(variants.TIMED_VARIANTS)
    for kernel, timed in variants.TIMED_VARIANTS.items():
        roles = {
            variants.DEFAULT_VARIANT[kernel],
            variants.BASELINE_VARIANT.get(kernel),
            variants.UPSTREAM_CURRENT_VARIANT.get(kernel),
            *cases.KERNELS[kernel].peers,
        }
        assert set(variants.OTHER_ALGORITHMS[kernel]) == set(timed) - roles, kernel


def test_other_algorithms_leave_their_metrics_params(on_gpu):
    """No process for a cell the rule drops: the params of host latency, warm L2 and kernel
    duration omit them; cold L2, % of copy bandwidth and allocations keep them."""
    for kernel, spec in cases.KERNELS.items():
        suite = getattr(on_gpu, spec.asv_class)
        for variant in variants.OTHER_ALGORITHMS[kernel]:
            for name in ("time_host_latency", "time_device_warm", "time_kernel"):
                fn = getattr(suite, name, None)
                assert fn is None or variant not in fn.params[0], (kernel, name, variant)
            for name in ("time_device_cold", "track_pct_copy_bandwidth", "track_allocations"):
                assert variant in getattr(suite, name).params[0], (kernel, name, variant)


def test_metrics_list_only_the_variants_they_time(on_gpu):
    """A cell that would only skip costs a benchmark process: the peer's untimed metrics
    and the interpreter's compile peer are not parameters at all."""
    assert on_gpu._timed_variants(("blocked", "compiled"), "device_warm") == ["blocked"]
    assert on_gpu._timed_variants(("blocked", "compiled"), "kernel") == ["blocked", "compiled"]
    for spec in cases.KERNELS.values():
        suite = getattr(on_gpu, spec.asv_class)
        assert not set(variants.COMPILED_VARIANTS) & set(suite.track_allocations.params[0])
    # PDL overlaps launches: a CUPTI kernel duration would count the wait for the one before
    rope_suite = on_gpu.SplitRope
    assert "tiled_pdl" not in rope_suite.time_kernel.params[0]
    for fn in (rope_suite.time_device_cold, rope_suite.time_host_latency):
        assert "tiled_pdl" in fn.params[0]


def test_kernel_duration_skips_a_commit_without_it(bench, monkeypatch):
    from ltx2k.measure import suite

    monkeypatch.setattr(suite, "METRICS", ("device_cold", "device_warm", "host"))
    with pytest.raises(NotImplementedError, match="'kernel' is not measured at this commit"):
        bench._prepare("split_rope", "kernel", "per_head", "B1_S4_H3_D64")


def test_allocation_counts_share_one_setup_cache_process(bench):
    """asv runs one setup_cache per key (module:line of the function): both kernels'
    allocation counts must name the same function, so one process counts them all. The
    timed metrics keep a process per cell."""
    import inspect

    keys = set()
    for spec in cases.KERNELS.values():
        suite = getattr(bench, spec.asv_class)
        fn = suite.track_allocations
        assert fn.setup_cache is bench._count_allocations
        keys.add((inspect.getsourcefile(fn.setup_cache), inspect.getsourcelines(fn.setup_cache)[1]))
        for timed in (suite.time_device_cold, suite.track_pct_copy_bandwidth):
            assert not hasattr(timed, "setup_cache")
        assert not hasattr(suite, "setup_cache")
    assert len(keys) == 1


def test_shared_counts_are_every_cells_count_as_its_own_process_gives(bench):
    from ltx2k.measure import suite

    counts = bench._count_allocations()
    expected = {
        (kernel, variant, shape.label)
        for kernel, (variants_, shape_list) in bench._KERNELS.items()
        for variant in bench._timed_variants(variants_, "allocations")
        for shape in shape_list
    }
    assert set(counts) == expected
    for (kernel, variant, label), (status, value) in counts.items():
        assert status == "ok", (kernel, variant, label, value)
        assert value == suite.allocations(kernel, variant, bench._shape(kernel, label))
        suite_cls = getattr(bench, cases.KERNELS[kernel].asv_class)
        bench._counted_setup(kernel, counts, variant, label)  # does not raise
        assert suite_cls().track_allocations(counts, variant, label) == value


def test_one_bad_cell_fails_or_skips_alone(bench, monkeypatch):
    """A cell whose count raises (a failed correctness gate) fails in its own asv process
    and no other; a variant this commit lacks skips; a commit without the measurement
    core skips every cell."""
    from ltx2k.measure import suite

    def allocations(kernel, variant, shape):
        if variant == "slab":
            raise AssertionError("slab differs from the reference at element 7")
        if variant == "eager":
            raise cases.VariantUnavailable("eager is not in this commit")
        return 1

    monkeypatch.setattr(suite, "allocations", allocations)
    counts = bench._count_allocations()
    label = bench._KERNELS["ada_values9"][1][0].label  # this machine's shapes (GPU or CPU)
    rope_label = bench._KERNELS["split_rope"][1][0].label
    assert counts[("ada_values9", "slab", label)][0] == "error"
    with pytest.raises(RuntimeError, match="slab differs from the reference at element 7"):
        bench._counted_setup("ada_values9", counts, "slab", label)
    with pytest.raises(NotImplementedError, match="eager is not in this commit"):
        bench._counted_setup("ada_values9", counts, "eager", label)
    for key in [
        ("ada_values9", "slab_dconst", label),
        ("split_rope", "blocked", rope_label),
    ]:
        assert counts[key] == ("ok", 1), key
    gone = {"*": ("skip", "ltx2k.measure unavailable at this commit")}
    with pytest.raises(NotImplementedError, match="unavailable at this commit"):
        bench._counted_setup("ada_values9", gone, "slab", label)
    with pytest.raises(NotImplementedError):  # a cell the cache does not know
        bench._counted_setup("ada_values9", {}, "slab", label)


def test_shared_counts_drop_each_cells_prepared_state(bench, monkeypatch):
    """What a cell prepared (gated functions, clocks with GBs of inputs at the large GPU
    shapes) is released before the next: the prepared cache is empty at each cell."""
    from ltx2k.measure import suite

    sizes = []

    def allocations(kernel, variant, shape):
        sizes.append(len(suite._CACHE))
        suite.prepare(kernel, variant, shape, "device_cold")  # its gate and clock, cached
        return 1

    monkeypatch.setattr(suite, "allocations", allocations)
    bench._count_allocations()
    assert len(sizes) > 4 and max(sizes) == 0, sizes


def _cold_cell(bench, kernel):
    variant = bench._KERNELS[kernel][0][0]
    return variant, bench._KERNELS[kernel][1][0].label


@pytest.mark.parametrize("kernel", list(cases.KERNELS))
def test_bandwidth_reads_the_cold_median_its_cells_cold_process_left(bench, monkeypatch, kernel):
    """As asv runs them: the time_device_cold process of a cell (setup, samples with a
    teardown after each, as asv's redo_setup does) leaves its median; the bandwidth process
    of the same cell turns it into % of copy bandwidth without timing the kernel again."""
    from ltx2k.measure import suite

    monkeypatch.setattr(
        bench, "_SIBLINGS", bench._load_tree_module("runner", "sibling_values").SiblingValues()
    )
    variant, label = _cold_cell(bench, kernel)
    cls = getattr(bench, cases.KERNELS[kernel].asv_class)
    body = cls()
    for _ in range(3):
        cls.time_device_cold.setup(variant, label)
        t0 = cls.timer()
        body.time_device_cold(variant, label)
        assert cls.timer() > t0
        cls.time_device_cold.teardown(variant, label)
    samples = bench._State.timed.timer.samples
    assert len(samples) == 3
    median = sorted(samples)[1]
    assert bench._SIBLINGS.get(bench._cold_key(kernel, variant, label)) == median

    def measured_again(*a):
        raise AssertionError("the bandwidth cell timed the kernel again")

    monkeypatch.setattr(suite, "pct_copy_bandwidth", measured_again)
    got = body.track_pct_copy_bandwidth(variant, label)
    assert got == suite.pct_of_copy_bandwidth(kernel, bench._shape(kernel, label), median)
    # Another cell of the same kernel has no value left: it would measure.
    other = bench._KERNELS[kernel][0][1]
    with pytest.raises(AssertionError, match="timed the kernel again"):
        body.track_pct_copy_bandwidth(other, label)


def test_only_the_first_bandwidth_cell_of_a_run_looks_up_the_copy_bandwidth(bench, monkeypatch):
    """Looking the copy bandwidth up asks torch which GPU this is (a CUDA context, most of a
    bandwidth cell's cost on a GPU): the first cell of the run leaves it, the others read
    it, and every cell gets the value it would have computed itself."""
    from ltx2k.measure import bandwidth, suite

    monkeypatch.setattr(
        bench, "_SIBLINGS", bench._load_tree_module("runner", "sibling_values").SiblingValues()
    )
    kernel = "split_rope"
    (v1, v2), label = bench._KERNELS[kernel][0][:2], bench._KERNELS[kernel][1][0].label
    shape = bench._shape(kernel, label)
    medians = {v1: 3.25e-6, v2: 7.5e-6}
    for v, m in medians.items():
        bench._SIBLINGS.put(bench._cold_key(kernel, v, label), m)
    expected = {v: suite.pct_of_copy_bandwidth(kernel, shape, m) for v, m in medians.items()}
    looked_up = []
    real = bandwidth.copy_bandwidth
    monkeypatch.setattr(bandwidth, "copy_bandwidth", lambda *a: looked_up.append(a) or real(*a))
    body = bench.SplitRope()
    assert body.track_pct_copy_bandwidth(v1, label) == expected[v1]
    assert len(looked_up) == 1
    assert bench._SIBLINGS.get(bench._COPY_BANDWIDTH_KEY) == real(bench.ON_GPU)

    def no_lookup(*a):
        raise AssertionError("a later bandwidth cell looked the copy bandwidth up again")

    monkeypatch.setattr(bandwidth, "copy_bandwidth", no_lookup)
    assert body.track_pct_copy_bandwidth(v2, label) == expected[v2]


def test_a_copy_bandwidth_that_is_not_positive_is_refused_by_name():
    from ltx2k.measure import suite

    shape = cases.KERNELS["split_rope"].cpu_shapes[0]
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="bw must be > 0"):
            suite.pct_of_copy_bandwidth("split_rope", shape, 1e-6, bw=bad)


def test_without_a_cold_value_the_bandwidth_cell_measures_it_itself(bench, monkeypatch):
    from ltx2k.measure import suite

    monkeypatch.setattr(
        bench, "_SIBLINGS", bench._load_tree_module("runner", "sibling_values").SiblingValues()
    )
    variant, label = _cold_cell(bench, "split_rope")
    calls = []
    monkeypatch.setattr(suite, "pct_copy_bandwidth", lambda *a: calls.append(a) or 42.0)
    assert bench.SplitRope().track_pct_copy_bandwidth(variant, label) == 42.0
    assert calls == [("split_rope", variant, bench._shape("split_rope", label))]


def test_a_cold_process_that_measured_nothing_leaves_nothing(bench, monkeypatch):
    """A teardown after a skipped setup, or for another cell than the one prepared, must not
    leave that other cell's samples under this cell's name."""
    monkeypatch.setattr(
        bench, "_SIBLINGS", bench._load_tree_module("runner", "sibling_values").SiblingValues()
    )
    variant, label = _cold_cell(bench, "split_rope")
    other = bench._KERNELS["split_rope"][0][1]
    bench.SplitRope.time_device_cold.setup(variant, label)
    bench.SplitRope().time_device_cold(variant, label)
    bench.SplitRope.timer()
    bench._leave_cold_median("split_rope", other, label)  # prepared: variant, not other
    assert bench._SIBLINGS.get(bench._cold_key("split_rope", other, label)) is None
    from ltx2k.measure import suite

    def unavailable(*args, **kwargs):
        raise cases.VariantUnavailable("not at this commit")

    monkeypatch.setattr(suite, "prepare", unavailable)
    with pytest.raises(NotImplementedError):  # a variant this commit lacks: a skip
        bench.SplitRope.time_device_cold.setup(other, label)
    bench.SplitRope.time_device_cold.teardown(other, label)
    bench.SplitRope.time_device_cold.teardown(variant, label)  # its state went with the skip
    assert bench._SIBLINGS.get(bench._cold_key("split_rope", other, label)) is None
    assert bench._SIBLINGS.get(bench._cold_key("split_rope", variant, label)) is None


@pytest.mark.parametrize(
    "argv, forks_none",
    [
        (["/x/asv/benchmark.py", "discover", "benchmarks", "out.json"], True),
        (["/x/asv/benchmark.py", "check", "benchmarks"], True),
        (["/x/asv/benchmark.py", "setup_cache", "benchmarks", "b.K.track_x", "{}"], True),
        (["/x/asv/benchmark.py", "run_server", "benchmarks", "sock"], False),
        (["/x/pytest", "discover"], False),
    ],
)
def test_asv_processes_that_fork_no_benchmark_skip_the_warm_imports(argv, forks_none):
    """asv's discover, check and setup_cache processes fork no benchmark process: the
    suite module imports neither the kernels nor inductor there; its forkserver
    (run_server) does."""
    import json
    import subprocess
    import sys

    path = str(ROOT / "benchmarks" / "bench_kernels.py")
    code = (
        "import importlib.util, json, sys\n"
        f"sys.argv = {argv!r}\n"
        f"spec = importlib.util.spec_from_file_location('b', {path!r})\n"
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
        "print(json.dumps([m._forks_no_benchmark(), 'ltx2k.kernels.rope' in sys.modules,"
        " len(m.SplitRope.params[1])]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got[:2] == [forks_none, not forks_none]
    assert got[2] > 0  # the parameters are there either way


def test_asvs_setup_cache_process_counts_every_cell_without_the_warm_imports(tmp_path, bench):
    """The allocation counts as asv makes them: its own setup_cache process (a fresh
    interpreter, the suite imported without warming), then one count per cell."""
    import pickle
    import subprocess
    import sys

    import asv

    script = Path(asv.__file__).parent / "benchmark.py"
    got = subprocess.run(
        [
            sys.executable,
            str(script),
            "setup_cache",
            str(ROOT / "benchmarks"),
            "bench_kernels.SplitRope.track_allocations",
            "{}",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert got.returncode == 0, got.stderr[-2000:] + got.stdout[-2000:]
    counts = pickle.loads((tmp_path / "cache.pickle").read_bytes())
    assert counts == bench._count_allocations()
    assert counts and all(status == "ok" for status, _ in counts.values()), counts


# The version asv computes for each benchmark (a hash of its source, or its pinned
# ``version``). asv publish hides every result of another version, so a change here
# hides that benchmark's whole history: pin the old version in
# bench_kernels.PINNED_VERSIONS when what it measures is unchanged, or update this table
# when it truly measures something else (and say so in docs/measurement.md).
VERSIONS = {
    "time_device_cold": "09ebbd6848574343",
    "time_device_warm": "7c96f2bb69c88d91",
    "time_host_latency": "f0a57381cd286b85",
    "time_host_launch": "e151854df8f30a23",
    "time_host_context": "688b434627f5e05b",
    "time_device_launch": "803a293edcd93e1b",
    "time_kernel": "623a28fc747030a9",
    "track_allocations": "c83aa27d7abe5bb2",
    "track_host_calibrated": "0a48f240bd1c4ac7",
    "track_pct_copy_bandwidth": "958f9e4fe1b72a4d",
}


def test_benchmark_versions_keep_the_history_on_asvs_pages(tmp_path):
    """asv's own discovery (the process `asv run` starts) gives every benchmark of both
    kernels the version its stored history has."""
    import json
    import subprocess
    import sys

    import asv

    script = Path(asv.__file__).parent / "benchmark.py"
    out = tmp_path / "benchmarks.json"
    got = subprocess.run(
        [sys.executable, str(script), "discover", str(ROOT / "benchmarks"), str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert got.returncode == 0, got.stderr[-2000:]
    versions = {b["name"]: b["version"][:16] for b in json.loads(out.read_text())}
    assert versions == {
        f"bench_kernels.{spec.asv_class}.{name}": version
        for spec in cases.KERNELS.values()
        for name, version in VERSIONS.items()
    }


def test_opt_in_metrics_time_only_their_listed_shapes_on_a_gpu(on_gpu):
    """Warm L2, host latency, launch paths and allocations time the shapes listed for them in
    the data file; cold-L2 time (and the % derived from it) every shape; the interpreter
    times every metric at each of its own shapes."""

    def labels(kernel, metric, shape_list):
        return [s.label for s in on_gpu._metric_shapes(kernel, metric, shape_list)]

    for kernel, spec in cases.KERNELS.items():
        for metric in ("device_warm", "host", "host_launch", "allocations", "kernel"):
            expected = [s.label for s in shapes.METRIC_SHAPES[metric][kernel]]
            assert labels(kernel, metric, spec.gpu_shapes) == expected
        assert labels(kernel, "device_cold", spec.gpu_shapes) == [s.label for s in spec.gpu_shapes]
    assert "B1_S6144_H32_D64" in [s.label for s in shapes.ROPE_SHAPES]
    assert "B1_S6144_H32_D64" not in labels("split_rope", "device_warm", shapes.ROPE_SHAPES)
    on_gpu.ON_GPU = False
    cpu = [s.label for s in shapes.ROPE_SHAPES_CPU]
    assert labels("split_rope", "host", shapes.ROPE_SHAPES_CPU) == cpu


def _installed_cases_in(tree: Path, files: dict[str, str]) -> subprocess.CompletedProcess:
    """Run the suite's ``_installed_cases`` against a package laid out as *files* say."""
    for rel, text in files.items():
        (tree / rel).parent.mkdir(parents=True, exist_ok=True)
        (tree / rel).write_text(text)
    source = (ROOT / "benchmarks" / "bench_kernels.py").read_text()
    (fn,) = [
        n
        for n in ast.parse(source).body
        if isinstance(n, ast.FunctionDef) and n.name == "_installed_cases"
    ]
    code = f"{ast.get_source_segment(source, fn)}\nprint(_installed_cases().WHERE)"
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run(
        [sys.executable, "-S", "-c", code],  # -S: not the installed ltx2k
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.mark.parametrize(
    "files, want",
    [
        ({"ltx2k/__init__.py": "", "ltx2k/cases.py": "WHERE = 'root'"}, "root"),
        (
            {
                "ltx2k/__init__.py": "",
                "ltx2k/workload/__init__.py": "",
                "ltx2k/workload/cases.py": "WHERE = 'workload'",
            },
            "workload",
        ),
        # A commit whose cases module is broken fails as itself, never as "an old layout".
        (
            {
                "ltx2k/__init__.py": "",
                "ltx2k/workload/__init__.py": "",
                "ltx2k/workload/cases.py": "import no_such_module",
            },
            "error: no_such_module",
        ),
    ],
    ids=["layout_before_workload", "workload_layout", "broken_cases"],
)
def test_the_suite_imports_the_benchmarked_commits_cases_in_either_layout(tmp_path, files, want):
    proc = _installed_cases_in(tmp_path, files)
    if want.startswith("error: "):
        assert proc.returncode != 0 and want.removeprefix("error: ") in proc.stderr
        assert "ltx2k.cases" not in proc.stderr
    else:
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip() == want
