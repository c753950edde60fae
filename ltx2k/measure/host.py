"""Host latency: wall time per call of the public Python function, as a caller pays it.

The clock synchronizes the device once per batch (asv's ``number`` calls),
never per call: a per-call sync would add the device time and a round trip
to every call, which no caller pays in a pipelined serving loop.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


class HostClock:
    """An asv ``timer``: ``torch.cuda.synchronize()`` then ``perf_counter()``."""

    def __init__(self, on_gpu: bool):
        import torch

        self._sync = torch.cuda.synchronize if on_gpu else (lambda: None)

    def __call__(self) -> float:
        self._sync()
        return time.perf_counter()


def synced_perf_counter() -> float:
    """``perf_counter`` after draining the GPU queue: pytest-benchmark's ``--benchmark-timer``.

    pytest-benchmark reads the timer once before and once after ``iterations``
    calls, so this syncs once per batch, like :class:`HostClock`. It never
    initialises CUDA itself (CPU runs stay CUDA-free).
    """
    import torch

    if torch.cuda.is_initialized():
        torch.cuda.synchronize()
    return time.perf_counter()


# The reference call of the calibrated host latency: one eager ``torch.add`` of
# 16 elements goes through the same Python -> dispatcher -> driver launch path as
# the kernels, with no device work worth the name. A benchmark process that is
# slow as a whole (its vCPU, its address layout, a busy driver thread) is slow
# for both, so the ratio keeps the launch path's cost and drops the process's.
REFERENCE_CALL = "torch.add"


def calibrated_ratio(batch: Callable[[], None], calls: int, on_gpu: bool, samples: int) -> float:
    """Median, over *samples*, of (time per call of *batch*) / (time per reference call).

    *batch* makes *calls* calls. Each sample times one batch and then *calls*
    reference calls, interleaved, so a drift inside the process hits both.
    """
    import torch

    device = "cuda" if on_gpu else "cpu"
    ref = torch.ones(16, device=device)

    def reference() -> None:
        for _ in range(calls):
            torch.add(ref, ref, out=ref)

    clock = HostClock(on_gpu)
    ratios = []
    for i in range(samples + 2):  # two warm-up rounds: allocator, caches, first launches
        t0 = clock()
        batch()
        t1 = clock()
        reference()
        t2 = clock()
        if i >= 2:
            ratios.append((t1 - t0) / (t2 - t1))
    return statistics.median(ratios)
