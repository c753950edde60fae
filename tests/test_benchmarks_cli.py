"""pytest-benchmark's own save/compare options work on our benchmark tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ltx2k.workload import cases

ROOT = Path(__file__).resolve().parent.parent
# A pytest run inside an xdist worker: pytest-benchmark reads the worker's variables as
# "xdist is on" and disables itself, so the child gets an environment without them.
ENV = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}


@pytest.mark.slow
def test_autosave_then_compare(tmp_path):
    store = tmp_path / "bench"
    base = [
        sys.executable,
        "-m",
        "pytest",
        str(ROOT / "tests/test_benchmarks.py"),
        "-q",
        "-p",
        "no:cacheprovider",
        "--benchmark-only",
        f"--benchmark-storage=file://{store}",
        "-k",
        "eager",
    ]
    first = subprocess.run(
        [*base, "--benchmark-autosave"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
        env=ENV,
    )
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
    saved = list(store.rglob("*.json"))
    assert len(saved) == 1
    data = json.loads(saved[0].read_text())
    extra = data["benchmarks"][0]["extra_info"]
    assert {"device_cold_us", "gbps_cold", "pct_copy_bw", "kernel", "variant", "shape"} <= set(
        extra
    )
    groups = {b["group"] for b in data["benchmarks"]}
    # one group per kernel and shape, every kernel of the data
    assert {g.split()[0] for g in groups} == set(cases.KERNELS)
    second = subprocess.run(
        [*base, "--benchmark-compare", "--benchmark-compare-fail=mean:1000%"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
        env=ENV,
    )
    assert second.returncode == 0, second.stdout[-2000:] + second.stderr[-2000:]
    assert "0001" in second.stdout  # the autosaved run is the comparison baseline


@pytest.mark.gpu
def test_gpu_desk_run_passes_at_every_shape_of_the_data():
    """The desk run, ``pytest tests/test_benchmarks.py --benchmark-only``, as a kernel
    engineer types it: one process over every kernel x variant x GPU shape of the data
    file. asv gives each cell a process of its own, so only this run sees what one process
    accumulates across shapes (the compiled peer's recompile limit, the clocks' memory).
    A new shape or kernel in the data must pass here too."""
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    expected = sum(
        len(cases.shapes_for(kernel, True)) * len(spec.variants)
        for kernel, spec in cases.KERNELS.items()
    )
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            str(ROOT / "tests/test_benchmarks.py"),
            "-q",
            "-p",
            "no:cacheprovider",
            "--benchmark-only",
            "--benchmark-columns=median,iqr,rounds",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=1800,
        env=ENV,
    )
    summary = run.stdout.strip().splitlines()[-1] if run.stdout.strip() else ""
    print(f"\ndesk run: {summary}")
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert f"{expected} passed" in summary, summary
