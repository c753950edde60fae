"""Quick local benchmarks with pytest-benchmark: ``pytest --benchmark-only``.

- host latency per call is pytest-benchmark's own statistic (its timer is
  ltx2k.measure.host.synced_perf_counter, set in pyproject: one device sync
  per batch of ``iterations`` calls);
- variants of one shape share a group, so they print side by side;
- cold/warm-L2 device time, GB/s and % of measured copy bandwidth go into
  ``extra_info`` (saved with --benchmark-autosave, compared with
  --benchmark-compare).

Without --benchmark-only these run each case once as a smoke test (CI passes
--benchmark-disable).
"""

from __future__ import annotations

import pytest

from ltx2k import runtime
from ltx2k.workload import cases, variants

ON_GPU = runtime.device() == "cuda"
CASES = [
    (kernel, variant, shape)
    for kernel, spec in cases.KERNELS.items()
    for shape in cases.shapes_for(kernel, ON_GPU)
    for variant in spec.variants
    # inductor's CPU backend compiles C++ for minutes
    if ON_GPU or variant not in variants.COMPILED_VARIANTS
]


@pytest.fixture(scope="module", autouse=True)
def _compiled_peer_compiles_once_per_shape():
    """The torch.compile peer is compiled at static shapes, one graph per shape, and here
    every shape runs in one process (asv gives each cell a process of its own). Past
    dynamo's recompile limit (8) ``fullgraph=True`` makes the next shape a hard error,
    so the limit is the number of shapes the data file holds, however many that is."""
    from ltx2k.measure import gate

    with gate.recompiles_allowed(max(len(cases.shapes_for(k, ON_GPU)) for k in cases.KERNELS)):
        yield


@pytest.fixture(autouse=True)
def _each_case_frees_its_clocks():
    """Each case's clocks hold CUDA graphs with their rotated cold-L2 input and output
    sets, hundreds of MB at the large shapes. asv frees them with each cell's process;
    here every case runs in one process, and kept they filled an 80 GB H100 by the
    hundredth case. So each case drops what it prepared, graphs and tensors together
    (never one without the other: a graph replays its tensors' addresses)."""
    yield
    from ltx2k.measure import suite

    suite.forget()
    if ON_GPU:
        import torch

        torch.cuda.synchronize()
        torch.cuda.empty_cache()


@pytest.mark.parametrize(
    "kernel,variant,shape", CASES, ids=[f"{k}-{v}-{s.label}" for k, v, s in CASES]
)
def test_kernel(benchmark, kernel, variant, shape):
    from ltx2k.measure import bandwidth, gate, suite

    spec = cases.KERNELS[kernel]
    gate.check_case(kernel, variant, shape, runtime.device())  # never time a wrong kernel
    args = spec.make_inputs(shape, runtime.device(), exact=not ON_GPU)
    fn = cases.variant_fn(kernel, variant)
    benchmark.group = f"{kernel} {shape.label}"
    benchmark.extra_info.update(kernel=kernel, variant=variant, shape=shape.label)
    if not benchmark.disabled:
        cold = suite.device_seconds(kernel, variant, shape, cold=True, samples=10 if ON_GPU else 2)
        warm = suite.device_seconds(kernel, variant, shape, cold=False, samples=10 if ON_GPU else 2)
        nbytes = spec.bytes_moved(shape)
        benchmark.extra_info.update(
            device_cold_us=cold * 1e6,
            device_warm_us=warm * 1e6,
            bytes=nbytes,
            gbps_cold=nbytes / cold / 1e9,
            pct_copy_bw=100 * nbytes / cold / bandwidth.copy_bandwidth(ON_GPU),
        )
    iterations = 50 if ON_GPU else 1
    out = benchmark.pedantic(
        fn, args=args, iterations=iterations, rounds=20 if ON_GPU else 3, warmup_rounds=1
    )
    # as the gate compares it: the kernel's reference, or a peer's own within its tolerance
    check = spec.gate(variant)
    assert check.accepts(out, check.against(*args))
