"""AdaLN "values9": the nine scale/shift/gate tensors of an LTX-2 transformer block.

``out[i] = bf16(table[i]) + timestep[..., i*D:(i+1)*D]``, added in bf16 (fp32
add, one rounding), for ``i`` in 0..8 -- bit-identical to
:func:`ltx2k.workload.reference.ada_values9_reference`.

Two kernels and four device algorithms (``variant=``). The row kernel (one
program per token row, all 9 values, one output pointer per value) serves the
two allocation algorithms:

- ``"separate"`` (sglang's original kernel): 9 separate ``torch.empty`` outputs;
- ``"slab"`` (optimized): one ``(9, B, S, D)`` allocation returned as 9
  disjoint contiguous views (``unbind(0)``): one allocator call instead of 9.

The grid kernel spreads the work over rows x 9 values x column blocks and
takes the slab as one pointer plus the stride between value planes:

- ``"slab_grid"``: the same slab and views as ``"slab"``; grid
  ``(B*S * 9 * cdiv(D, BLOCK_D),)`` with ``BLOCK_D = min(1024, next_pow2(D))``,
  so the decode shape (B*S = 1) runs on 36 SMs instead of one, and each
  program does a single load -> store round trip;
- ``"slab_dconst"``: ``"slab_grid"`` with the hidden size D compiled in as a
  constant (``D_CONST``): the decode shape is pure latency, and the grid
  kernel's runtime division sat on the path to its first load.

The host launch path (``launch=``) is a second parameter. The grid kernel takes
``"triton"`` (``kernel[grid]``), ``"lean"`` (its compiled launcher, skipping
Triton's dispatcher, :mod:`ltx2k.kernels._launch`) or ``"native"`` (after the
first call with a given input layout the whole call -- checks, slab allocation,
launch, the 9 views -- is one C function, :mod:`ltx2k.kernels._native`); the
row kernel takes ``"triton"``. ``"auto"`` (default) is the fastest a variant
has. Every path launches the same compiled kernel: only host latency differs.
``"slab_lean"`` and ``"slab_native"``, older names of ``"slab_grid"`` with the
lean and native paths, are still accepted.

Supported: ``1 <= D <= 16384`` (one program of the row kernel holds a whole row of D).

The module registers the ``torch.library`` op
``torch.ops.ltx2k.ada_values9(scale_shift_table, timestep, variant, launch)``
(:mod:`ltx2k.kernels.ops` lists every op): the ``(9, B, S, D)`` slab, of which the public
function returns the ``unbind(0)``. One tensor, not nine: the nine values are views of
one allocation, and a custom op's outputs may not alias one another. It has a fake
implementation, an autograd formula and a vmap rule; the public function sends a call to
it when :func:`ltx2k.kernels._routing.routed` says so and while ``torch.compile`` or
``torch.export`` traces; plain inference tensors keep the native fast path.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ltx2k.kernels import _checks, _launch, _native, _routing
from ltx2k.workload import record as _record
from ltx2k.workload import variants

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


# The device algorithms (variant=) of the row kernel -> the allocator of the 9
# outputs it writes through 9 pointers.
ROW_ALGORITHMS = {"separate": _alloc_separate, "slab": _alloc_slab}
# The grid kernel's algorithms write one (9, B, S, D) slab through one pointer;
# "slab_dconst" compiles D in (D_CONST = D).
GRID_ALGORITHMS = ("slab_grid", "slab_dconst")
ALGORITHMS = (*ROW_ALGORITHMS, *GRID_ALGORITHMS)
# Names that once named an (algorithm, launch path) pair; still accepted as variant=.
LEGACY_VARIANTS = {"slab_lean": ("slab_grid", "lean"), "slab_native": ("slab_grid", "native")}
# Every accepted (variant, launch) -> (algorithm, launch path). The lean and native
# paths launch the grid kernel; the row kernel's 9 output pointers are not theirs.
CALLS = _launch.call_table(ALGORITHMS, GRID_ALGORITHMS, LEGACY_VARIANTS)
ACCEPTED_VARIANTS = ALGORITHMS + tuple(LEGACY_VARIANTS)
# One native memo per algorithm (a memo is keyed by the inputs' layout only).
_SITES = {a: _native.Site(f"ada_values9/{a}", n_inputs=2, unbind=True) for a in GRID_ALGORITHMS}
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


def _values9_grid(table, timestep, B: int, S: int, D: int, algo: str, path: str):
    slab = _alloc_slab_tensor(B, S, D, timestep.device)
    if not torch.compiler.is_compiling():
        _checks.real_data(scale_shift_table=table, timestep=timestep, out=slab)
    outs = slab.unbind(0)
    if B * S == 0:
        return outs
    block_d, num_warps = _grid_config(D)
    programs = B * S * N_VALUES * triton.cdiv(D, block_d)
    if programs > MAX_PROGRAMS:
        raise ValueError(
            f"variant {algo!r} would launch {programs} programs for timestep "
            f"{tuple(timestep.shape)}, over CUDA's {MAX_PROGRAMS}; use variant='slab'"
        )
    grid = (programs,)
    scalars = (D, table.stride(0), slab.stride(0))
    d_const = D if algo == "slab_dconst" else 0
    constexprs = (("BLOCK_D", block_d), ("D_CONST", d_const))
    _launch.launch_by(
        path,
        _ada_values9_grid_kernel,
        grid,
        (table, timestep, slab),
        scalars,
        constexprs,
        num_warps,
        site=_SITES[algo] if path == "native" else None,
        inputs=(table, timestep),
        out=slab,
    )
    return outs


def _validate(table: object, timestep: object) -> tuple[int, int, int]:
    table = _checks.tensor("scale_shift_table", table)
    timestep = _checks.tensor("timestep", timestep)
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
    _checks.row_offsets("scale_shift_table", table)
    B, S, last = timestep.shape
    if last != N_VALUES * D:
        raise ValueError(
            f"timestep.shape[-1] must be 9*D = {N_VALUES * D} (D = scale_shift_table.shape[1]), "
            f"got timestep {tuple(timestep.shape)}"
        )
    return B, S, D


def _slab(scale_shift_table, timestep, algo: str, path: str) -> torch.Tensor:
    """The registered op's implementation: the nine values as one ``(9, B, S, D)`` tensor."""
    outs = None
    if path == "native" and _native.plain2(scale_shift_table, timestep):
        outs = _SITES[algo].call(scale_shift_table, timestep)
    if outs is None:
        outs = _launch_python(scale_shift_table, timestep, algo, path)
    # Every algorithm but "separate" returns slab.unbind(0) (the native replay too):
    # hand back that slab rather than a copy of it.
    slab = outs[0]._base
    if slab is not None and slab.dim() == 4 and all(o._base is slab for o in outs):
        return slab
    return torch.stack(outs)


def _launch_python(scale_shift_table, timestep, algo: str, path: str) -> tuple[torch.Tensor, ...]:
    """Validate, allocate and launch from Python (recording the launch for the native path)."""
    B, S, D = _validate(scale_shift_table, timestep)
    if algo in GRID_ALGORITHMS:
        return _values9_grid(scale_shift_table, timestep, B, S, D, algo, path)
    if B * S > MAX_PROGRAMS:
        # One program per row on the grid's x axis: past CUDA's limit the launch fails
        # inside Triton (and program_id, an int32, could not number the rows).
        raise ValueError(
            f"variant {algo!r} launches a program per row: B*S = {B * S} rows of timestep "
            f"{tuple(timestep.shape)}, over CUDA's {MAX_PROGRAMS}"
        )
    outs = ROW_ALGORITHMS[algo](B, S, D, timestep.device)
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


# --- the registered op: torch.ops.ltx2k.ada_values9 ------------------------------------
# For every caller that is not plain inference (ltx2k.kernels.ops lists every op).


@torch.library.custom_op("ltx2k::ada_values9", mutates_args=())
def ada_values9(
    scale_shift_table: torch.Tensor, timestep: torch.Tensor, variant: str, launch: str
) -> torch.Tensor:
    return _slab(scale_shift_table, timestep, *_launch.resolve(CALLS, variant, launch))


@ada_values9.register_fake
def _(scale_shift_table, timestep, variant, launch):
    _launch.resolve(CALLS, variant, launch)
    B, S, D = _validate(scale_shift_table, timestep)
    _record.note_traced("ada_values9", scale_shift_table, timestep)
    return torch.empty((N_VALUES, B, S, D), dtype=torch.bfloat16, device=timestep.device)


def _ada_setup(ctx, inputs, output) -> None:
    table, _, _, _ = inputs
    ctx.table_dtype = table.dtype


def _ada_grad(ctx, grad):
    # grad: (9, B, S, D). Eager autograd through the reference sums the contiguous
    # [B, S, 9, D] gradient over (B, S) in bf16 (sum_to_size), then casts to the table's
    # dtype; the same ops on the same layout give the same bits.
    need_table, need_ts = ctx.needs_input_grad[:2]
    _, B, S, D = grad.shape
    g = grad.permute(1, 2, 0, 3).contiguous()
    gtable = g.sum((0, 1)).to(ctx.table_dtype) if need_table else None
    gts = g.view(B, S, N_VALUES * D) if need_ts else None
    return gtable, gts, None, None


ada_values9.register_autograd(_ada_grad, setup_context=_ada_setup)


@ada_values9.register_vmap
def _(info, in_dims, scale_shift_table, timestep, variant, launch):
    n = info.batch_size
    td, sd = in_dims[:2]
    if td is None:
        # One table for every sample: the vmapped dim folds into B.
        ts = _routing.fold(timestep, sd, n).contiguous()
        slab = torch.ops.ltx2k.ada_values9(scale_shift_table, ts, variant, launch)
        # B given, not -1: a slab of zero elements cannot infer it
        B = _routing.sample_shape(timestep, sd)[0]
        return slab.view(slab.shape[0], n, B, *slab.shape[2:]), 1
    # A table per sample cannot share a launch (the kernel reads one table): a loop.
    tables = scale_shift_table.movedim(td, 0)
    steps = timestep.movedim(sd, 0) if sd is not None else timestep.expand(n, *timestep.shape)
    if n == 0:
        # No samples to loop over: validate one sample's layout (meta: no launch), then
        # the empty stack (torch.stack of nothing raises).
        _launch.resolve(CALLS, variant, launch)
        meta = _routing.meta_sample
        B, S, D = _validate(meta(scale_shift_table, td), meta(timestep, sd).contiguous())
        return torch.empty((0, N_VALUES, B, S, D), dtype=torch.bfloat16, device=timestep.device), 0
    outs = [
        torch.ops.ltx2k.ada_values9(tables[i], steps[i].contiguous(), variant, launch)
        for i in range(n)
    ]
    return torch.stack(outs), 0


# --- the public function's entry to the op ---------------------------------------------
# As rope's SplitRope: the op's own autograd formula serves neither ``torch.func``
# transforms nor forward-mode AD. AdaLN is linear in both its inputs, so the jvp is the
# forward kernel on the tangents.


class AdaValues9(torch.autograd.Function):
    """``torch.ops.ltx2k.ada_values9`` with functorch-ready autograd and a jvp."""

    generate_vmap_rule = True

    @staticmethod
    def forward(scale_shift_table, timestep, variant, launch):
        return torch.ops.ltx2k.ada_values9(scale_shift_table, timestep, variant, launch)

    @staticmethod
    def setup_context(ctx, inputs, output):
        table, timestep, variant, launch = inputs
        ctx.table_dtype = table.dtype
        ctx.save_for_forward(table, timestep)
        ctx.call = (variant, launch)

    @staticmethod
    def backward(ctx, grad):
        return _ada_grad(ctx, grad)

    @staticmethod
    def jvp(ctx, table_t, timestep_t, _variant, _launch):
        table, timestep = ctx.saved_tensors
        # Linear in both: bf16(table_t[i]) + timestep_t[..., i], the same kernel on tangents.
        table_t = torch.zeros_like(table) if table_t is None else table_t
        timestep_t = torch.zeros_like(timestep) if timestep_t is None else timestep_t.contiguous()
        return torch.ops.ltx2k.ada_values9(table_t, timestep_t, *ctx.call)


def ada_values9_routed(scale_shift_table, timestep, variant: str, launch: str):
    """The public function's call when :func:`ltx2k.kernels._routing.routed` (or tracing)
    sends it here: the nine views of the op's slab. While torch.compile/export traces, the
    op itself, as in :func:`ltx2k.kernels.rope.split_rope_routed`."""
    if torch.compiler.is_compiling():
        slab = torch.ops.ltx2k.ada_values9(scale_shift_table, timestep, variant, launch)
    else:
        slab = AdaValues9.apply(scale_shift_table, timestep, variant, launch)
    return slab.unbind(0)


# --- the public function ---------------------------------------------------------------


def ltx2_ada_values9(
    scale_shift_table: torch.Tensor,
    timestep: torch.Tensor,
    *,
    variant: str = variants.DEFAULT_VARIANT["ada_values9"],
    launch: str = "auto",
) -> tuple[torch.Tensor, ...]:
    """Compute the nine AdaLN values. Bit-identical to the eager reference.

    Args:
        scale_shift_table: ``[9, D]`` bf16 or fp32, last-dim stride 1.
        timestep: ``[B, S, 9*D]`` bf16, contiguous.
        variant: the device algorithm: ``"slab_dconst"`` (default: the grid kernel,
            rows x values x column blocks, writing one ``(9, B, S, D)`` slab, with D
            compiled in), ``"slab_grid"`` (the same with D at run time), ``"slab"``
            (the row kernel, one slab) or ``"separate"`` (sglang's original: the row
            kernel, 9 allocations). ``"slab_lean"`` and ``"slab_native"`` are older
            names of ``"slab_grid"`` with ``launch="lean"`` / ``"native"``.
        launch: the host path: ``"auto"`` (default: ``"native"`` for the grid
            kernel's algorithms, ``"triton"`` for the row kernel's), ``"native"``
            (after the first call with a given input layout the whole call is one C
            function; without a C++ compiler it warns once and takes the lean path),
            ``"lean"`` (the compiled kernel's launcher, skipping Triton's dispatcher)
            or ``"triton"`` (``kernel[grid]``). Every path launches the same
            compiled kernel; the row kernel launches through ``"triton"`` only.

    Returns:
        A tuple of 9 contiguous ``[B, S, D]`` bf16 tensors.
    """
    _checks.record_call("ada_values9", scale_shift_table, timestep)
    try:  # inline: this is the hot path (a try costs nothing until it raises)
        call = CALLS.get((variant, launch))
    except TypeError:  # an unhashable variant or launch: named below
        call = None
    if call is None:
        raise _launch.bad_call(variant, launch, CALLS)
    algo, path = call
    if (
        path == "native"
        and not torch.compiler.is_compiling()
        and _native.plain2(scale_shift_table, timestep)  # functorch, fake, meta (C++: autograd)
    ):
        # None: not seen with this layout yet, or not eligible (the Python path decides)
        outs = _SITES[algo].call(scale_shift_table, timestep)
        if outs is not None:
            return outs
    if torch.compiler.is_compiling() or _routing.routed(scale_shift_table, timestep):
        return ada_values9_routed(scale_shift_table, timestep, variant, launch)
    return _launch_python(scale_shift_table, timestep, algo, path)
