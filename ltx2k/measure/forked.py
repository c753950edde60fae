"""Run a function in a forked child, as asv's forkserver runs each benchmark, and get its result.

What a benchmark process pays once (a CUDA context, the first load of a kernel,
a compile) only shows in a fresh process; the per-process cost experiments
(``tools/experiments/process_cost.py`` and ``host_spread.py``, removed; in git
history at 6b69a44) measured it here. A forked child cannot use a CUDA context
its parent created (asv's forkserver keeps the same rule), so ``run_isolated``
starts a fresh interpreter for such a parent instead.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import sys
import time
from collections.abc import Callable


def cuda_initialized() -> bool:
    """Whether this process has initialised CUDA (without importing torch).

    torch's own flag first; then the driver's: something other than torch (Triton's
    driver utilities, a C++ extension, another library) may have called ``cuInit``,
    and a forked child of such a process fails its first CUDA call with
    ``cudaErrorInitializationError``.
    """
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        return True
    return _driver_initialized()


# CUDA_ERROR_NOT_INITIALIZED: the driver API's answer before cuInit
_CU_NOT_INITIALIZED = 3


def _driver_initialized() -> bool:
    """Whether ``cuInit`` ran in this process: only if libcuda is loaded already (a
    process that never loaded it cannot have), asked without initialising it."""
    try:
        with open("/proc/self/maps") as f:
            if "libcuda.so" not in f.read():
                return False
        import ctypes

        count = ctypes.c_int()
        return ctypes.CDLL("libcuda.so.1").cuDeviceGetCount(ctypes.byref(count)) != (
            _CU_NOT_INITIALIZED
        )
    except (OSError, AttributeError):  # no /proc (not Linux), or no such library
        return False


def run_forked(fn: Callable[[], dict]) -> tuple[dict, float]:
    """``fn()``'s JSON-able dict, computed in a forked child; and the fork-to-reap wall seconds.

    A child that raises or dies returns ``{"error": ...}`` instead, so one bad
    case does not end a sweep. A child of a process that has created a CUDA
    context cannot use CUDA (its CUDA calls fail, and that comes back as the
    error); ``run_isolated`` avoids that.
    """
    r, w = os.pipe()
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:  # the child: never return into the caller's stack
        os.close(r)
        code = 1
        try:
            payload = json.dumps(fn())
            code = 0
        except BaseException as e:  # noqa: BLE001 - reported to the parent, not raised there
            payload = json.dumps({"error": repr(e)})
        try:
            os.write(w, payload.encode())
        finally:
            os._exit(code)
    os.close(w)
    data = b""
    while chunk := os.read(r, 65536):
        data += chunk
    os.close(r)
    _, status = os.waitpid(pid, 0)
    wall = time.perf_counter() - t0
    if not data:
        return {"error": f"child exited with status {status} and no result"}, wall
    return json.loads(data), wall


def _call(fn: Callable[[], dict]) -> dict:
    try:
        return fn()
    except Exception as e:  # noqa: BLE001 - reported to the parent, as run_forked does
        return {"error": repr(e)}


def run_isolated(fn: Callable[[], dict]) -> tuple[dict, float]:
    """As ``run_forked``, but in a fresh interpreter when this process has a CUDA context.

    ``fn`` must then be picklable (a module-level function or a ``functools.partial``
    of one).
    """
    if not cuda_initialized():
        return run_forked(fn)
    t0 = time.perf_counter()
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        try:
            got = pool.apply(_call, (fn,))
        except Exception as e:  # noqa: BLE001 - a child that died, or an unpicklable result
            got = {"error": repr(e)}
    return got, time.perf_counter() - t0
