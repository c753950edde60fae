"""Host latency: wall time per call of the public Python function, as a caller pays it.

The clock synchronizes the device once per batch (asv's ``number`` calls),
never per call: a per-call sync would add the device time and a round trip
to every call, which no caller pays in a pipelined serving loop.
"""

from __future__ import annotations

import time


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
