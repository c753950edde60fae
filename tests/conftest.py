"""Shared fixtures. Importing this module picks the Triton backend.

Triton decides at ``@triton.jit`` decoration time whether a kernel is
interpreted, so the backend must be chosen before any test module imports
``ltx2k.kernels``: conftest.py is imported first, hence the call here.
"""

from __future__ import annotations

import math

import pytest
import torch

from ltx2k import runtime

BACKEND = runtime.select_backend()
DEVICE = runtime.device()


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


@pytest.fixture
def poison(monkeypatch: pytest.MonkeyPatch) -> _PoisonTorch:
    """NaN-fill every output the kernel launchers allocate; ``.calls`` counts allocations."""
    from ltx2k.kernels import adaln, rope

    fake = _PoisonTorch()
    monkeypatch.setattr(rope, "torch", fake)
    monkeypatch.setattr(adaln, "torch", fake)
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
    from ltx2k.kernels import adaln, rope

    for site in (*rope._SITES.values(), *adaln._SITES.values()):
        site.clear()
    yield
