"""The kernels' variants and host launch paths, as data.

Shapes (``ltx2k/workload/shapes.py``) say how big a problem is; this module says which
algorithms and peers each kernel is timed as, how it is launched, and which
variant is the default and which the baseline. ``ltx2k.workload.cases`` builds its
``KERNELS`` from both.

No imports: ``benchmarks/bench_kernels.py`` loads this file by path from the
working tree (as it does shapes.py), and the kernel modules import it for their
defaults, so it must not depend on the rest of the package.

The lists are **append-only**: a variant or launch path is the key of its asv
history, so renaming or reordering one silently orphans that history. Add new
entries at the end; never edit or delete an existing one.
"""

from __future__ import annotations

# The variants the suite times per kernel: the device algorithms (the public functions' variant=),
# then "eager", the PyTorch reference itself, and "compiled", torch.compile of it.
# The first is sglang's original kernel. Append only: a variant is the key of its
# asv history. (Before the launch path became its own parameter, "blocked_lean",
# "blocked_native", "slab_lean" and "slab_native" were variants; docs/measurement.md
# maps them to today's cells.)
TIMED_VARIANTS: dict[str, tuple[str, ...]] = {
    "split_rope": (
        "per_head",
        "blocked",
        "eager",
        "compiled",
        "blocked_wide",
        "tiled",
        "tiled_pdl",
    ),
    "ada_values9": ("separate", "slab", "eager", "compiled", "slab_grid", "slab_dconst"),
}
# Host launch paths of the default algorithm, each timed for host latency (the
# public functions' launch=, "auto" aside: it is one of these). Append only.
LAUNCH_PATHS: tuple[str, ...] = ("triton", "lean", "native")

# The variant each public function runs by default (its ``variant=``).
DEFAULT_VARIANT = {"split_rope": "tiled_pdl", "ada_values9": "slab_dconst"}

# The defaults before the current one, latest first: at a commit that predates the
# default, the dashboard shows the one that was the default then.
FORMER_DEFAULTS = {"split_rope": ("tiled", "blocked"), "ada_values9": ("slab_grid", "slab")}

# Which variant each one is measured against when reporting a speedup.
BASELINE_VARIANT = {"split_rope": "per_head", "ada_values9": "separate"}
