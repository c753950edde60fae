"""Benchmark cases: kernel x variant x shape, as data, with inputs, callables and byte counts.

The shapes come from ``ltx2k.workload.shapes`` and the variants from ``ltx2k.workload.variants``
(plain data). This is the one place that knows how to build a kernel's inputs, call a
variant and count its minimum traffic; the asv suite, pytest-benchmark, the
CLI and the correctness gate all go through it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ltx2k.workload import reference, shapes, variants

BF16 = 2  # bytes


def _exact_values(shape, lo: int, hi: int, gen: torch.Generator, scale: float = 1.0):
    # Small integers (times a power of two) are exact in bf16 and so are their
    # products/sums here: the result is then independent of the rounding mode,
    # which makes the CPU interpreter (truncating fp32->bf16) bit-comparable.
    return (torch.randint(lo, hi + 1, shape, generator=gen).float() * scale).to(torch.bfloat16)


def _generator(device, seed: int, exact: bool) -> torch.Generator:
    # Random inputs are drawn on the device itself: drawing hundreds of MB on
    # the CPU and copying them dominated each asv benchmark process's setup.
    dev = torch.device(device)
    if exact or dev.type != "cuda":
        return torch.Generator().manual_seed(seed)
    return torch.Generator(device=dev).manual_seed(seed)


def rope_inputs(
    shape: shapes.RopeShape,
    device,
    seed: int = 0,
    exact: bool = False,
    transposed: bool | None = None,
):
    """(x, cos, sin) for one shape, cos/sin in the shape's layout (``shape.layout``).

    Token-major cos/sin are [B,S,H,D/2].transpose(1,2), the layout LTX-2 produces;
    head-major ones a contiguous [B,H,S,D/2]. ``transposed`` overrides the shape's
    layout (True: token-major), for tests of both layouts at one shape.
    """
    B, S, H, D = shape.B, shape.S, shape.H, shape.D
    if transposed is None:
        transposed = rope_layout(shape) == shapes.DEFAULT_LAYOUT
    gen = _generator(device, seed, exact)
    cs_shape = (B, S, H, D // 2) if transposed else (B, H, S, D // 2)
    if exact:
        pw = torch.tensor([-2.0, -1.0, -0.5, 0.5, 1.0, 2.0])
        x = _exact_values((B, S, H * D), -16, 16, gen)
        cos = pw[torch.randint(0, 6, cs_shape, generator=gen)].to(torch.bfloat16)
        sin = pw[torch.randint(0, 6, cs_shape, generator=gen)].to(torch.bfloat16)
    else:
        dev = gen.device
        x = torch.randn((B, S, H * D), generator=gen, device=dev).to(torch.bfloat16)
        ang = torch.rand(cs_shape, generator=gen, device=dev) * 6.2831853
        cos, sin = ang.cos().to(torch.bfloat16), ang.sin().to(torch.bfloat16)
    x, cos, sin = (t.to(device) for t in (x, cos, sin))
    if transposed:
        cos, sin = cos.transpose(1, 2), sin.transpose(1, 2)
    return x, cos, sin


def rope_layout(shape) -> str:
    """The cos/sin layout of a RoPE shape; token-major for a shape object that has none."""
    layout = getattr(shape, "layout", shapes.DEFAULT_LAYOUT)
    if layout not in shapes.LAYOUTS:
        raise ValueError(f"RoPE shape {shape.label}: unknown cos/sin layout {layout!r}")
    return layout


def ada_inputs(shape: shapes.AdaShape, device, seed: int = 0, exact: bool = False):
    """(scale_shift_table, timestep) for one shape."""
    B, S, D = shape.B, shape.S, shape.D
    gen = _generator(device, seed, exact)
    tdtype = {"bf16": torch.bfloat16, "fp32": torch.float32}[shape.table_dtype]
    if exact:
        table = _exact_values((9, D), -16, 16, gen, scale=0.5).to(tdtype)
        ts = _exact_values((B, S, 9 * D), -16, 16, gen)
    else:
        dev = gen.device
        table = (torch.randn((9, D), generator=gen, device=dev) / D**0.5).to(tdtype)
        ts = torch.randn((B, S, 9 * D), generator=gen, device=dev).to(torch.bfloat16)
    return table.to(device), ts.to(device)


def rope_bytes(shape: shapes.RopeShape) -> int:
    n = shape.B * shape.S * shape.H * shape.D
    return BF16 * (n + n + n // 2 + n // 2)  # read x, cos, sin once; write out once


def ada_bytes(shape: shapes.AdaShape) -> int:
    table = 9 * shape.D * (2 if shape.table_dtype == "bf16" else 4)
    n = 9 * shape.B * shape.S * shape.D
    return table + BF16 * (n + n)  # read table + timestep, write 9 outputs


@dataclass(frozen=True)
class KernelSpec:
    name: str  # "split_rope" / "ada_values9"
    asv_class: str  # benchmark class name in benchmarks/bench_kernels.py
    variants: tuple[str, ...]
    gpu_shapes: tuple
    cpu_shapes: tuple
    make_inputs: Callable[..., tuple]
    bytes_moved: Callable[[Any], int]
    reference: Callable[..., Any]
    triton_module: str  # module with ACCEPTED_VARIANTS and the public function
    public_fn: str
    # The arguments (by position) that are a block's nn.Parameter in LTX-2, where the
    # model calls the kernel with its own weights: AdaLN's scale_shift_table. The call
    # context "model" (ltx2k/workload/contexts.py) passes them so.
    weights: tuple[int, ...] = ()


KERNELS: dict[str, KernelSpec] = {
    "split_rope": KernelSpec(
        "split_rope",
        "SplitRope",
        variants.TIMED_VARIANTS["split_rope"],
        shapes.ROPE_SHAPES,
        shapes.ROPE_SHAPES_CPU,
        rope_inputs,
        rope_bytes,
        reference.split_rotary_reference,
        "ltx2k.kernels.rope",
        "apply_ltx2_split_rotary_emb",
    ),
    "ada_values9": KernelSpec(
        "ada_values9",
        "AdaValues9",
        variants.TIMED_VARIANTS["ada_values9"],
        shapes.ADA_SHAPES,
        shapes.ADA_SHAPES_CPU,
        ada_inputs,
        ada_bytes,
        reference.ada_values9_reference,
        "ltx2k.kernels.adaln",
        "ltx2_ada_values9",
        weights=(0,),
    ),
}


def input_sets(kernel: str, shape, device, count: int, seed: int = 0) -> list[tuple]:
    """*count* independent argument sets of *kernel* at *shape* (seeds seed, seed + 1, ...),
    for a cold-L2 rotation.

    Each set is drawn and allocated on its own: that is how the stored history was
    measured. Drawing small sets many at once, as slices of one allocation, was cheaper but
    moved cold device time at decode shapes (docs/measurement.md, "Suite cost").
    """
    if count < 1:
        raise ValueError(f"count must be >= 1, got {count}")
    make = KERNELS[kernel].make_inputs
    return [make(shape, device, seed=seed + i) for i in range(count)]


class VariantUnavailable(NotImplementedError):
    """This variant does not exist at this version/device; asv treats it as a skip."""


@functools.cache
def _compiled(kernel: str) -> Callable:
    import torch._inductor.config as inductor_config

    # Round bf16 intermediates as eager does; without this inductor keeps the
    # cos product in fp32 and the peer would not be bit-identical (and so would
    # not pass the correctness gate).
    if hasattr(inductor_config, "emulate_precision_casts"):
        inductor_config.emulate_precision_casts = True
    # Inductor times two configs of each 1-D pointwise kernel at its first run
    # and keeps the faster; on the H200 that choice differed between benchmark
    # processes (RoPE B1_S1024: 14.6 vs 11.8 us in two runs of one commit), so
    # the peer's history was bimodal. One heuristic config: a stable peer.
    if hasattr(inductor_config, "triton") and hasattr(inductor_config.triton, "autotune_pointwise"):
        inductor_config.triton.autotune_pointwise = False
    return torch.compile(KERNELS[kernel].reference, fullgraph=True, dynamic=False)


# The peers every kernel is measured against; the other variants are its Triton algorithms.
PEERS = ("eager", "compiled")


def variant_fn(kernel: str, variant: str, launch: str = "auto") -> Callable:
    """The callable for one variant: Triton launch, eager reference, or torch.compile of it.

    *launch* is the Triton variants' host path (``launch=`` of the public
    functions); a peer has none, so it takes ``"auto"`` only.
    """
    spec = KERNELS[kernel]
    if variant in PEERS:
        if launch != "auto":
            raise ValueError(f"variant {variant!r} has no launch path; got launch={launch!r}")
        return spec.reference if variant == "eager" else _compiled(kernel)
    import importlib
    import inspect

    mod = importlib.import_module(spec.triton_module)
    if variant not in getattr(mod, "ACCEPTED_VARIANTS", {}):
        raise VariantUnavailable(f"{kernel} has no variant {variant!r} at this version")
    fn = getattr(mod, spec.public_fn)
    if launch == "auto":
        return functools.partial(fn, variant=variant)
    if "launch" not in inspect.signature(fn).parameters:
        raise VariantUnavailable(f"{kernel} has no launch= parameter at this version")
    if (variant, launch) not in mod.CALLS:
        raise VariantUnavailable(f"{kernel} variant {variant!r} has no launch path {launch!r}")
    return functools.partial(fn, variant=variant, launch=launch)


def shapes_for(kernel: str, on_gpu: bool) -> tuple:
    spec = KERNELS[kernel]
    return spec.gpu_shapes if on_gpu else spec.cpu_shapes


def find_shape(kernel: str, label: str):
    for s in KERNELS[kernel].gpu_shapes + KERNELS[kernel].cpu_shapes:
        if s.label == label:
            return s
    raise ValueError(f"unknown {kernel} shape label {label!r}")


def outputs_equal(out: Any, ref: Any) -> bool:
    """Bit-exact comparison (NaN never equals anything, so unwritten poison fails)."""
    if isinstance(out, Sequence) and not isinstance(out, torch.Tensor):
        return len(out) == len(ref) and all(
            outputs_equal(o, r) for o, r in zip(out, ref, strict=True)
        )
    return out.shape == ref.shape and out.dtype == ref.dtype and torch.equal(out, ref)
