"""Split RoPE on q and k in one launch (LTX-2 layout): self- and cross-attention.

``q`` is ``[B, Sq, H*D]``, ``k`` is ``[B, Sk, H*D]`` (``Sq != Sk`` in the cross-attention
between the video and audio streams), with their own ``[B, H, S, D/2]`` cos/sin. Each
output is :func:`ltx2k.kernels.rope.apply_ltx2_split_rotary_emb` of its input, bit for bit
(the rounding order of :func:`ltx2k.workload.reference.split_rotary_reference`).

One kernel, three ways to spread the work (``variant=``):

- ``"row"`` (sglang's current design): one program per token row over all heads, q's row
  and k's row in the same program, each reading its own cos/sin; grid
  ``max(B*Sq, B*Sk)``, ``num_warps`` 4 at a hidden size of 4096 and over, else 8.
- ``"tiled"``: split RoPE's tiles (:func:`ltx2k.kernels.rope._tiled`: a whole token's
  heads, several tokens where one is less than a tile). Where q and k share their cos and
  sin (the very same tensors: self-attention), a program rotates the same tile of q and of
  k with one read of the angles, so the pair moves ``q + k`` in and out and cos/sin once;
  otherwise q's programs come first in the grid, then k's.
- ``"tiled_pdl"`` (the default): ``"tiled"`` with programmatic dependent launch where the
  GPU has it (as :mod:`ltx2k.kernels.rope`'s ``"tiled_pdl"``).

The host paths (``launch=``) are split RoPE's: ``"triton"``, ``"lean"``, ``"native"``,
``"auto"`` (``"native"``). Sharing is decided per call by identity (``q_cos is k_cos and
q_sin is k_sin``), and a shared call replays from its own native memo whose inputs are
``(q, k, cos, sin)``: a replay cannot mistake two tensors of one layout for one tensor.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait

from ltx2k.kernels import _checks, _launch, _native, _routing, _tiles, rope
from ltx2k.workload import record as _record
from ltx2k.workload import variants

# How a program's work is laid out (the kernel's MODE).
SEPARATE, SHARED, ROW = 0, 1, 2


@triton.jit
def _rope_tile(
    x_ptr, cos_ptr, sin_ptr, out_ptr, tile, n_tokens, S, H, HALF,
    scb, sch, scs, ssb, ssh, sss, head0,
    BLOCK_TOKENS: tl.constexpr, BLOCK_HEADS: tl.constexpr, BLOCK_HALF: tl.constexpr,
):  # fmt: skip
    row, inner, mask, b, s, heads, cols = _tiles.tile_offsets(
        tile * BLOCK_TOKENS, n_tokens, S, H, HALF, BLOCK_TOKENS, BLOCK_HEADS, BLOCK_HALF, head0
    )
    c, sn = _tiles.load_angles(
        cos_ptr, sin_ptr, b, s, heads, cols, scb, sch, scs, ssb, ssh, sss, mask
    )
    x1 = tl.load(x_ptr + row + inner, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(x_ptr + row + (inner + HALF), mask=mask, other=0.0).to(tl.float32)
    _tiles.rotate_store(out_ptr + row, inner, x1, x2, c, sn, HALF, mask)


@triton.jit
def _split_rope_pair_kernel(
    # pointers
    q_ptr, k_ptr, q_cos_ptr, q_sin_ptr, k_cos_ptr, k_sin_ptr, q_out_ptr, k_out_ptr,
    # sizes: sequence lengths, heads, half head dim, tokens (B*S) of each, q's programs
    Sq, Sk, H, HALF, q_tokens, k_tokens, q_programs,
    # strides of cos/sin (b, h, s); q and k are contiguous [B*S, H*D]
    qcb, qch, qcs, qsb, qsh, qss, kcb, kch, kcs, ksb, ksh, kss,
    # constexpr: the tile is a compile-time shape, so the half-dim loads vectorise
    BLOCK_HEADS: tl.constexpr, BLOCK_HALF: tl.constexpr, BLOCK_TOKENS: tl.constexpr,
    MODE: tl.constexpr,
    PDL: tl.constexpr = False,
):  # fmt: skip
    if PDL:
        # As split RoPE's tiled_pdl (ltx2k/kernels/rope.py): let the next kernel launch,
        # then wait for the one before; every load and store comes after the wait.
        gdc_launch_dependents()
        gdc_wait()
    pid = tl.program_id(0)
    head0 = tl.program_id(1) * BLOCK_HEADS
    if MODE == 1:
        # q and k share cos/sin (and so their length): one read of the angles for both.
        row, inner, mask, b, s, heads, cols = _tiles.tile_offsets(
            pid * BLOCK_TOKENS, q_tokens, Sq, H, HALF, BLOCK_TOKENS, BLOCK_HEADS, BLOCK_HALF, head0
        )
        c, sn = _tiles.load_angles(
            q_cos_ptr, q_sin_ptr, b, s, heads, cols, qcb, qch, qcs, qsb, qsh, qss, mask
        )
        q1 = tl.load(q_ptr + row + inner, mask=mask, other=0.0).to(tl.float32)
        q2 = tl.load(q_ptr + row + (inner + HALF), mask=mask, other=0.0).to(tl.float32)
        k1 = tl.load(k_ptr + row + inner, mask=mask, other=0.0).to(tl.float32)
        k2 = tl.load(k_ptr + row + (inner + HALF), mask=mask, other=0.0).to(tl.float32)
        _tiles.rotate_store(q_out_ptr + row, inner, q1, q2, c, sn, HALF, mask)
        _tiles.rotate_store(k_out_ptr + row, inner, k1, k2, c, sn, HALF, mask)
    elif MODE == 2:
        # sglang's current design: row pid of q and of k (the shorter one masked off).
        _rope_tile(q_ptr, q_cos_ptr, q_sin_ptr, q_out_ptr, pid, q_tokens, Sq, H, HALF,
                   qcb, qch, qcs, qsb, qsh, qss, head0, 1, BLOCK_HEADS, BLOCK_HALF)  # fmt: skip
        _rope_tile(k_ptr, k_cos_ptr, k_sin_ptr, k_out_ptr, pid, k_tokens, Sk, H, HALF,
                   kcb, kch, kcs, ksb, ksh, kss, head0, 1, BLOCK_HEADS, BLOCK_HALF)  # fmt: skip
    else:
        if pid < q_programs:
            _rope_tile(q_ptr, q_cos_ptr, q_sin_ptr, q_out_ptr, pid, q_tokens, Sq, H, HALF,
                       qcb, qch, qcs, qsb, qsh, qss, head0,
                       BLOCK_TOKENS, BLOCK_HEADS, BLOCK_HALF)  # fmt: skip
        else:
            _rope_tile(k_ptr, k_cos_ptr, k_sin_ptr, k_out_ptr, pid - q_programs, k_tokens, Sk,
                       H, HALF, kcb, kch, kcs, ksb, ksh, kss, head0,
                       BLOCK_TOKENS, BLOCK_HEADS, BLOCK_HALF)  # fmt: skip


class PairConfig(NamedTuple):
    mode: int
    block_heads: int
    head_blocks: int  # grid dim 1
    block_tokens: int
    q_programs: int  # grid dim 0 is q_programs + k_programs
    k_programs: int
    num_warps: int
    pdl: bool = False


def upstream_row_warps(hidden: int) -> int:
    """The warps sglang launches its one-program-per-token-row prologue kernels with
    (the pair's and the fused prologue's ``"row"``): 4 at a hidden size of 4096 and over,
    else 8."""
    return 4 if hidden >= 4096 else 8


def _row(H: int, D: int, q_tokens: int, k_tokens: int, num_sms: int, shared: bool):
    # One program per row of both.
    return PairConfig(
        ROW, triton.next_power_of_2(H), 1, 1, max(q_tokens, k_tokens), 0,
        upstream_row_warps(H * D),
    )  # fmt: skip


def _tiled(H: int, D: int, q_tokens: int, k_tokens: int, num_sms: int, shared: bool):
    if shared:
        # One program per tile of q and the same tile of k: the grid of one operand.
        cfg = rope._tiled(H, D, q_tokens, num_sms)
        programs = triton.cdiv(q_tokens, cfg.block_tokens)
        return PairConfig(
            SHARED, cfg.block_heads, cfg.head_blocks, cfg.block_tokens, programs, 0, cfg.num_warps
        )
    # Separate programs: size the tile for the two operands' tokens together.
    cfg = rope._tiled(H, D, q_tokens + k_tokens, num_sms)
    bt = cfg.block_tokens
    q_programs, k_programs = triton.cdiv(q_tokens, bt), triton.cdiv(k_tokens, bt)
    return PairConfig(
        SEPARATE, cfg.block_heads, cfg.head_blocks, bt, q_programs, k_programs, cfg.num_warps
    )


def _tiled_pdl(H: int, D: int, q_tokens: int, k_tokens: int, num_sms: int, shared: bool):
    return _tiled(H, D, q_tokens, k_tokens, num_sms, shared)._replace(pdl=True)


# The device algorithms (variant=). Append only: a name is the key of its history.
ALGORITHMS = {"row": _row, "tiled": _tiled, "tiled_pdl": _tiled_pdl}
CALLS = _launch.call_table(ALGORITHMS, ALGORITHMS, {})
ACCEPTED_VARIANTS = tuple(ALGORITHMS)
# Native memos: one per algorithm and sharing (a shared call's inputs are q, k, cos, sin).
_SITES = {
    (a, shared): _native.Site(
        f"split_rope_pair/{a}{'/shared' if shared else ''}",
        n_inputs=4 if shared else 6,
        unbind=False,
        n_outputs=2,
    )
    for a in ALGORITHMS
    for shared in (False, True)
}
# (variant, launch) -> (separate, shared) native memos, for the calls that take the native path.
_NATIVE = {
    call: (_SITES[algo, False], _SITES[algo, True])
    for call, (algo, path) in CALLS.items()
    if path == "native"
}


def _plain(*tensors) -> bool:
    """Whether a call may try its native replay (:func:`ltx2k.kernels._native.plain3`'s
    checks, for every input): a loop, not a generator, on the host's hot path."""
    for t in tensors:
        if type(t) not in _PLAIN_TYPES:
            return False
    return not tensors[0].is_meta and _native._functorch_level() is None


_PLAIN_TYPES = _native.PLAIN_TYPES


def _validate(q, k, q_cos, q_sin, k_cos, k_sin) -> tuple[int, int, int, int, int]:
    """(B, Sq, Sk, H, D), or a ValueError/TypeError naming the argument."""
    B, Sq, H, D = _checks.rope_operands(q, q_cos, q_sin, ("q", "q_cos", "q_sin"))
    Bk, Sk, Hk, Dk = _checks.rope_operands(k, k_cos, k_sin, ("k", "k_cos", "k_sin"))
    if Bk != B:
        raise ValueError(f"k.shape[0] (B) must equal q.shape[0]={B}, got k {tuple(k.shape)}")
    if (Hk, Dk) != (H, D):
        raise ValueError(
            f"k's heads and head dim (H={Hk}, D={Dk}, from k_cos {tuple(k_cos.shape)}) must "
            f"equal q's (H={H}, D={D}, from q_cos {tuple(q_cos.shape)})"
        )
    _checks.same_device(q=q, k=k, q_cos=q_cos, q_sin=q_sin, k_cos=k_cos, k_sin=k_sin)
    return B, Sq, Sk, H, D


def shares_angles(q_cos, q_sin, k_cos, k_sin) -> bool:
    """Whether q and k take the very same cos and sin tensors (read once then)."""
    return q_cos is k_cos and q_sin is k_sin


def apply_ltx2_split_rotary_emb_pair(
    q: torch.Tensor,
    k: torch.Tensor,
    q_cos: torch.Tensor,
    q_sin: torch.Tensor,
    k_cos: torch.Tensor,
    k_sin: torch.Tensor,
    *,
    variant: str = variants.DEFAULT_VARIANT.get("split_rope_pair", "tiled_pdl"),
    launch: str = "auto",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Split RoPE on q and on k in one launch. Each output is bit-identical to
    :func:`ltx2k.apply_ltx2_split_rotary_emb` of its input.

    Args:
        q: ``[B, Sq, H*D]`` bf16, contiguous; k: ``[B, Sk, H*D]`` bf16, contiguous (the same
            B, H and D; ``Sk`` may differ from ``Sq``).
        q_cos, q_sin: ``[B, H, Sq, D/2]`` bf16; k_cos, k_sin: ``[B, H, Sk, D/2]`` bf16; last-dim
            stride 1, other strides free. Pass the very same tensors for q and k
            (self-attention) and they are read once.
        variant: ``"tiled_pdl"`` (default), ``"tiled"`` or ``"row"`` (sglang's current
            design: one program per token row of q and k).
        launch: ``"auto"`` (default: ``"native"``), ``"native"``, ``"lean"`` or ``"triton"``,
            as :func:`ltx2k.apply_ltx2_split_rotary_emb`'s.

    Returns:
        ``(q_out, k_out)``, new tensors shaped as q and k.
    """
    _checks.record_call("split_rope_pair", q, k, q_cos, q_sin, k_cos, k_sin)
    try:
        sites = _NATIVE.get((variant, launch))
    except TypeError:  # an unhashable variant or launch: bad_call names it below
        sites = None
    if sites is not None and not torch.compiler.is_compiling():
        # The hot path of a decode step: one dict lookup, inline checks, one C call.
        P = _PLAIN_TYPES
        if q_cos is k_cos and q_sin is k_sin:
            if (
                type(q) in P
                and type(k) in P
                and type(q_cos) in P
                and type(q_sin) in P
                and not q.is_meta
                and _native._functorch_level() is None
            ):
                out = sites[1].call(q, k, q_cos, q_sin)
                if out is not None:
                    return out
        elif _plain(q, k, q_cos, q_sin, k_cos, k_sin):
            out = sites[0].call(q, k, q_cos, q_sin, k_cos, k_sin)
            if out is not None:
                return out
    try:  # inline: this is the hot path (a try costs nothing until it raises)
        call = CALLS.get((variant, launch))
    except TypeError:  # an unhashable variant or launch: named below
        call = None
    if call is None:
        raise _launch.bad_call(variant, launch, CALLS)
    algo, path = call
    if torch.compiler.is_compiling() or _routing.routed(q, k, q_cos, q_sin, k_cos, k_sin):
        return _routed(q, k, q_cos, q_sin, k_cos, k_sin, variant, launch)
    return _launch_python(q, k, q_cos, q_sin, k_cos, k_sin, algo, path)


@functools.cache
def _num_sms(device: torch.device) -> int:
    return rope._num_sms(device)


def _call(q, k, q_cos, q_sin, k_cos, k_sin, algo: str, path: str):
    """The registered op's implementation: the launch paths, no routing."""
    if path == "native":
        if shares_angles(q_cos, q_sin, k_cos, k_sin):
            if _plain(q, k, q_cos, q_sin):
                out = _SITES[algo, True].call(q, k, q_cos, q_sin)
                if out is not None:
                    return out
        elif _plain(q, k, q_cos, q_sin, k_cos, k_sin):
            out = _SITES[algo, False].call(q, k, q_cos, q_sin, k_cos, k_sin)
            if out is not None:
                return out
    return _launch_python(q, k, q_cos, q_sin, k_cos, k_sin, algo, path)


def _launch_python(q, k, q_cos, q_sin, k_cos, k_sin, algo: str, path: str):
    """Validate, allocate and launch from Python (recording the launch for the native path)."""
    B, Sq, Sk, H, D = _validate(q, k, q_cos, q_sin, k_cos, k_sin)
    q_out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    k_out = torch.empty(k.shape, dtype=k.dtype, device=k.device)
    if not torch.compiler.is_compiling():
        _checks.real_data(q=q, k=k, q_cos=q_cos, q_sin=q_sin, k_cos=k_cos, k_sin=k_sin)
        _checks.real_data(q_out=q_out, k_out=k_out)
    q_tokens, k_tokens = B * Sq, B * Sk
    if q_tokens + k_tokens == 0:
        return q_out, k_out
    shared = shares_angles(q_cos, q_sin, k_cos, k_sin)
    cfg = ALGORITHMS[algo](H, D, q_tokens, k_tokens, _num_sms(q.device), shared)
    pdl = cfg.pdl and rope._has_pdl(q.device)
    half = D // 2
    grid = (cfg.q_programs + cfg.k_programs, cfg.head_blocks)
    tensors = (q, k, q_cos, q_sin, k_cos, k_sin, q_out, k_out)
    # A side with no tokens is masked off in every program ("row" still runs its
    # index arithmetic): S = 1 there keeps that arithmetic free of a division by zero.
    scalars = (
        max(Sq, 1), max(Sk, 1), H, half, q_tokens, k_tokens, cfg.q_programs,
        *q_cos.stride()[:3], *q_sin.stride()[:3], *k_cos.stride()[:3], *k_sin.stride()[:3],
    )  # fmt: skip
    constexprs = (
        ("BLOCK_HEADS", cfg.block_heads),
        ("BLOCK_HALF", triton.next_power_of_2(half)),
        ("BLOCK_TOKENS", cfg.block_tokens),
        ("MODE", cfg.mode),
        ("PDL", pdl),
    )
    _launch.launch_by(
        path,
        _split_rope_pair_kernel,
        grid,
        tensors,
        scalars,
        constexprs,
        cfg.num_warps,
        pdl,
        site=_SITES[algo, shared] if path == "native" else None,
        inputs=tensors[:4] if shared else tensors[:6],
        out=(q_out, k_out),
    )
    return q_out, k_out


# --- the registered op ------------------------------------------------------------------


@torch.library.custom_op("ltx2k::split_rope_pair", mutates_args=())
def split_rope_pair(
    q: torch.Tensor,
    k: torch.Tensor,
    q_cos: torch.Tensor,
    q_sin: torch.Tensor,
    k_cos: torch.Tensor,
    k_sin: torch.Tensor,
    variant: str,
    launch: str,
) -> tuple[torch.Tensor, torch.Tensor]:
    return _call(q, k, q_cos, q_sin, k_cos, k_sin, *_launch.resolve(CALLS, variant, launch))


@split_rope_pair.register_fake
def _(q, k, q_cos, q_sin, k_cos, k_sin, variant, launch):
    _launch.resolve(CALLS, variant, launch)
    _validate(q, k, q_cos, q_sin, k_cos, k_sin)
    _record.note_traced("split_rope_pair", q, k, q_cos, q_sin, k_cos, k_sin)
    return (
        torch.empty(q.shape, dtype=q.dtype, device=q.device),
        torch.empty(k.shape, dtype=k.dtype, device=k.device),
    )


def _setup(ctx, inputs, output) -> None:
    ctx.save_for_backward(*_routing.saved(*inputs[:6]))


def _grad(ctx, gq, gk):
    # Each output is split RoPE of its own input: split RoPE's backward for each. Where
    # q and k take the same cos/sin tensors, autograd adds their two gradients (two
    # terms: the order cannot change the sum).
    q, k, q_cos, q_sin, k_cos, k_sin = ctx.saved_tensors
    nq, nk, nqc, nqs, nkc, nks = ctx.needs_input_grad[:6]
    gq_x, gq_cos, gq_sin = rope.split_rope_grads(gq, q, q_cos, q_sin, nq, nqc, nqs)
    gk_x, gk_cos, gk_sin = rope.split_rope_grads(gk, k, k_cos, k_sin, nk, nkc, nks)
    return gq_x, gk_x, gq_cos, gq_sin, gk_cos, gk_sin, None, None


def _vmap(info, in_dims, q, k, q_cos, q_sin, k_cos, k_sin, variant, launch):
    # Every token is independent: the vmapped dim folds into B (q and k contiguous again).
    n = info.batch_size
    qd, kd, qcd, qsd, kcd, ksd = in_dims[:6]
    fold = _routing.fold
    qf, kf = fold(q, qd, n).contiguous(), fold(k, kd, n).contiguous()
    cos_sin = (fold(q_cos, qcd, n), fold(q_sin, qsd, n), fold(k_cos, kcd, n), fold(k_sin, ksd, n))
    if shares_angles(q_cos, q_sin, k_cos, k_sin) and (qcd, qsd) == (kcd, ksd):
        cos_sin = (cos_sin[0], cos_sin[1], cos_sin[0], cos_sin[1])
    q_out, k_out = torch.ops.ltx2k.split_rope_pair(qf, kf, *cos_sin, variant, launch)
    unfold = _routing.unfold
    return (unfold(q_out, n, q, qd), unfold(k_out, n, k, kd)), (0, 0)


split_rope_pair.register_autograd(_grad, setup_context=_setup)
split_rope_pair.register_vmap(_vmap)


class SplitRopePair(torch.autograd.Function):
    """``torch.ops.ltx2k.split_rope_pair`` with functorch-ready autograd and a jvp."""

    generate_vmap_rule = True

    @staticmethod
    def forward(q, k, q_cos, q_sin, k_cos, k_sin, variant, launch):
        return torch.ops.ltx2k.split_rope_pair(q, k, q_cos, q_sin, k_cos, k_sin, variant, launch)

    @staticmethod
    def setup_context(ctx, inputs, output):
        tensors = _routing.saved(*inputs[:6])
        ctx.save_for_backward(*tensors)
        ctx.save_for_forward(*tensors)
        ctx.call = inputs[6:]

    @staticmethod
    def backward(ctx, gq, gk):
        return _grad(ctx, gq, gk)

    @staticmethod
    def jvp(ctx, q_t, k_t, q_cos_t, q_sin_t, k_cos_t, k_sin_t, _variant, _launch):
        # Linear in (q, k) and, separately, in the angles: each tangent goes through the
        # same kernel. functorch passes zeros for inputs without a tangent, eager forward
        # AD None.
        saved = ctx.saved_tensors
        x_t = [t if t is None else t.contiguous() for t in (q_t, k_t)]
        a_t = [q_cos_t, q_sin_t, k_cos_t, k_sin_t]
        outs = []
        if any(t is not None for t in x_t):
            x_t = [_or_zeros(x, t) for x, t in zip(saved[:2], x_t, strict=True)]
            outs.append(torch.ops.ltx2k.split_rope_pair(*x_t, *saved[2:], *ctx.call))
        if any(t is not None for t in a_t):
            a_t = [_or_zeros(a, t) for a, t in zip(saved[2:], a_t, strict=True)]
            outs.append(torch.ops.ltx2k.split_rope_pair(*saved[:2], *a_t, *ctx.call))
        if len(outs) == 2:
            return outs[0][0] + outs[1][0], outs[0][1] + outs[1][1]
        return outs[0]


def _or_zeros(primal: torch.Tensor, tangent: torch.Tensor | None) -> torch.Tensor:
    return torch.zeros_like(primal) if tangent is None else tangent


def _routed(q, k, q_cos, q_sin, k_cos, k_sin, variant: str, launch: str):
    """The public function's call when routing (or tracing) sends it to the op. While
    torch.compile/export traces, the op itself (dynamo does not trace an
    autograd.Function with a custom jvp)."""
    if torch.compiler.is_compiling():
        return torch.ops.ltx2k.split_rope_pair(q, k, q_cos, q_sin, k_cos, k_sin, variant, launch)
    return SplitRopePair.apply(q, k, q_cos, q_sin, k_cos, k_sin, variant, launch)
