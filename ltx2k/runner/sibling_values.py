"""Values one benchmark process leaves for a later one forked from the same parent.

asv's forkserver imports the suite once per commit and forks one process per
benchmark x parameters, one at a time. % of copy bandwidth is bytes / the
cold-L2 device time / the copy bandwidth; measuring that device time again in a
process of its own doubled the suite's cold-L2 processes for a number the
``time_device_cold`` process of the same cell has just measured. That process
leaves its median here, and the bandwidth process of the same cell reads it.

The table lives in anonymous shared memory (``mmap`` with no file is
``MAP_SHARED``), created when the parent imports the suite: every child forked
afterwards sees the same pages, so the values belong to one parent -- one
commit's run -- and vanish with it. No file is written, so nothing stale can
outlive a run. A process that does not share a parent (asv's ``spawn`` launch
method, a test calling the suite directly) finds nothing and measures itself.
Neither asv nor the standard library offers a key-value table shared between
forked siblings, hence this one.

``benchmarks/bench_kernels.py`` loads this file from the working tree, as it
loads shapes.py, because the benchmarked commit's own ltx2k may predate it: it
imports nothing from ltx2k.
"""

from __future__ import annotations

import json
import math
import mmap
import struct
import zlib

# Header: payload length and CRC-32 of the payload. A process killed while it
# writes (asv's timeout) leaves a payload that fails the check: it reads as no
# values, never as wrong ones.
_HEADER = struct.Struct("<QI")


class SiblingValues:
    """A small ``str -> float`` table in memory shared by every process forked after it."""

    def __init__(self, size: int = 1 << 18):
        if size <= _HEADER.size:
            raise ValueError(f"size must exceed the {_HEADER.size}-byte header, got {size}")
        self._mem = mmap.mmap(-1, size)  # anonymous: MAP_SHARED | MAP_ANONYMOUS on POSIX

    def _read(self) -> dict[str, float]:
        length, crc = _HEADER.unpack_from(self._mem, 0)
        if length == 0 or length > len(self._mem) - _HEADER.size:
            return {}
        payload = self._mem[_HEADER.size : _HEADER.size + length]
        if zlib.crc32(payload) != crc:
            return {}
        try:
            table = json.loads(payload)
        except ValueError:
            return {}
        return table if isinstance(table, dict) else {}

    def get(self, key: str) -> float | None:
        """The value a sibling left under *key*, or None."""
        value = self._read().get(key)
        return float(value) if isinstance(value, (int, float)) else None

    def put(self, key: str, value: float) -> bool:
        """Leave *value* under *key* for processes forked later; whether it fit.

        asv runs a parent's children one at a time, so there is one writer at a time.
        """
        value = float(value)
        if not math.isfinite(value):
            raise ValueError(f"value must be finite, got {value!r}")
        table = self._read()
        table[str(key)] = value
        payload = json.dumps(table, separators=(",", ":")).encode()
        if _HEADER.size + len(payload) > len(self._mem):
            return False
        # Invalidate first, so that a write cut short reads as no table at all.
        _HEADER.pack_into(self._mem, 0, 0, 0)
        self._mem[_HEADER.size : _HEADER.size + len(payload)] = payload
        _HEADER.pack_into(self._mem, 0, len(payload), zlib.crc32(payload))
        return True
