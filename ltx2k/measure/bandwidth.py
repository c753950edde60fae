"""This machine's measured copy bandwidth, the ceiling "% of bandwidth" is quoted against.

Measured on the runner (a 1 GiB device-to-device copy, bytes read + written,
median of CUDA-event-timed copies), not taken from a datasheet: the achievable
ceiling differs from the vendor number by 10-15% and by part, and it is what a
memory-bound kernel can actually reach. Cached per GPU (by UUID) so it is
measured once per machine, not once per benchmark process.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path

import torch

from ltx2k.runner import bytecode

COPY_BYTES = 1 << 30


def cache_path() -> Path:
    return Path(bytecode.cache_root(os.environ)) / "copy_bandwidth.json"


def _device_key(on_gpu: bool) -> str:
    if on_gpu:
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        return f"cuda:{props.name}:{getattr(props, 'uuid', '')}"
    import platform

    return f"cpu:{platform.node()}:{platform.processor() or platform.machine()}"


def measure_copy_bandwidth(on_gpu: bool, nbytes: int = COPY_BYTES, reps: int = 20) -> float:
    """Bytes/s of a large copy, counting bytes read plus bytes written."""
    if not on_gpu:
        nbytes = min(nbytes, 256 << 20)  # a CPU copy of 1 GiB x 20 is needlessly slow
    src = torch.empty(nbytes // 4, dtype=torch.float32, device="cuda" if on_gpu else "cpu")
    src.uniform_()
    dst = torch.empty_like(src)
    times = []
    for i in range(reps + 3):
        if on_gpu:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            dst.copy_(src)
            end.record()
            end.synchronize()
            t = start.elapsed_time(end) * 1e-3
        else:
            t0 = time.perf_counter()
            dst.copy_(src)
            t = time.perf_counter() - t0
        if i >= 3:
            times.append(t)
    return 2 * src.numel() * 4 / statistics.median(times)


def cached_copy_bandwidth(on_gpu: bool) -> float | None:
    """The copy bandwidth (bytes/s) cached for the current device, or None; never measures."""
    try:
        cache = json.loads(cache_path().read_text())
    except (OSError, ValueError):
        return None
    entry = cache.get(_device_key(on_gpu)) if isinstance(cache, dict) else None
    if isinstance(entry, dict) and entry.get("bytes_per_s", 0) > 0:
        return float(entry["bytes_per_s"])
    return None


def copy_bandwidth(on_gpu: bool, refresh: bool = False) -> float:
    """Cached measured copy bandwidth (bytes/s) for the current device."""
    if not refresh and (bw := cached_copy_bandwidth(on_gpu)) is not None:
        return bw
    path = cache_path()
    key = _device_key(on_gpu)
    try:
        cache = json.loads(path.read_text())
    except (OSError, ValueError):
        cache = {}
    if not isinstance(cache, dict):
        cache = {}
    bw = measure_copy_bandwidth(on_gpu)
    cache[key] = {"bytes_per_s": bw, "measured_at": time.time()}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(cache, indent=1))
    os.replace(tmp, path)  # atomic: concurrent benchmark processes never read half a file
    return bw
