"""Shared fixtures. Importing this module picks the Triton backend.

Triton decides at ``@triton.jit`` decoration time whether a kernel is
interpreted, so the backend must be chosen before any test module imports
``ltx2k.kernels``: conftest.py is imported first, hence the call here.
"""

from __future__ import annotations

import math
import os
import shlex
import signal

import pytest
import torch
from hypothesis import settings

from ltx2k import runtime

BACKEND = runtime.select_backend()
DEVICE = runtime.device()

# Hypothesis profiles for the tests that do not fix their own example count (the
# property tests of what reads runner output, tests/test_partial_histories.py):
# "ci", the default, fits CI's budget; "long" is a deliberate search
# (`pytest --hypothesis-profile=long tests/test_partial_histories.py`; LTX2K_LONG_EXAMPLES
# sets its count, e.g. for chunks of a long search run with different --hypothesis-seed).
settings.register_profile("ci", deadline=None, max_examples=40, print_blob=True)
settings.register_profile(
    "long",
    deadline=None,
    max_examples=int(os.environ.get("LTX2K_LONG_EXAMPLES", "10000")),
    print_blob=True,
)
settings.load_profile("ci")

# One device sync per batch of calls (tests/test_benchmarks.py): the default timer of
# pytest-benchmark here. Set in pytest_configure, not in pyproject's addopts, which
# `pytest -p no:benchmark` would reject as an unknown option.
BENCHMARK_TIMER = "ltx2k.measure.host.synced_perf_counter"


def _given(config: pytest.Config, flag: str) -> bool:
    words = [*config.invocation_params.args, *shlex.split(os.environ.get("PYTEST_ADDOPTS", ""))]
    return any(w == flag or w.startswith(flag + "=") for w in map(str, words))


class _NoBenchmarkPlugin:
    """Stands in for pytest-benchmark's fixture when the plugin is disabled."""

    @pytest.fixture
    def benchmark(self):
        pytest.skip("pytest-benchmark is disabled (-p no:benchmark)")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    # tryfirst: pytest-benchmark reads the timer in its own pytest_configure.
    if not config.pluginmanager.hasplugin("benchmark"):
        config.pluginmanager.register(_NoBenchmarkPlugin(), "ltx2k-no-benchmark")
    elif not _given(config, "--benchmark-timer"):
        config.option.benchmark_timer = BENCHMARK_TIMER


class _PoisonTorch:
    """Stands in for ``torch`` inside a kernel module: ``empty``/``empty_like`` return NaN.

    The launchers allocate outputs with ``torch.empty``; a NaN-filled output
    proves every element was written by the kernel (the exact inputs never
    produce NaN, and bit-exact comparison with a NaN fails).
    """

    def __init__(self) -> None:
        self.calls = 0

    def __getattr__(self, name: str):
        return getattr(torch, name)

    def _poison(self, t: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return t.fill_(math.nan) if t.is_floating_point() else t

    def empty(self, *args, **kwargs) -> torch.Tensor:
        return self._poison(torch.empty(*args, **kwargs))

    def empty_like(self, *args, **kwargs) -> torch.Tensor:
        return self._poison(torch.empty_like(*args, **kwargs))


# The modules whose launchers allocate outputs (``torch.empty``) and keep native memos
# (``_SITES``): the poison and fresh-memo fixtures act on each.
KERNEL_MODULES = ("adaln", "rope", "rope_pair", "qknorm_rope")


def _kernel_modules() -> list:
    import importlib

    return [importlib.import_module(f"ltx2k.kernels.{name}") for name in KERNEL_MODULES]


@pytest.fixture
def poison(monkeypatch: pytest.MonkeyPatch) -> _PoisonTorch:
    """NaN-fill every output the kernel launchers allocate; ``.calls`` counts allocations."""
    fake = _PoisonTorch()
    for module in _kernel_modules():
        monkeypatch.setattr(module, "torch", fake)
    return fake


class _GuardedTorch(_PoisonTorch):
    """As :class:`_PoisonTorch`, each output a view into the middle of a larger NaN-filled
    buffer: :meth:`check` asserts the guard bands on either side are still NaN. A store past
    an output's end (a mask off by one, a missing mask) then fails a test instead of
    overwriting the heap, which the interpreter's unchecked stores do: a crash much later,
    or none at all."""

    GUARD = 4096  # elements on each side: more than any tile of the tests' shapes

    def __init__(self) -> None:
        super().__init__()
        self.buffers: list[tuple[torch.Tensor, int]] = []

    def empty(self, *args, **kwargs) -> torch.Tensor:
        t = torch.empty(*args, **kwargs)
        if not t.is_floating_point():
            return t
        self.calls += 1
        g = self.GUARD
        buf = torch.full((t.numel() + 2 * g,), math.nan, dtype=t.dtype, device=t.device)
        self.buffers.append((buf, t.numel()))
        return buf[g : g + t.numel()].view(t.shape)

    def empty_like(self, t: torch.Tensor, **kwargs) -> torch.Tensor:
        return self.empty(t.shape, dtype=kwargs.get("dtype", t.dtype), device=t.device)

    def check(self) -> None:
        g = self.GUARD
        for i, (buf, n) in enumerate(self.buffers):
            outside = torch.cat([buf[:g], buf[g + n :]])
            written = int((~outside.isnan()).sum())
            assert written == 0, f"output {i}: {written} stores outside it (guard band written)"


@pytest.fixture
def guarded(monkeypatch: pytest.MonkeyPatch) -> _GuardedTorch:
    """Every output the kernel launchers allocate (split RoPE's backward's too) NaN-filled
    inside NaN guard bands; ``.check()`` after a call asserts nothing was stored outside."""
    import importlib

    fake = _GuardedTorch()
    for module in [*_kernel_modules(), importlib.import_module("ltx2k.kernels.rope_backward")]:
        monkeypatch.setattr(module, "torch", fake)
    return fake


class LaunchRecorder:
    """Replaces a ``@triton.jit`` kernel: records each launch, optionally mutates it, delegates.

    ``mutate(grid, args, kwargs) -> (grid, args, kwargs)`` lets a test launch
    a deliberately broken configuration of the real kernel (mutation tests).
    """

    def __init__(self, kernel, mutate=None) -> None:
        self.kernel = kernel
        self.mutate = mutate
        self.launches: list[tuple[tuple, dict]] = []

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            self.launches.append((tuple(grid), dict(kwargs)))
            g, a, k = (
                (grid, args, kwargs) if self.mutate is None else self.mutate(grid, args, kwargs)
            )
            return self.kernel[g](*a, **k)

        return launch


@pytest.fixture
def record_launch(monkeypatch: pytest.MonkeyPatch):
    """``record_launch(module, "kernel_name", mutate=None)`` -> a LaunchRecorder patched in."""

    def patch(module, name: str, mutate=None) -> LaunchRecorder:
        recorder = LaunchRecorder(getattr(module, name), mutate)
        monkeypatch.setattr(module, name, recorder)
        return recorder

    return patch


@pytest.fixture(autouse=True)
def _fresh_native_sites():
    """Every test starts with empty native memos, so a native variant's first call in a
    test takes the Python path (where the poison and launch-recorder fixtures act)."""
    for module in _kernel_modules():
        for site in list(module._SITES.values()):
            site.clear()
    yield


def default_sigint() -> None:
    """``preexec_fn`` for a child a test interrupts with SIGINT: the child gets SIGINT's
    default disposition, as under a terminal's Ctrl-C, however pytest was started. A
    background job (``cmd &`` in a script) inherits SIGINT ignored, and Python then installs
    no KeyboardInterrupt handler, so the signal would do nothing at all."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
