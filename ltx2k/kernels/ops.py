"""The kernels as registered ``torch.library`` ops, for every caller that is not plain inference.

- ``torch.ops.ltx2k.split_rope(x, cos, sin, variant, launch) -> Tensor``
- ``torch.ops.ltx2k.split_rope_backward(grad, cos, sin) -> Tensor`` (its gradient w.r.t. x)
- ``torch.ops.ltx2k.ada_values9(scale_shift_table, timestep, variant, launch) -> Tensor``:
  the ``(9, B, S, D)`` slab; :func:`ltx2k.ltx2_ada_values9` returns its ``unbind(0)``.
  One tensor, not nine: the nine values are views of one allocation, and a custom op's
  outputs may not alias one another.

Each has a fake implementation (shapes, dtypes, strides; the same validation, so a
bad input fails while tracing as it would at run time), an autograd formula and a vmap
rule; ``torch.library.opcheck`` tests them (tests/test_ops.py). The public functions in
:mod:`ltx2k.kernels.rope` and :mod:`ltx2k.kernels.adaln` send a call here when
:func:`routed` says so (autograd, functorch, fake or meta tensors, a dispatch mode,
tensor subclasses) and while ``torch.compile`` or ``torch.export`` traces; plain
inference tensors keep the native fast path, which never enters the dispatcher.
docs/kernels/transforms.md says what each transform does with each kernel.

The public functions call the ops through :class:`SplitRope` and :class:`AdaValues9`,
``torch.autograd.Function`` s over them: a custom op's own autograd formula serves
``.backward()`` but not ``torch.func`` transforms (its generated Function has no
``setup_context``) nor forward-mode AD (it takes no jvp formula). The Functions add
both, with the same backward, and a jvp: split RoPE is linear in ``x`` and in
``(cos, sin)``, AdaLN in both its inputs, so each tangent goes through the forward
kernel.
"""

from __future__ import annotations

import torch

from ltx2k.kernels import _native, adaln, rope, rope_backward
from ltx2k.workload import record as _record

_Tensor = torch.Tensor
_Parameter = torch.nn.Parameter
_len_dispatch_modes = torch._C._len_torch_dispatch_stack


def _observers_only() -> bool:
    # Modes that only watch the ops go by (ltx2k.measure.allocations) change no result.
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    return all(getattr(m, "ltx2k_observer", False) for m in _get_current_dispatch_mode_stack())


def routed(*tensors: object) -> bool:
    """Whether a public function's call must go through the registered op: an input
    that needs autograd, a functorch transform or forward-AD level, a fake/meta tensor or
    other subclass, or an active dispatch mode. Non-tensors stay on the Python path, whose
    validation names them. (``nn.Parameter`` under ``no_grad`` is plain inference.)"""
    if not all(isinstance(t, _Tensor) for t in tensors):
        return False
    if (
        _native._functorch_level() is not None
        or (_len_dispatch_modes() and not _observers_only())
        or _native._forward_ad._current_level >= 0
    ):
        return True
    grad = torch.is_grad_enabled()
    for t in tensors:
        kind = type(t)
        if (kind is not _Tensor and kind is not _Parameter) or t.is_meta:
            return True
        if grad and t.requires_grad:
            return True
    return False


# --- split RoPE ------------------------------------------------------------------------


@torch.library.custom_op("ltx2k::split_rope", mutates_args=())
def split_rope(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, variant: str, launch: str
) -> torch.Tensor:
    return rope._call(x, cos, sin, *_rope_call(variant, launch))


def _rope_call(variant: str, launch: str) -> tuple[str, str]:
    call = rope.CALLS.get((variant, launch))
    if call is None:
        raise rope._launch.bad_call(variant, launch, rope.CALLS)
    return call


@split_rope.register_fake
def _(x, cos, sin, variant, launch):
    _rope_call(variant, launch)
    rope._validate(x, cos, sin)
    _record.note_traced("split_rope", x, cos, sin)
    return torch.empty(x.shape, dtype=x.dtype, device=x.device)


@torch.library.custom_op("ltx2k::split_rope_backward", mutates_args=())
def split_rope_backward(grad: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    rope._validate(grad, cos, sin)
    return rope_backward.split_rope_backward(grad, cos, sin)


@split_rope_backward.register_fake
def _(grad, cos, sin):
    rope._validate(grad, cos, sin)
    return torch.empty(grad.shape, dtype=grad.dtype, device=grad.device)


def _halves(t: torch.Tensor, H: int, half: int) -> torch.Tensor:
    """``[B, S, H*D]`` -> ``[B, H, S, 2, D/2]``, the reference's view of x."""
    B, S, _ = t.shape
    return t.reshape(B, S, H, 2, half).permute(0, 2, 1, 3, 4)


def _rope_setup(ctx, inputs, output) -> None:
    x, cos, sin, _, _ = inputs
    ctx.save_for_backward(x, cos, sin)


def _rope_grad(ctx, grad):
    x, cos, sin = ctx.saved_tensors
    need_x, need_cos, need_sin = ctx.needs_input_grad[:3]
    grad = grad.contiguous()
    gx = None
    if need_x:
        gx = torch.ops.ltx2k.split_rope_backward(grad, cos, sin)
    gcos, gsin = _cos_sin_grads(grad, x, cos, need_cos, need_sin)
    return gx, gcos, gsin, None, None


def _cos_sin_grads(a, b, cos, need_cos: bool, need_sin: bool):
    """The cos and sin gradients of a split rotation, from a gradient *a* and what it
    multiplies, *b*, each split in halves: the sum of a*b over the halves, a2*b1 - a1*b2.

    Eager ops in the order eager autograd through the reference runs them (one bf16
    rounding per product, then per sum), so they match it bit for bit; no kernel is
    worth it for tensors B*S times smaller."""
    if not (need_cos or need_sin):
        return None, None
    H, half = cos.shape[1], cos.shape[3]
    a, b = _halves(a, H, half), _halves(b, H, half)
    gcos = (a * b).sum(-2) if need_cos else None
    gsin = a[..., 1, :] * b[..., 0, :] - a[..., 0, :] * b[..., 1, :] if need_sin else None
    return gcos, gsin


split_rope.register_autograd(_rope_grad, setup_context=_rope_setup)


def _rope_backward_setup(ctx, inputs, output) -> None:
    ctx.save_for_backward(*inputs)


def _rope_backward_grad(ctx, grad):
    # The backward is gx1 = g1*cos + g2*sin, gx2 = g2*cos - g1*sin: linear in g and in
    # (cos, sin). Its transpose in g is the rotation, with eager autograd's rounding
    # (each product rounded, then the sum): the backward kernel with the sine negated,
    # not the forward kernel, which adds the sine product unrounded. The cos/sin terms
    # are eager ops, as in _rope_grad.
    g, cos, sin = ctx.saved_tensors
    need_g, need_cos, need_sin = ctx.needs_input_grad[:3]
    grad = grad.contiguous()
    gg = None
    if need_g:
        gg = torch.ops.ltx2k.split_rope_backward(grad, cos, -sin)
    # products commute exactly, so (g, grad) in that order is the same bits
    gcos, gsin = _cos_sin_grads(g, grad, cos, need_cos, need_sin)
    return gg, gcos, gsin


split_rope_backward.register_autograd(_rope_backward_grad, setup_context=_rope_backward_setup)


def _fold(t: torch.Tensor, dim: int | None, n: int) -> torch.Tensor:
    """The vmapped dimension of ``t`` (or a broadcast one) merged into its first dim."""
    t = t.movedim(dim, 0) if dim is not None else t.expand(n, *t.shape)
    return t.reshape(n * t.shape[1], *t.shape[2:])


@split_rope.register_vmap
def _(info, in_dims, x, cos, sin, variant, launch):
    # Every token is independent, so the vmapped dim folds into B; x must be contiguous
    # for the kernel (reshape copies when the fold is not a view).
    n = info.batch_size
    xd, cd, sd = in_dims[:3]
    xf = _fold(x, xd, n).contiguous()
    out = torch.ops.ltx2k.split_rope(xf, _fold(cos, cd, n), _fold(sin, sd, n), variant, launch)
    return out.view(n, -1, *out.shape[1:]), 0


@split_rope_backward.register_vmap
def _(info, in_dims, grad, cos, sin):
    n = info.batch_size
    gd, cd, sd = in_dims
    gf = _fold(grad, gd, n).contiguous()
    out = torch.ops.ltx2k.split_rope_backward(gf, _fold(cos, cd, n), _fold(sin, sd, n))
    return out.view(n, -1, *out.shape[1:]), 0


# --- AdaLN values9 ---------------------------------------------------------------------


def _ada_call(variant: str, launch: str) -> tuple[str, str]:
    call = adaln.CALLS.get((variant, launch))
    if call is None:
        raise adaln._launch.bad_call(variant, launch, adaln.CALLS)
    return call


@torch.library.custom_op("ltx2k::ada_values9", mutates_args=())
def ada_values9(
    scale_shift_table: torch.Tensor, timestep: torch.Tensor, variant: str, launch: str
) -> torch.Tensor:
    return adaln._slab(scale_shift_table, timestep, *_ada_call(variant, launch))


@ada_values9.register_fake
def _(scale_shift_table, timestep, variant, launch):
    _ada_call(variant, launch)
    B, S, D = adaln._validate(scale_shift_table, timestep)
    _record.note_traced("ada_values9", scale_shift_table, timestep)
    return torch.empty((adaln.N_VALUES, B, S, D), dtype=torch.bfloat16, device=timestep.device)


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
    gts = g.view(B, S, adaln.N_VALUES * D) if need_ts else None
    return gtable, gts, None, None


ada_values9.register_autograd(_ada_grad, setup_context=_ada_setup)


@ada_values9.register_vmap
def _(info, in_dims, scale_shift_table, timestep, variant, launch):
    n = info.batch_size
    td, sd = in_dims[:2]
    if td is None:
        # One table for every sample: the vmapped dim folds into B.
        ts = _fold(timestep, sd, n).contiguous()
        slab = torch.ops.ltx2k.ada_values9(scale_shift_table, ts, variant, launch)
        return slab.view(slab.shape[0], n, -1, *slab.shape[2:]), 1
    # A table per sample cannot share a launch (the kernel reads one table): a loop.
    tables = scale_shift_table.movedim(td, 0)
    steps = timestep.movedim(sd, 0) if sd is not None else timestep.expand(n, *timestep.shape)
    outs = [
        torch.ops.ltx2k.ada_values9(tables[i], steps[i].contiguous(), variant, launch)
        for i in range(n)
    ]
    return torch.stack(outs), 0


# --- the entry points of the public functions: autograd.Functions over the ops -------


class SplitRope(torch.autograd.Function):
    """``torch.ops.ltx2k.split_rope`` with functorch-ready autograd and a jvp."""

    generate_vmap_rule = True  # vmap runs forward under vmap: the op's own vmap rule

    @staticmethod
    def forward(x, cos, sin, variant, launch):
        return torch.ops.ltx2k.split_rope(x, cos, sin, variant, launch)

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, cos, sin, variant, launch = inputs
        ctx.save_for_backward(x, cos, sin)
        ctx.save_for_forward(x, cos, sin)
        ctx.call = (variant, launch)

    @staticmethod
    def backward(ctx, grad):
        return _rope_grad(ctx, grad)

    @staticmethod
    def jvp(ctx, x_t, cos_t, sin_t, _variant, _launch):
        x, cos, sin = ctx.saved_tensors
        # Linear in x and, separately, in (cos, sin): each tangent goes through the same
        # kernel. functorch passes zeros for inputs without a tangent, eager forward AD None.
        out_t = None
        if x_t is not None:
            out_t = torch.ops.ltx2k.split_rope(x_t.contiguous(), cos, sin, *ctx.call)
        if cos_t is not None or sin_t is not None:
            cos_t = torch.zeros_like(cos) if cos_t is None else cos_t
            sin_t = torch.zeros_like(sin) if sin_t is None else sin_t
            term = torch.ops.ltx2k.split_rope(x, cos_t, sin_t, *ctx.call)
            out_t = term if out_t is None else out_t + term
        return out_t


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


def split_rope_routed(x, cos, sin, variant: str, launch: str) -> torch.Tensor:
    """The public function's call when :func:`routed` (or tracing) sends it here. While
    torch.compile/export traces, the op itself: dynamo does not trace an autograd.Function
    with a custom jvp, and AOTAutograd takes the op's registered autograd instead."""
    if torch.compiler.is_compiling():
        return torch.ops.ltx2k.split_rope(x, cos, sin, variant, launch)
    return SplitRope.apply(x, cos, sin, variant, launch)


def ada_values9_routed(scale_shift_table, timestep, variant: str, launch: str):
    """:func:`split_rope_routed` for AdaLN: the nine views of the op's slab."""
    if torch.compiler.is_compiling():
        slab = torch.ops.ltx2k.ada_values9(scale_shift_table, timestep, variant, launch)
    else:
        slab = AdaValues9.apply(scale_shift_table, timestep, variant, launch)
    return slab.unbind(0)
