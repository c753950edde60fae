"""Run a function in a forked child, as asv's forkserver runs each benchmark, and get its result.

What a benchmark process pays once (a CUDA context, the first load of a kernel,
a compile) only shows in a fresh process; the per-process cost experiments
(``tools/experiments/process_cost.py``, ``tools/experiments/host_spread.py``)
measure it here. The parent must not have created a CUDA context before
forking: the child could not use CUDA (asv's forkserver keeps the same rule).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable


def run_forked(fn: Callable[[], dict]) -> tuple[dict, float]:
    """``fn()``'s JSON-able dict, computed in a forked child; and the fork-to-reap wall seconds.

    A child that raises or dies returns ``{"error": ...}`` instead, so one bad
    case does not end a sweep.
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
