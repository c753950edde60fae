"""The kernels' variants and host launch paths, as data.

Shapes (``ltx2k/workload/shapes.py``) say how big a problem is; this module says which
algorithms and peers each kernel is timed as, how it is launched, and which
variant is the default and which sglang's, and the asv class that times it.
``ltx2k.workload.cases`` builds its ``KERNELS`` from both.

No imports: ``benchmarks/bench_kernels.py`` loads this file by path from the
working tree (as it does shapes.py), and the kernel modules import it for their
defaults, so it must not depend on the rest of the package.

The lists are **append-only**: a variant or launch path is the key of its asv
history, so renaming or reordering one silently orphans that history. Add new
entries at the end; never edit or delete an existing one.
"""

from __future__ import annotations

# The variants the suite times per kernel: the device algorithms (the public functions'
# variant=) and the peers (ltx2k.workload.cases.KernelSpec.peers): "eager", the PyTorch
# reference itself, "compiled", torch.compile of it, and a kernel's own where a team
# would run something else. Append only: a variant is the key of its asv history.
# (Before the launch path became its own parameter, "blocked_lean", "blocked_native",
# "slab_lean" and "slab_native" were variants; docs/measurement.md maps them to today's
# cells.)
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
    # Split RoPE of q and k in one call. "row" is sglang's current design (one program per
    # token row over all heads, q and k in one program); "two_launches" is two calls of
    # split RoPE's public function (its default variant), what a caller without the pair
    # function runs.
    "split_rope_pair": ("row", "tiled", "tiled_pdl", "eager", "compiled", "two_launches"),
    # The attention prologue, RMSNorm of q and k then split RoPE of each, fused. "eager" is
    # its exact reference (the fused kernel's summation order); "unfused_eager" is what
    # LTX-2's eager attention runs (torch.nn.functional.rms_norm, then split RoPE),
    # "unfused_compiled" torch.compile of that, "unfused_ltx2k" rms_norm then ltx2k's pair
    # function.
    "qknorm_rope_pair": (
        "row",
        "tiled",
        "tiled_pdl",
        "eager",
        "unfused_eager",
        "unfused_compiled",
        "unfused_ltx2k",
    ),
}
# The peers that are torch.compile of a reference: timed on GPUs only (inductor's CPU
# backend builds C++ for minutes), and each benchmark process of theirs pays a dynamo trace.
COMPILED_VARIANTS: tuple[str, ...] = ("compiled", "unfused_compiled")
# Host launch paths of the default algorithm, each timed for host latency (the
# public functions' launch=, "auto" aside: it is one of these). Append only.
LAUNCH_PATHS: tuple[str, ...] = ("triton", "lean", "native")

# The other device algorithms of each kernel: the variants that are neither its default,
# nor sglang's kernels (BASELINE_VARIANT, UPSTREAM_CURRENT_VARIANT), nor a peer (PyTorch,
# torch.compile, two launches). They are timed for what tells algorithms apart, cold-L2
# device time (and % of copy bandwidth, which is derived from it), and counted for
# allocations (one shared process for all cells). Not for host latency: they launch
# through the default's host paths, so at host-bound shapes their host latency is the
# default's and at device-bound ones their device time; nor warm L2 or kernel duration,
# which rank them as cold L2 does. Every benchmark x parameter combination is a process
# of its own, so this is most of what a commit's run costs (docs/measurement.md, "Suite cost").
OTHER_ALGORITHMS: dict[str, tuple[str, ...]] = {
    "split_rope": ("blocked", "blocked_wide", "tiled"),
    "ada_values9": ("slab", "slab_grid"),
    "split_rope_pair": ("tiled",),
    "qknorm_rope_pair": ("tiled",),
}
OTHER_ALGORITHM_METRICS: tuple[str, ...] = ("device_cold", "pct_copy_bandwidth", "allocations")

# The variant each public function runs by default (its ``variant=``).
DEFAULT_VARIANT = {
    "split_rope": "tiled_pdl",
    "ada_values9": "slab_dconst",
    "split_rope_pair": "tiled_pdl",
    "qknorm_rope_pair": "tiled_pdl",
}

# The defaults before the current one, latest first: at a commit that predates the
# default, the dashboard shows the one that was the default then.
FORMER_DEFAULTS = {"split_rope": ("tiled", "blocked"), "ada_values9": ("slab_grid", "slab")}

# Speedups are reported over sglang's kernels, each a variant of ours in its design.
# BASELINE_VARIANT is sglang's original kernel; for the attention prologue, whose one
# design in sglang is the row kernel, its original is its current one (the unfused peers
# are what a caller without any fused kernel runs: they have speedup columns of their own).
BASELINE_VARIANT = {
    "split_rope": "per_head",
    "ada_values9": "separate",
    "split_rope_pair": "row",
    "qknorm_rope_pair": "row",
}
# sglang's current design of each kernel, where the suite times it. Its single-tensor split
# RoPE (jit_kernel/diffusion/triton/ltx2_rotary.py) kept the original grid, one head per
# program in one warp, and changed only its rounding to the reference's: `per_head`'s
# design and rounding. Its AdaLN values9 (ltx2_ada_values9) is the grid design of ltx2k's
# default `slab_dconst` (one slab; a program per row x value x 1024-column block; the
# hidden size a constant), launched with 4 warps where ltx2k's launches 2: no entry, since
# the suite times no variant of that launch and a column of the default over itself would
# say nothing. What a caller sees between the two is the host path (time_host_latency).
UPSTREAM_CURRENT_VARIANT = {
    "split_rope": "per_head",
    "split_rope_pair": "row",
    "qknorm_rope_pair": "row",
}
# The peers the dashboard's "speedup over eager" and "over torch.compile" divide by, where
# not the variants of those names: the strongest code a team would otherwise run. The
# fused prologue's "eager" is its exact reference, which no model runs; LTX-2's eager
# attention runs the unfused prologue.
SPEEDUP_PEERS = {
    "qknorm_rope_pair": {"eager": "unfused_eager", "compiled": "unfused_compiled"},
}

# The asv class that times each kernel (benchmarks/bench_kernels.py): its name is the
# first part of every benchmark name in the results, so it is fixed for good.
ASV_CLASS = {
    "split_rope": "SplitRope",
    "ada_values9": "AdaValues9",
    "split_rope_pair": "SplitRopePair",
    "qknorm_rope_pair": "QKNormRopePair",
}
