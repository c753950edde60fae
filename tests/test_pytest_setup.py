"""How the test suite itself is configured: pytest options, plugins, declared extras."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _pyproject() -> dict:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_benchmark_timer_is_the_synced_one(request: pytest.FixtureRequest):
    if not request.config.pluginmanager.hasplugin("benchmark"):
        pytest.skip("pytest-benchmark is not loaded")
    assert request.config.getoption("benchmark_timer") == "ltx2k.measure.host.synced_perf_counter"


def test_addopts_names_no_plugin_option():
    addopts = _pyproject()["tool"]["pytest"]["ini_options"]["addopts"]
    assert "--benchmark" not in addopts


@pytest.mark.parametrize("plugin_args", [["-p", "no:benchmark"], []], ids=["disabled", "loaded"])
def test_pytest_runs_with_and_without_the_benchmark_plugin(plugin_args):
    # One cheap case of the pytest-benchmark file: skipped without the plugin,
    # run once (as a test) with it.
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    extra = [] if plugin_args else ["--benchmark-disable"]
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *plugin_args, *extra]
        + ["tests/test_benchmarks.py", "-k", "ada_values9 and slab_dconst and fp32"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    if plugin_args:
        assert "pytest-benchmark is disabled" in proc.stdout
        assert "passed" not in proc.stdout
    else:
        assert re.search(r"\b1 passed", proc.stdout), proc.stdout


def test_browser_extra_pins_the_playwright_install_browser_installs():
    extra = _pyproject()["project"]["optional-dependencies"]["browser"]
    script = (ROOT / "scripts" / "install_browser.sh").read_text()
    pinned = re.search(r'PLAYWRIGHT_VERSION="\$\{PLAYWRIGHT_VERSION:-([^}]+)\}"', script)
    assert pinned, "install_browser.sh no longer pins playwright"
    assert extra == [f"playwright=={pinned.group(1)}"]


def test_ruff_is_pinned_exactly():
    dev = _pyproject()["project"]["optional-dependencies"]["dev"]
    (ruff,) = [d for d in dev if d.startswith("ruff")]
    assert re.fullmatch(r"ruff==[0-9.]+", ruff), ruff


def test_browser_test_skips_without_playwright(tmp_path: Path):
    # A package that raises what an absent one raises shadows an installed playwright.
    (tmp_path / "playwright").mkdir()
    (tmp_path / "playwright" / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'playwright'\", name='playwright')\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "PYTEST_ADDOPTS")}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env.get("PYTHONPATH", "")]).rstrip(
        os.pathsep
    )
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider"]
        + ["--benchmark-disable", "tests/test_dashboard_browser.py"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    # A skipped module collects no test: exit 5, never 1 (failed) or 2 (collection error).
    assert proc.returncode in (0, pytest.ExitCode.NO_TESTS_COLLECTED), proc.stdout + proc.stderr
    assert "playwright is not installed" in proc.stdout
    assert "skipped" in proc.stdout and "error" not in proc.stdout.lower()
