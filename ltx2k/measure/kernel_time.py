"""Kernel duration: the GPU time of the kernels themselves, from CUPTI, per call.

The graph-replay device time (:mod:`ltx2k.measure.device_time`) brackets a
replay with CUDA events, so it includes the gaps between the kernels of the
graph. At decode shapes a kernel runs for about as long as that gap, and the
per-launch time measures the graph's launch throughput more than the kernel:
a kernel that gets a few percent longer there barely moves it. CUPTI times
each kernel from its start to its end on the GPU, with no gaps.

Method: the same captured graph of R calls over rotating inputs (cold L2) as
the device time, replayed under ``torch.profiler`` with CUDA activity, which
reads CUPTI's kernel records; the kernels' durations are summed and divided
by R. A call that launches several kernels (eager, torch.compile) counts all
of them. :class:`KernelClock` is an asv ``timer`` like ``DeviceClock``.

``torch.profiler`` rather than ``cupti-python``: it ships with torch, so an
offline GPU runner needs nothing more, and its kernel records are CUPTI's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ltx2k.measure import device_time

# Names of CUDA activity records that are not kernels (copies, fills, syncs).
_NOT_KERNELS = ("Memcpy", "Memset", "cudaMemcpy", "cudaMemset", "Sync")


def kernel_seconds(events: Iterable[Any]) -> tuple[float, int]:
    """(summed duration in seconds, count) of the kernel records among profiler *events*.

    A kernel record is a device-side event (``device_type`` CUDA) that is not
    a copy or a fill; ``device_time`` is its duration in microseconds.
    """
    from torch.autograd import DeviceType

    total_us, count = 0.0, 0
    for e in events:
        if getattr(e, "device_type", None) != DeviceType.CUDA:
            continue
        if any(e.name.startswith(p) for p in _NOT_KERNELS):
            continue
        total_us += e.device_time
        count += 1
    return total_us * 1e-6, count


class KernelClock:
    """An asv ``timer`` reading accumulated kernel seconds per call.

    :meth:`run` replays the graph once under the profiler; ``timer()`` returns
    the running total, so ``t1 - t0`` covers exactly the replays in between.
    A replay in which CUPTI recorded no kernel raises: a zero would be a
    number no kernel earned.
    """

    def __init__(self, calls: device_time.GraphedCalls, profile: Callable | None = None):
        if profile is None:
            from torch.profiler import ProfilerActivity
            from torch.profiler import profile as torch_profile

            def profile():
                return torch_profile(activities=[ProfilerActivity.CUDA])

        self.calls = calls
        self._profile = profile
        self._total = 0.0
        self.kernels_per_call = None

    def run(self) -> None:
        import torch

        with self._profile() as prof:
            self.calls.replay()
            torch.cuda.synchronize()
        seconds, count = kernel_seconds(prof.events())
        if count == 0:
            raise RuntimeError(
                "the profiler recorded no kernel in a graph replay (is CUPTI available?)"
            )
        self.kernels_per_call = count / self.calls.launches
        self._total += seconds / self.calls.launches

    def __call__(self) -> float:
        return self._total


def build_clock(fn: Callable, make_args: Callable[[int], tuple], bytes_per_set: int) -> KernelClock:
    """A KernelClock over ``fn`` with cold-L2 argument sets ``make_args(i)``."""
    n = device_time.rotation_sets(bytes_per_set, True, device_time.l2_bytes())
    arg_sets = [make_args(i) for i in range(n)]
    return KernelClock(device_time.GraphedCalls(fn, arg_sets, n, keep_outputs=True))
