"""One measuring process of the calibrated host latency: ``python -m ltx2k.measure.calibrated``.

``suite.host_calibrated`` starts this module once per value. It is a fresh
interpreter, not a fork: children forked from one parent share its address
layout and their host latencies move together from run to run, so the median
of several forked children averages far less than the same number of
independent processes (docs/history.md, "Host latency").

Usage: python -m ltx2k.measure.calibrated KERNEL VARIANT SHAPE_LABEL
Prints one JSON line, ``{"ratio": r}`` or ``{"error": "..."}`` (exit status 1).
"""

from __future__ import annotations

import json
import os
import sys

# Decide the CUDA question without creating a context first (see benchmarks/).
os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 3:
        print(json.dumps({"error": "usage: KERNEL VARIANT SHAPE_LABEL"}))
        return 1
    kernel, variant, label = argv
    try:
        from ltx2k import cases
        from ltx2k.measure import suite

        if kernel not in cases.KERNELS:
            raise ValueError(f"unknown kernel {kernel!r}; known: {sorted(cases.KERNELS)}")
        ratio = suite.calibrated_in_this_process(kernel, variant, cases.find_shape(kernel, label))
    except Exception as e:  # noqa: BLE001 - reported to the parent, which raises it
        print(json.dumps({"error": f"{type(e).__name__}: {e}"}))
        return 1
    print(json.dumps({"ratio": ratio}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
