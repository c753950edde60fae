"""Host latency of the kernels' default path with the shape recorder on and off.

The recorder promises (ltx2k/workload/record.py): outside a recording one test of a global
per call, inside one key of the arguments' metadata and one dictionary update.
This measures what that costs a caller, in calibrated units (host latency per call
in eager ``torch.add`` calls, ``ltx2k.measure.suite.host_calibrated``: the
``track_host_calibrated`` benchmark's own method and cells).

Each round runs one fresh interpreter per mode, in alternating order (off, on, on,
off, ...) so that a drift of the machine hits both. "on" sets ``LTX2K_RECORD_SHAPES``
for the interpreter, so that every measuring process it forks or spawns records.

Usage (GPU): python tools/recorder_overhead.py [--rounds 4] [--json OUT]
Put the table it prints in docs/shapes.md with its date and GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODES = ("off", "on")


def _child(mode: str) -> dict:
    sys.path.insert(0, str(ROOT))
    from ltx2k import runtime

    runtime.select_backend()
    import ltx2k.kernels.adaln  # noqa: F401 - starts the recording LTX2K_RECORD_SHAPES asks for
    import ltx2k.kernels.rope  # noqa: F401
    from ltx2k.measure import suite
    from ltx2k.workload import cases, record, shapes, variants

    if bool(record._ACTIVE) != (mode == "on"):
        raise RuntimeError(f"mode {mode}: the recorder is {'on' if record._ACTIVE else 'off'}")
    on_gpu = runtime.device() == "cuda"
    out = {}
    for kernel, spec in cases.KERNELS.items():
        cells = shapes.HOST_BOUND_SHAPES[kernel] if on_gpu else spec.cpu_shapes
        variant = variants.DEFAULT_VARIANT[kernel]
        for shape in cells:
            out[f"{kernel} {shape.label}"] = suite.host_calibrated(kernel, variant, shape)
    return out


def measure(rounds: int) -> dict[str, dict[str, list[float]]]:
    """{cell: {mode: calibrated values of every process of every round}}."""
    values: dict[str, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(rounds):
            for mode in MODES if r % 2 == 0 else MODES[::-1]:
                env = {k: v for k, v in os.environ.items() if k != "LTX2K_RECORD_SHAPES"}
                # As the asv suite runs: torch asks NVML whether there is a GPU, so the
                # child does not initialise CUDA before forking its measuring processes.
                env.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
                if mode == "on":
                    env["LTX2K_RECORD_SHAPES"] = str(Path(tmp) / "calls.json")
                proc = subprocess.run(
                    [sys.executable, __file__, "--child", mode],
                    env=env,
                    capture_output=True,
                    text=True,
                    check=False,
                )
                if proc.returncode != 0:
                    raise RuntimeError(f"round {r} mode {mode} failed:\n{proc.stderr}")
                got = json.loads(proc.stdout.splitlines()[-1])
                for cell, vals in got.items():
                    values.setdefault(cell, {m: [] for m in MODES})[mode].extend(vals)
                print(f"round {r + 1}/{rounds} {mode}: done", file=sys.stderr, flush=True)
    return values


def table(values: dict[str, dict[str, list[float]]]) -> str:
    rows = ["cell | off (torch.add calls) | on | on/off", "--- | --- | --- | ---"]
    for cell, per_mode in values.items():
        off, on = (statistics.median(per_mode[m]) for m in MODES)
        rows.append(f"{cell} | {off:.3f} | {on:.3f} | {on / off:.3f}")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=4, help="interleaved rounds (default 4)")
    p.add_argument("--json", type=Path, help="write every value here too")
    p.add_argument("--child", choices=MODES, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child:
        print(json.dumps(_child(a.child)))
        return 0
    values = measure(a.rounds)
    print(table(values))
    if a.json:
        a.json.write_text(json.dumps(values, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
