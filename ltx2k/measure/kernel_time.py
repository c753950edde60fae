"""Kernel duration: the GPU time of the kernels themselves, from CUPTI, per call.

The graph-replay device time (:mod:`ltx2k.measure.device_time`) brackets a
replay with CUDA events, so it includes the gaps between the kernels of the
graph. At decode shapes a kernel runs for about as long as that gap, and the
per-launch time measures the graph's launch throughput more than the kernel:
a kernel that gets a few percent longer there barely moves it. CUPTI times
each kernel from its start to its end on the GPU, with no gaps.

Method: calls over rotating inputs (cold L2) as for the device time, captured
in CUDA graphs and replayed under ``torch.profiler`` with CUDA activity, which
reads CUPTI's kernel records; each replay's kernel durations are summed and
divided by its calls. A call that launches several kernels (eager,
torch.compile) counts all of them. :class:`KernelClock` is an asv ``timer``
like ``DeviceClock``.

The rotation is split over several graphs of at most ``MAX_CALLS_PER_REPLAY``
calls, replayed in turn, one per sample. A set is reused only after every
other graph has run, so it is as cold as in one graph over all sets, but a
sample records tens of kernels instead of hundreds: at decode shapes 3x the
L2 is hundreds of input sets, and the kernel records of 20 full rotations
cost a benchmark process more than all the rest of its work
(``tools/experiments/process_cost.py``, removed; in git history at 6b69a44;
docs/measurement.md, "Suite cost").

``torch.profiler`` rather than ``cupti-python``: it ships with torch, so an
offline GPU runner needs nothing more, and its kernel records are CUPTI's.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ltx2k.measure import device_time

# Names of CUDA activity records that are not kernels (copies, fills, syncs).
_NOT_KERNELS = ("Memcpy", "Memset", "cudaMemcpy", "cudaMemset", "Sync")


# Replays per profiler session: asv takes at most 20 samples per process
# (benchmarks/bench_kernels.py, ``repeat``), so one session serves a process.
SAMPLES_PER_SESSION = 20
# Calls per graph (one sample): even at decode shapes, 64 calls are tens of
# microseconds of kernel time per sample, far above CUPTI's timestamp resolution.
MAX_CALLS_PER_REPLAY = 64


def kernel_records(events: Iterable[Any]) -> list[tuple[float, float]]:
    """(start, seconds) of each kernel record among profiler *events*, in start order.

    A kernel record is a device-side event (``device_type`` CUDA) that is not
    a copy or a fill; ``device_time`` is its duration in microseconds. Events
    without a time range keep their order.
    """
    from torch.autograd import DeviceType

    out = []
    for i, e in enumerate(events):
        if getattr(e, "device_type", None) != DeviceType.CUDA:
            continue
        if any(e.name.startswith(p) for p in _NOT_KERNELS):
            continue
        span = getattr(e, "time_range", None)
        out.append((span.start if span is not None else i, e.device_time * 1e-6))
    out.sort(key=lambda r: r[0])
    return out


class KernelClock:
    """An asv ``timer`` reading accumulated kernel seconds per call.

    Each :meth:`run` is one sample: one graph replay's kernel seconds, divided
    by the calls in it (the graphs of *calls* in turn, a sample each; one graph
    does too); ``timer()`` returns the running total, so ``t1 - t0``
    covers exactly the samples in between. Opening a profiler session costs
    tens of milliseconds, so one session records ``batch`` replays and
    :meth:`run` hands them out one per sample: the kernel records of a
    session are split back into replays in start order (the replays run one
    after another on one stream). A session whose records do not split evenly
    into its replays, or a replay with no kernel, raises: a number no kernel
    earned is never recorded.
    """

    def __init__(
        self,
        calls: device_time.GraphedCalls | Sequence[device_time.GraphedCalls],
        profile: Callable | None = None,
        batch: int = SAMPLES_PER_SESSION,
    ):
        if profile is None:
            from torch.profiler import ProfilerActivity
            from torch.profiler import profile as torch_profile

            def profile():
                return torch_profile(activities=[ProfilerActivity.CUDA])

        if batch < 1:
            raise ValueError(f"batch must be >= 1, got {batch}")
        # Graphs replayed in turn, one per sample; all of one size, so that a session's
        # records split evenly into its replays.
        self.graphs = list(calls) if isinstance(calls, Sequence) else [calls]
        if not self.graphs or len({g.launches for g in self.graphs}) != 1:
            raise ValueError("calls must be one or more graphs of equally many calls")
        self.launches = self.graphs[0].launches
        self._next = 0
        self._profile = profile
        self._batch = batch
        self._ready: list[float] = []  # per-call seconds of replays recorded, not yet handed out
        self._total = 0.0
        self.kernels_per_call = None

    def _record(self) -> None:
        import torch

        with self._profile() as prof:
            for _ in range(self._batch):
                self.graphs[self._next].replay()
                self._next = (self._next + 1) % len(self.graphs)
            torch.cuda.synchronize()
        records = kernel_records(prof.events())
        if not records:
            raise RuntimeError(
                "the profiler recorded no kernel in a graph replay (is CUPTI available?)"
            )
        if len(records) % self._batch:
            raise RuntimeError(
                f"{len(records)} kernel records do not split into {self._batch} equal replays"
            )
        per_replay = len(records) // self._batch
        self.kernels_per_call = per_replay / self.launches
        for i in range(self._batch):
            chunk = records[i * per_replay : (i + 1) * per_replay]
            self._ready.append(sum(d for _, d in chunk) / self.launches)
        self._ready.reverse()  # pop() hands them out in replay order

    def run(self) -> None:
        if not self._ready:
            self._record()
        self._total += self._ready.pop()

    def __call__(self) -> float:
        return self._total


def slices(sets: int, max_calls: int = MAX_CALLS_PER_REPLAY) -> tuple[int, int]:
    """(graphs, calls per graph) covering at least *sets* argument sets, equal-sized."""
    if sets < 1 or max_calls < 1:
        raise ValueError(f"sets and max_calls must be >= 1, got {sets}, {max_calls}")
    graphs = math.ceil(sets / max_calls)
    return graphs, math.ceil(sets / graphs)


def build_clock(
    fn: Callable, make_sets: Callable[[int], Sequence[tuple]], bytes_per_set: int
) -> KernelClock:
    """A KernelClock over ``fn`` with cold-L2 argument sets ``make_sets(n)``."""
    n = device_time.rotation_sets(bytes_per_set, True, device_time.l2_bytes())
    graphs, per = slices(n)
    arg_sets = device_time.argument_sets(make_sets, graphs * per)
    return KernelClock(
        [
            device_time.GraphedCalls(fn, arg_sets[g * per : (g + 1) * per], per, keep_outputs=True)
            for g in range(graphs)
        ]
    )
