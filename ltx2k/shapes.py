"""Benchmark shapes, as data (the kernels' variants are in ``ltx2k/variants.py``).

These lists are **append-only**: a shape's label is the key of its asv
history, so renaming or reordering one silently orphans that history.
Add new entries at the end; never edit or delete an existing one.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RopeShape:
    B: int
    S: int
    H: int
    D: int

    @property
    def label(self) -> str:
        return f"B{self.B}_S{self.S}_H{self.H}_D{self.D}"


@dataclass(frozen=True)
class AdaShape:
    B: int
    S: int
    D: int
    table_dtype: str = "bf16"  # "bf16" or "fp32"

    @property
    def label(self) -> str:
        return f"B{self.B}_S{self.S}_D{self.D}_{self.table_dtype}"


# Production shapes, timed on GPUs. Append only.
ROPE_SHAPES: tuple[RopeShape, ...] = (
    RopeShape(1, 1024, 32, 128),
    RopeShape(1, 4096, 16, 128),
    RopeShape(4, 1152, 32, 128),
    RopeShape(4, 25, 32, 64),
    RopeShape(2, 6144, 16, 128),
    RopeShape(1, 16384, 32, 128),
)

ADA_SHAPES: tuple[AdaShape, ...] = (
    AdaShape(1, 1, 4096, "bf16"),
    AdaShape(1, 1, 4096, "fp32"),
    AdaShape(1, 1, 2048),
    AdaShape(2, 3, 2048),
    AdaShape(1, 1024, 4096),
    AdaShape(2, 6144, 4096),
)

# Tiny shapes for the CPU interpreter (machine "cpu-interpreter"): the
# interpreter runs ~1e5x slower than a GPU, so production shapes would take
# hours. They exercise the same code paths (non-power-of-two heads, S=1, B>1,
# D=64/128, partial head blocks). Append only.
ROPE_SHAPES_CPU: tuple[RopeShape, ...] = (
    RopeShape(1, 4, 3, 64),
    RopeShape(2, 1, 5, 32),
)

ADA_SHAPES_CPU: tuple[AdaShape, ...] = (
    AdaShape(1, 1, 256, "bf16"),
    AdaShape(2, 3, 96, "fp32"),
)

# Shapes whose call costs more host time than device time on current GPUs, so
# that host latency is what a caller waits on: the calibrated host-latency
# metric times the default variant (``ltx2k.variants``) at these (one per launch
# path the default takes; AdaLN's table dtype changes it). Append only.
HOST_BOUND_SHAPES: dict[str, tuple] = {
    "split_rope": (ROPE_SHAPES[3],),
    "ada_values9": ADA_SHAPES[:2],
}

# Shapes timed for kernel duration (CUPTI): the decode shapes, where the
# graph-replay device time is mostly the graph's own launch floor, and one shape
# of 10 us or more per kernel, where the two metrics must agree. Append only.
KERNEL_TIME_SHAPES: dict[str, tuple] = {
    "split_rope": (ROPE_SHAPES[3], ROPE_SHAPES[1]),
    "ada_values9": (*ADA_SHAPES[:4], ADA_SHAPES[4]),
}
