"""Per-launch device time, with host launch overhead excluded, cold or warm L2.

Method: capture R calls of the function into one CUDA graph and time each
graph replay with a pair of CUDA events. A ``torch.cuda._sleep`` spin kernel
is queued first, so that by the time the GPU reaches the start event the
whole graph is already queued: the events then bracket pure device work
(the ~0.6 us inter-kernel gap inside a graph is included, host gaps are not).

Cold L2: the R calls cycle through N independent input/output sets whose
total size is at least 3x the L2, so each set has been evicted before it is
used again. Warm L2: all R calls use one set.

:class:`DeviceClock` exposes this as an asv ``timer``: asv calls
``timer()`` around ``number`` calls of the benchmark body, and the clock
returns accumulated *device* seconds per launch, so asv's own sampling and
statistics (CI, quartiles, samples) apply to device time unchanged.

``triton.testing.do_bench`` is not used for this because it times the host
launch gaps too (~12 us vs ~4 us for RoPE B1_S1024, measured on the H200).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

# 3x L2 makes reuse distance >> cache size, so LRU-like policies have evicted a set.
L2_MULTIPLE = 3
MAX_SETS = 2048
MAX_ROTATION_BYTES = 8 << 30
# ~50 us at ~2 GHz: longer than the host needs to enqueue event + graph + event.
SLEEP_CYCLES = 100_000


def l2_bytes(device: torch.device | None = None) -> int:
    props = torch.cuda.get_device_properties(device or torch.cuda.current_device())
    return int(getattr(props, "L2_cache_size", 50 << 20))


def rotation_sets(bytes_per_set: int, cold: bool, l2: int) -> int:
    """How many input sets to cycle through so that each is out of L2 when reused."""
    if not cold:
        return 1
    n = max(2, math.ceil(L2_MULTIPLE * l2 / max(1, bytes_per_set)))
    n = min(n, MAX_SETS, max(2, MAX_ROTATION_BYTES // max(1, bytes_per_set)))
    return n


def argument_sets(make_sets: Callable[[int], Sequence[tuple]], n: int) -> list[tuple]:
    """``make_sets(n)`` as a list, checked to hold n sets."""
    sets = list(make_sets(n))
    if len(sets) != n:
        raise ValueError(f"make_sets({n}) returned {len(sets)} argument sets")
    return sets


class GraphedCalls:
    """R calls of ``fn`` over rotating argument sets, captured as one CUDA graph."""

    def __init__(self, fn: Callable, arg_sets: Sequence[tuple], launches: int, keep_outputs: bool):
        if not arg_sets:
            raise ValueError("arg_sets must not be empty")
        # The graph reads these addresses at every replay, so the tensors must live as long
        # as the graph: freed, their blocks go to the next allocation of the process (another
        # clock's inputs), or back to the driver on empty_cache (an illegal address at the
        # next replay, seen on the H200).
        self.arg_sets = list(arg_sets)
        self.launches = launches
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for args in arg_sets[:3]:  # warm-up: Triton JIT / autotune / allocator
                fn(*args)
        torch.cuda.current_stream().wait_stream(stream)
        torch.cuda.synchronize()
        self.graph = torch.cuda.CUDAGraph()
        # Cold L2 needs the outputs to rotate too: if each captured output were
        # freed at once, the graph pool would hand the next call the same
        # (L2-resident) block. Keeping them alive gives every call its own.
        self._outputs = []
        with torch.cuda.graph(self.graph):
            for i in range(launches):
                out = fn(*arg_sets[i % len(arg_sets)])
                if keep_outputs:
                    self._outputs.append(out)
        torch.cuda.synchronize()
        # The first replay uploads the graph to the device: replayed once here, so
        # that the first timed sample is like every other (asv takes no warm-up).
        self.graph.replay()
        torch.cuda.synchronize()

    def replay(self) -> None:
        self.graph.replay()


class DeviceClock:
    """An asv ``timer`` reading accumulated device seconds per launch.

    The benchmark body calls :meth:`run` (one timed replay); ``timer()``
    synchronizes, converts the finished event pairs to seconds and returns the
    running total, so ``t1 - t0`` covers exactly the replays in between.
    ``samples`` holds each timed replay's seconds per launch, in order.
    """

    def __init__(self, calls: GraphedCalls):
        self.calls = calls
        self._pending: list[tuple[Any, Any]] = []
        self._free: list[tuple[Any, Any]] = []
        self.samples: list[float] = []

    def _pair(self):
        if self._free:
            return self._free.pop()
        return torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def run(self) -> None:
        start, end = self._pair()
        torch.cuda._sleep(SLEEP_CYCLES)
        start.record()
        self.calls.replay()
        end.record()
        self._pending.append((start, end))

    def __call__(self) -> float:
        if self._pending:
            self._pending[-1][1].synchronize()
            for start, end in self._pending:
                self.samples.append(start.elapsed_time(end) * 1e-3 / self.calls.launches)
            self._free.extend(self._pending)
            self._pending.clear()
        return sum(self.samples)  # added in order: the running total of the replays


def build_clock(
    fn: Callable, make_sets: Callable[[int], Sequence[tuple]], bytes_per_set: int, cold: bool
) -> DeviceClock:
    """A DeviceClock over ``fn`` with ``make_sets(n)``, n fresh argument sets."""
    n = rotation_sets(bytes_per_set, cold, l2_bytes())
    arg_sets = argument_sets(make_sets, n)
    # Enough launches per replay that one replay is >> event resolution (~0.5 us).
    launches = max(n, 64 if not cold else n)
    return DeviceClock(GraphedCalls(fn, arg_sets, launches, keep_outputs=cold))


class WallClock:
    """The CPU-interpreter stand-in for DeviceClock: there is no device, so the
    "device time" of an interpreted kernel is its wall time. Only ever recorded
    under the ``cpu-interpreter`` machine, never mixed with GPU history."""

    def __init__(self, fn: Callable, arg_sets: Sequence[tuple]):
        import time

        self._now = time.perf_counter
        self.fn, self.arg_sets, self._i = fn, arg_sets, 0
        self.samples: list[float] = []  # each run's seconds, as DeviceClock.samples
        fn(*arg_sets[0])  # warm-up (interpreter caches)

    def run(self) -> None:
        t0 = self._now()
        self.fn(*self.arg_sets[self._i % len(self.arg_sets)])
        self.samples.append(self._now() - t0)
        self._i += 1

    def __call__(self) -> float:
        return sum(self.samples)


def device_times(clock, samples: int = 30, seconds: float | None = None) -> list[float]:
    """Per-launch device seconds, one value per replay (for the CLI and pytest-benchmark).

    ``clock`` is a DeviceClock or WallClock: callable, with a ``run()`` method.
    """
    return sampled(clock, clock.run, samples, seconds)


def sampled(
    timer: Callable[[], float],
    run: Callable[[], Any],
    samples: int,
    seconds: float | None = None,
    max_samples: int = 10_000,
) -> list[float]:
    """``timer()`` differences around *samples* calls of ``run()``; with *seconds*, calls go
    on past *samples* until that much wall time has passed (at most *max_samples*): a time
    budget, whatever one call costs on this device."""
    if seconds is not None and not (math.isfinite(seconds) and seconds > 0):
        raise ValueError(f"seconds must be a finite number > 0, got {seconds!r}")
    out = []
    start = time.perf_counter()
    last = timer()
    while len(out) < samples or (
        seconds is not None and len(out) < max_samples and time.perf_counter() - start < seconds
    ):
        run()
        now = timer()
        out.append(now - last)
        last = now
    return out
