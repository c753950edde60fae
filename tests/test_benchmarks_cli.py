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
