"""Every process's value of a benchmark of which asv keeps one number per commit.

asv stores no samples for ``track_*`` benchmarks: a commit has one value, and
a later round of ``asv continuous --interleave-rounds`` overwrites an earlier
one. ``track_host_calibrated`` is the median of several measuring processes,
and a 10% host-latency step is seen only when two commits are compared
process by process, interleaved (docs/history.md, "Host latency"). So when
the environment variable ``ENV`` names a file, the benchmark appends one JSON
line per call: the commit asv installed for it (``ASV_COMMIT``, which asv sets
in every benchmark process), the benchmark, its parameter values and every
process's value. ``ltx2k confirm`` reads them back as the samples of that
commit and judges the pair with a rank test.

``benchmarks/bench_kernels.py`` loads this file from the working tree, as it
loads shapes.py, because the benchmarked commit's own ltx2k may predate it:
it imports nothing from ltx2k.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence

ENV = "LTX2K_PROCESS_VALUES"

Key = tuple[str, str, tuple[str, ...]]  # (commit, benchmark, parameter values)


def append(benchmark: str, params: Sequence[str], values: Sequence[float]) -> bool:
    """Append one record if ``ENV`` names a file and asv named the commit; whether it did."""
    path = os.environ.get(ENV)
    commit = os.environ.get("ASV_COMMIT")
    if not path or not commit:  # outside asv nothing says which commit measured it
        return False
    line = json.dumps(
        {
            "commit": commit,
            "benchmark": benchmark,
            "params": [str(p) for p in params],
            "values": [float(v) for v in values],
        }
    )
    # One write of one line with O_APPEND: records of concurrent processes never interleave.
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)
    return True


def load(path) -> tuple[dict[Key, list[float]], int]:
    """(commit, benchmark, parameter values) -> every value appended for it, in order;
    and the number of lines that were not a complete record (a process killed mid-write).
    A missing file is no records."""
    out: dict[Key, list[float]] = {}
    bad = 0
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return out, 0
    for line in lines:
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            key = (str(rec["commit"]), str(rec["benchmark"]), tuple(str(p) for p in rec["params"]))
            values = [float(v) for v in rec["values"]]
        except (ValueError, KeyError, TypeError):
            bad += 1
            continue
        if not values or not all(math.isfinite(v) for v in values):
            bad += 1
            continue
        out.setdefault(key, []).extend(values)
    return out, bad
