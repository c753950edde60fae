"""AdaLN "values9": the nine scale/shift/gate tensors of an LTX-2 transformer block.

``out[i] = bf16(table[i]) + timestep[..., i*D:(i+1)*D]``, added in bf16 (fp32
add, one rounding), for ``i`` in 0..8 -- bit-identical to
:func:`ltx2k.reference.ada_values9_reference`.

Two kernels. The row kernel (one program per token row, all 9 values, one
output pointer per value) serves the two allocation variants:

- ``"separate"`` (the seed): 9 separate ``torch.empty`` outputs;
- ``"slab"`` (optimized): one ``(9, B, S, D)`` allocation returned as 9
  disjoint contiguous views (``unbind(0)``): one allocator call instead of 9.

The grid kernel spreads the work over rows x 9 values x column blocks and
takes the slab as one pointer plus the stride between value planes:

- ``"slab_grid"``: the same slab and views as ``"slab"``; grid
  ``(B*S * 9 * cdiv(D, BLOCK_D),)`` with ``BLOCK_D = min(1024, next_pow2(D))``,
  so the decode shape (B*S = 1) runs on 36 SMs instead of one, and each
  program does a single load -> store round trip;
- ``"slab_lean"``: ``"slab_grid"`` launched through :mod:`ltx2k.kernels._launch`
  (host latency only; the device work is identical).
- ``"slab_native"``: ``"slab_grid"``; after the first call with a given input
  layout, the whole call (checks, slab allocation, launch, the 9 views) is one C
  function (:mod:`ltx2k.kernels._native`). Host latency only; same device work.
- ``"slab_dconst"``: ``"slab_native"`` with the hidden size D compiled in as a
  constant (``D_CONST``): the decode shape is pure latency, and the grid
  kernel's runtime division sat on the path to its first load.

Supported: ``1 <= D <= 16384`` (one program of the row kernel holds a whole row of D).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ltx2k import shapes
from ltx2k.kernels import _checks, _launch, _native

MAX_D = 16384
N_VALUES = 9


@triton.jit
def _add_one(table_row, ts_row, out_row, cols, mask):
    t = tl.load(table_row + cols, mask=mask, other=0.0)
    v = tl.load(ts_row + cols, mask=mask, other=0.0)
    # bf16(table) first: an fp32 table must round before the add, as `.to(bf16)` does.
    t = t.to(tl.bfloat16).to(tl.float32)
    tl.store(out_row + cols, (t + v.to(tl.float32)).to(tl.bfloat16), mask=mask)


@triton.jit
def _ada_values9_kernel(
    # pointers: the table, the timestep, and one output per value (9 is fixed
    # by the model; separate pointers let the same kernel serve both variants)
    table_ptr,
    ts_ptr,
    o0,
    o1,
    o2,
    o3,
    o4,
    o5,
    o6,
    o7,
    o8,
    # sizes and strides
    D,
    stride_table,
    # meta-parameters
    BLOCK_D: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)  # flattened (b, s); int64: 9*B*S*D can pass 2**31
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    ts = ts_ptr + row * (9 * D)
    out = row * D
    _add_one(table_ptr + 0 * stride_table, ts + 0 * D, o0 + out, cols, mask)
    _add_one(table_ptr + 1 * stride_table, ts + 1 * D, o1 + out, cols, mask)
    _add_one(table_ptr + 2 * stride_table, ts + 2 * D, o2 + out, cols, mask)
    _add_one(table_ptr + 3 * stride_table, ts + 3 * D, o3 + out, cols, mask)
    _add_one(table_ptr + 4 * stride_table, ts + 4 * D, o4 + out, cols, mask)
    _add_one(table_ptr + 5 * stride_table, ts + 5 * D, o5 + out, cols, mask)
    _add_one(table_ptr + 6 * stride_table, ts + 6 * D, o6 + out, cols, mask)
    _add_one(table_ptr + 7 * stride_table, ts + 7 * D, o7 + out, cols, mask)
    _add_one(table_ptr + 8 * stride_table, ts + 8 * D, o8 + out, cols, mask)


@triton.jit
def _ada_values9_grid_kernel(
    # pointers: the table, the timestep, and the (9, B*S, D) output slab as one base
    table_ptr,
    ts_ptr,
    out_ptr,
    # sizes and strides
    D,
    stride_table,
    stride_value,  # elements between two values' planes of the slab (B*S*D)
    # meta-parameters: a power-of-two block, so each thread's 8 bf16 are one 16-byte access
    BLOCK_D: tl.constexpr,
    # > 0 ("slab_dconst"): D as a compile-time constant (one binary per hidden size),
    # so the program-id decode and the address math below are shifts and constant
    # multiplies instead of a runtime integer division (~60 instructions before the
    # first load at D=4096 otherwise; docs/kernels/ada_values9.md). 0: D at run time.
    D_CONST: tl.constexpr,
):
    if D_CONST > 0:
        D = D_CONST
    # Programs enumerate (row, value, column block) with the column block
    # fastest: timestep's own memory order, so consecutive programs read
    # consecutive bytes as a copy kernel does; the slab is written as 9 streams.
    pid = tl.program_id(0)
    n_col_blocks = tl.cdiv(D, BLOCK_D)
    col_block = pid % n_col_blocks
    row_value = pid // n_col_blocks  # row * 9 + value
    value = row_value % 9
    row = (row_value // 9).to(tl.int64)  # int64: 9*B*S*D can pass 2**31
    cols = col_block * BLOCK_D + tl.arange(0, BLOCK_D)
    mask = cols < D
    _add_one(
        table_ptr + value * stride_table,
        ts_ptr + row_value.to(tl.int64) * D,
        out_ptr + value.to(tl.int64) * stride_value + row * D,
        cols,
        mask,
    )


def _alloc_separate(B: int, S: int, D: int, device: torch.device) -> tuple[torch.Tensor, ...]:
    return tuple(
        torch.empty((B, S, D), dtype=torch.bfloat16, device=device) for _ in range(N_VALUES)
    )


def _alloc_slab(B: int, S: int, D: int, device: torch.device) -> tuple[torch.Tensor, ...]:
    return torch.empty((N_VALUES, B, S, D), dtype=torch.bfloat16, device=device).unbind(0)


def _alloc_slab_tensor(B: int, S: int, D: int, device: torch.device) -> torch.Tensor:
    return torch.empty((N_VALUES, B, S, D), dtype=torch.bfloat16, device=device)


# Variant -> allocator. The row kernel's variants allocate the 9 outputs it
# writes through 9 pointers; the grid kernel's allocate the slab it writes
# through one pointer (GRID_VARIANTS).
VARIANTS = {
    "separate": _alloc_separate,
    "slab": _alloc_slab,
    "slab_grid": _alloc_slab_tensor,
    "slab_lean": _alloc_slab_tensor,
    "slab_native": _alloc_slab_tensor,
    "slab_dconst": _alloc_slab_tensor,
}
GRID_VARIANTS = frozenset({"slab_grid", "slab_lean", "slab_native", "slab_dconst"})
# Launched through the lean path (ltx2k.kernels._launch) instead of kernel[grid].
LEAN_VARIANTS = frozenset({"slab_lean"})
# Replayed by the native call path (ltx2k.kernels._native) after their first call;
# one memo per variant (a memo is keyed by the inputs' layout only).
NATIVE_VARIANTS = frozenset({"slab_native", "slab_dconst"})
_SITES = {v: _native.Site(f"ada_values9/{v}", n_inputs=2, unbind=True) for v in NATIVE_VARIANTS}
# The grid kernel with D compiled in (D_CONST = D).
DCONST_VARIANTS = frozenset({"slab_dconst"})
# The grid is 1-D; CUDA allows up to 2**31 - 1 programs on its x axis.
MAX_PROGRAMS = 2**31 - 1


def _grid_config(D: int) -> tuple[int, int]:
    """(BLOCK_D, num_warps) of the grid kernel.

    1024 columns is one 2 KiB bf16 slice of a value per program: at the decode
    shape D=4096 that is 9 x 4 = 36 programs (36 SMs) each doing one round trip,
    and at B2_S6144 it is 442k small independent programs, the shape of a
    plain elementwise copy kernel. BLOCK_D/256 warps give each thread 8
    contiguous bf16: one 16-byte access per operand (ld.global.v4 in the PTX).
    One rule for all row counts: no threshold to justify or tune per GPU.
    """
    block_d = min(1024, triton.next_power_of_2(D))
    return block_d, max(1, block_d // 256)


def _values9_grid(table, timestep, B: int, S: int, D: int, variant: str):
    slab = VARIANTS[variant](B, S, D, timestep.device)
    if not torch.compiler.is_compiling():
        _checks.real_data(scale_shift_table=table, timestep=timestep, out=slab)
    outs = slab.unbind(0)
    if B * S == 0:
        return outs
    block_d, num_warps = _grid_config(D)
    programs = B * S * N_VALUES * triton.cdiv(D, block_d)
    if programs > MAX_PROGRAMS:
        raise ValueError(
            f"variant {variant!r} would launch {programs} programs for timestep "
            f"{tuple(timestep.shape)}, over CUDA's {MAX_PROGRAMS}; use variant='slab'"
        )
    grid = (programs,)
    scalars = (D, table.stride(0), slab.stride(0))
    d_const = D if variant in DCONST_VARIANTS else 0
    constexprs = (("BLOCK_D", block_d), ("D_CONST", d_const))
    if variant in NATIVE_VARIANTS:
        _SITES[variant].launch_and_record(
            _ada_values9_grid_kernel,
            grid,
            (table, timestep),
            slab,
            (table, timestep, slab),
            scalars,
            constexprs,
            num_warps,
        )
    elif variant in LEAN_VARIANTS:
        _launch.launch(
            _ada_values9_grid_kernel, grid, (table, timestep, slab), scalars, constexprs, num_warps
        )
    else:
        _ada_values9_grid_kernel[grid](
            table, timestep, slab, *scalars, BLOCK_D=block_d, D_CONST=0, num_warps=num_warps
        )
    return outs


def _validate(table: object, timestep: object, variant: str) -> tuple[int, int, int]:
    table = _checks.tensor("scale_shift_table", table)
    timestep = _checks.tensor("timestep", timestep)
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {sorted(VARIANTS)}, got {variant!r}")
    _checks.rank("scale_shift_table", table, 2, "[9, D]")
    _checks.rank("timestep", timestep, 3, "[B, S, 9*D]")
    if table.shape[0] != N_VALUES:
        raise ValueError(f"scale_shift_table.shape[0] must be 9, got shape {tuple(table.shape)}")
    _checks.dtype("scale_shift_table", table, (torch.bfloat16, torch.float32))
    _checks.dtype("timestep", timestep, (torch.bfloat16,))
    _checks.unit_last_stride("scale_shift_table", table)
    _checks.contiguous("timestep", timestep)
    _checks.same_device(scale_shift_table=table, timestep=timestep)
    D = table.shape[1]
    _checks.in_range("D", D, 1, MAX_D, "hidden size scale_shift_table.shape[1]")
    B, S, last = timestep.shape
    if last != N_VALUES * D:
        raise ValueError(
            f"timestep.shape[-1] must be 9*D = {N_VALUES * D} (D = scale_shift_table.shape[1]), "
            f"got timestep {tuple(timestep.shape)}"
        )
    return B, S, D


def ltx2_ada_values9(
    scale_shift_table: torch.Tensor,
    timestep: torch.Tensor,
    *,
    variant: str = shapes.DEFAULT_VARIANT["ada_values9"],
) -> tuple[torch.Tensor, ...]:
    """Compute the nine AdaLN values. Bit-identical to the eager reference.

    Args:
        scale_shift_table: ``[9, D]`` bf16 or fp32, last-dim stride 1.
        timestep: ``[B, S, 9*D]`` bf16, contiguous.
        variant: ``"slab_dconst"`` (default: the grid kernel with D compiled in,
            replayed by one C function after the first call with a given input
            layout; at B1_S1_D4096 on the H200 1.45 µs device time and 17 µs host
            latency vs eager's 1.48 and 30, docs/kernels/ada_values9.md),
            ``"slab_native"`` (the same with D at run time), ``"slab_lean"`` /
            ``"slab_grid"`` (the grid kernel through the lean Python launch path /
            ``kernel[grid]``), ``"slab"`` (the row kernel, one allocation) or
            ``"separate"`` (the seed, 9 allocations). Where the native module cannot
            be built, the native variants launch through the lean path, one warning.

    Returns:
        A tuple of 9 contiguous ``[B, S, D]`` bf16 tensors.
    """
    if (
        variant in NATIVE_VARIANTS
        and not torch.compiler.is_compiling()
        and _native.plain2(scale_shift_table, timestep)  # vmap/grad/jvp, fake, meta: Python path
    ):
        # None: not seen with this layout yet, or not eligible (the Python path decides)
        outs = _SITES[variant].call(scale_shift_table, timestep)
        if outs is not None:
            return outs
    B, S, D = _validate(scale_shift_table, timestep, variant)
    if variant in GRID_VARIANTS:
        return _values9_grid(scale_shift_table, timestep, B, S, D, variant)
    outs = VARIANTS[variant](B, S, D, timestep.device)
    if not torch.compiler.is_compiling():
        _checks.real_data(scale_shift_table=scale_shift_table, timestep=timestep, out=outs[0])
    if B * S == 0:
        return outs
    block_d = triton.next_power_of_2(D)
    _ada_values9_kernel[(B * S,)](
        scale_shift_table,
        timestep,
        *outs,
        D,
        scale_shift_table.stride(0),
        BLOCK_D=block_d,
        num_warps=min(8, max(1, block_d // 512)),
    )
    return outs
