"""Split rotary position embedding (LTX-2 layout) as one Triton kernel: four algorithms.

Layout: ``x`` is ``[B, S, H*D]``; each head's ``D`` values are two halves
``x1 = x[..., :D/2]`` and ``x2 = x[..., D/2:]``; ``cos``/``sin`` are
``[B, H, S, D/2]``. Output::

    out1 = bf16(x1 * cos) - x2 * sin
    out2 = bf16(x2 * cos) + x1 * sin

with the cos product rounded to bf16 first, the sine product and the sum in
fp32, and one final rounding at the store -- the rounding order of the eager
chain in :func:`ltx2k.workload.reference.split_rotary_reference`.

The device algorithms (``variant=``) are launch parameters of the same kernel,
not copies of it:

- ``"per_head"`` (sglang's original kernel): grid ``(B*S, H)``, one head per program, 1 warp.
- ``"blocked"``: ``BLOCK_HEADS = min(16, next_pow2(H))`` heads per
  program, grid ``(B*S, cdiv(H, BLOCK_HEADS))``, 2-D masks over
  (heads, half-dim), ``num_warps = min(8, max(1, BLOCK_HEADS))``.
- ``"blocked_wide"``: ``BLOCK_HEADS = min(32, next_pow2(H))``,
  ``num_warps = max(1, BLOCK_HEADS // 4)``: twice the bytes per program at
  H=32 and 16-byte accesses at D=128 (see ``_wide``; docs/kernels/split_rope.md).
- ``"tiled"``: a (tokens, heads, half-dim) tile of about
  ``TILE_ELEMENTS`` per half-operand: a whole token's heads (up to 32) and, where one
  token is less than a tile (head dim 64), ``BLOCK_TOKENS`` tokens, a power of two
  dividing ``B*S``; ``ELEMENTS_PER_THREAD`` per thread sets ``num_warps``. Where that grid
  would have fewer than ``MIN_PROGRAMS_PER_SM`` programs per SM (decode shapes) it takes
  ``"blocked"``'s configuration (see ``_tiled``; docs/kernels/split_rope.md).
- ``"tiled_pdl"`` (the default): ``"tiled"``'s tiles, launched with programmatic dependent
  launch on GPUs that have it (compute capability 9.0 and up): each program first lets the
  next kernel in the stream launch, then waits for the kernel before it to finish, so
  back-to-back launches overlap their launch and ramp (see ``_tiled_pdl``). Elsewhere
  (an A100, the CPU interpreter) it is ``"tiled"``'s launch.

The host launch path (``launch=``) is a second parameter; every path launches
the same compiled kernel with the same grid, so only host latency differs:

- ``"triton"``: ``kernel[grid]``;
- ``"lean"``: the compiled kernel's launcher, skipping Triton's dispatcher
  (:mod:`ltx2k.kernels._launch`);
- ``"native"``: after the first call with a given input layout, the whole call
  (checks, allocation, launch) is one C function (:mod:`ltx2k.kernels._native`);
- ``"auto"`` (default): ``"native"``.

``"blocked_lean"`` and ``"blocked_native"``, the names of two (algorithm, launch
path) pairs from before the launch path was its own parameter, are still accepted.

Supported: ``1 <= H <= 1024``, even head dim ``2 <= D <= 512``; any B, S with
``B*S < 2**30`` tokens (the kernels number tokens in 32 bits).

The module registers two ``torch.library`` ops (:mod:`ltx2k.kernels.ops` lists them):
``torch.ops.ltx2k.split_rope(x, cos, sin, variant, launch)`` and its gradient w.r.t.
``x``, ``torch.ops.ltx2k.split_rope_backward(grad, cos, sin)`` (the kernel in
:mod:`ltx2k.kernels.rope_backward`), each with a fake implementation, an autograd formula
and a vmap rule. The public function sends a call to them when
:func:`ltx2k.kernels._routing.routed` says so and while ``torch.compile`` or
``torch.export`` traces; plain inference tensors keep the native fast path.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait

from ltx2k.kernels import _checks, _launch, _native, _routing, rope_backward
from ltx2k.workload import record as _record
from ltx2k.workload import variants

# The sizes every split RoPE kernel supports (checked by _checks.rope_operands).
MAX_HEADS = _checks.MAX_ROPE_HEADS
MAX_HEAD_DIM = _checks.MAX_ROPE_HEAD_DIM


@triton.jit
def _rotate(x_at, cos_at, sin_at, out_at, HALF, mask):
    # One tile of any shape: x_at/out_at point at first-half elements, cos_at/sin_at at
    # their angles; the second half of each head is HALF elements further on.
    x1 = tl.load(x_at, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(x_at + HALF, mask=mask, other=0.0).to(tl.float32)
    c = tl.load(cos_at, mask=mask, other=0.0).to(tl.float32)
    sn = tl.load(sin_at, mask=mask, other=0.0).to(tl.float32)

    # The cos product is rounded to bf16 *before* the sine term is added, as the
    # eager bf16 `split_x * cos` does; an FMA over the unrounded product would
    # change output bits. The sine product of two bf16 values is exact in fp32,
    # so whether the compiler contracts `- x2 * sn` into an FMA cannot matter.
    c1 = (x1 * c).to(tl.bfloat16).to(tl.float32)
    c2 = (x2 * c).to(tl.bfloat16).to(tl.float32)
    out1 = c1 - x2 * sn
    out2 = c2 + x1 * sn
    tl.store(out_at, out1.to(tl.bfloat16), mask=mask)
    tl.store(out_at + HALF, out2.to(tl.bfloat16), mask=mask)


@triton.jit
def _split_rope_kernel(
    # pointers
    x_ptr,
    cos_ptr,
    sin_ptr,
    out_ptr,
    # sizes
    S,
    H,
    HALF,
    # strides (x and out are contiguous [B*S, H*D]; cos/sin are read through their own strides)
    stride_x_tok,
    stride_cos_b,
    stride_cos_h,
    stride_cos_s,
    stride_sin_b,
    stride_sin_h,
    stride_sin_s,
    # meta-parameters: constexpr so the block is a compile-time shape, which lets
    # Triton vectorise the half-dim loads (BLOCK_HALF contiguous bf16 per head)
    BLOCK_HEADS: tl.constexpr,
    BLOCK_HALF: tl.constexpr,
    # tokens per program; the launcher picks a power of two that divides B*S, so no
    # program holds a partial token block and no token mask is needed
    BLOCK_TOKENS: tl.constexpr,
    # programmatic dependent launch (launched with launch_pdl=True, compute capability >= 9)
    PDL: tl.constexpr = False,
):
    if PDL:
        # Let the next kernel in the stream launch once every program of this one has
        # started, then wait until the kernel before this one has finished and its writes
        # are visible. Every load and store of this kernel comes after the wait, so it is
        # right after any kernel. A kernel launched after it with PDL starts early only if
        # it was launched so, and must then wait (griddepcontrol.wait) before it reads
        # what this one writes, as CUDA asks of every PDL launch; others start after it.
        gdc_launch_dependents()
        gdc_wait()
    head_block = tl.program_id(1)
    heads = head_block * BLOCK_HEADS + tl.arange(0, BLOCK_HEADS)
    cols = tl.arange(0, BLOCK_HALF)
    if BLOCK_TOKENS == 1:
        tok = tl.program_id(0)  # flattened (b, s)
        # int64 row bases: B*S*H*D exceeds 2**31 for long videos
        b = (tok // S).to(tl.int64)
        s = (tok % S).to(tl.int64)
        mask = (heads[:, None] < H) & (cols[None, :] < HALF)
        first = heads[:, None] * (2 * HALF) + cols[None, :]
        x_row = tok.to(tl.int64) * stride_x_tok
        cos_at = cos_ptr + b * stride_cos_b + s * stride_cos_s
        sin_at = sin_ptr + b * stride_sin_b + s * stride_sin_s
        _rotate(
            x_ptr + x_row + first,
            cos_at + heads[:, None] * stride_cos_h + cols[None, :],
            sin_at + heads[:, None] * stride_sin_h + cols[None, :],
            out_ptr + x_row + first,
            HALF,
            mask,
        )
    else:
        # A (tokens, heads, half-dim) tile: at small head dims one token's heads are
        # too few bytes per program to keep HBM busy (docs/kernels/split_rope.md).
        toks = (tl.program_id(0) * BLOCK_TOKENS + tl.arange(0, BLOCK_TOKENS)).to(tl.int64)
        b = toks // S
        s = toks % S
        mask = (heads[None, :, None] < H) & (cols[None, None, :] < HALF)  # broadcast by tl.load
        first = toks[:, None, None] * stride_x_tok + heads[None, :, None] * (2 * HALF)
        first += cols[None, None, :]
        cos_at = (b * stride_cos_b + s * stride_cos_s)[:, None, None]
        sin_at = (b * stride_sin_b + s * stride_sin_s)[:, None, None]
        _rotate(
            x_ptr + first,
            cos_ptr + cos_at + heads[None, :, None] * stride_cos_h + cols[None, None, :],
            sin_ptr + sin_at + heads[None, :, None] * stride_sin_h + cols[None, None, :],
            out_ptr + first,
            HALF,
            mask,
        )


class LaunchConfig(NamedTuple):
    block_heads: int
    head_blocks: int  # grid dim 1
    num_warps: int
    block_tokens: int = 1  # tokens per program (grid dim 0 is B*S / block_tokens)
    pdl: bool = False  # programmatic dependent launch, where the device has it


# A configuration is a function of the problem: (num_heads, head_dim, tokens = B*S,
# num_sms of the device). The first three algorithms read only the head count.
ConfigFn = Callable[..., LaunchConfig]


def _per_head(num_heads: int, *_problem: int) -> LaunchConfig:
    return LaunchConfig(block_heads=1, head_blocks=num_heads, num_warps=1)


def _blocked(num_heads: int, *_problem: int) -> LaunchConfig:
    # 16 heads x D/2=64 bf16 = 2 KiB per operand per program: enough bytes in
    # flight per program to cover HBM latency at production sizes, while a
    # token's 32 heads still split over 2 programs for parallelism at small S.
    bh = min(16, triton.next_power_of_2(num_heads))
    return LaunchConfig(
        block_heads=bh, head_blocks=triton.cdiv(num_heads, bh), num_warps=min(8, max(1, bh))
    )


def _wide(num_heads: int, *_problem: int) -> LaunchConfig:
    # More bytes in flight per program for cold L2: 32 heads x D/2=64 bf16 =
    # 4 KiB per operand (16 KiB of loads) per program, one whole token at the
    # production H=32. B1_S1024_H32 then runs 1024 programs, one wave at 8 per
    # SM on 132 SMs (32 registers x 256 threads, ptxas for sm_90), where
    # "blocked" runs 2048 (two waves). BLOCK_HEADS/4 warps give each thread 8
    # contiguous bf16 of a D=128 head: 16-byte ld/st.global.v4 where "blocked"
    # emits v2 (8 bytes) -- half the memory instructions for the same bytes.
    bh = min(32, triton.next_power_of_2(num_heads))
    return LaunchConfig(
        block_heads=bh, head_blocks=triton.cdiv(num_heads, bh), num_warps=max(1, bh // 4)
    )


# "tiled": elements of one half-operand per program. 2048 bf16 is 4 KiB of x1, so
# 16 KiB of loads with x2, cos and sin: the tile that streamed best at both head dims
# in the H200 sweep (docs/kernels/split_rope.md, "tiled").
TILE_ELEMENTS = 2048
# Each thread holds 4 elements of each operand: at D=128 more warps with 8-byte
# accesses kept more bytes in flight than fewer warps with 16-byte ones.
ELEMENTS_PER_THREAD = 4
MAX_WARPS = 16
MAX_BLOCK_TOKENS = 16
# A grid with fewer whole tiles than this many per SM leaves SMs idle at the ramp
# and the tail; "tiled" then takes "blocked"'s smaller programs (decode shapes).
MIN_PROGRAMS_PER_SM = 8


def _tiled(num_heads: int, head_dim: int, tokens: int, num_sms: int) -> LaunchConfig:
    # A program covers a whole token's heads (up to 32), and several tokens where one
    # token is less than a tile (head dim 64: 32 heads x 32 = 1024 elements per half).
    # Tokens per program is a power of two dividing B*S, so no token mask is needed.
    half = triton.next_power_of_2(max(1, head_dim // 2))
    bh = min(32, triton.next_power_of_2(num_heads), max(1, TILE_ELEMENTS // half))
    head_blocks = triton.cdiv(num_heads, bh)
    min_programs = MIN_PROGRAMS_PER_SM * num_sms
    if tokens * head_blocks < min_programs:
        return _blocked(num_heads)
    bt = 1
    while (
        2 * bt <= MAX_BLOCK_TOKENS
        and 2 * bt * bh * half <= TILE_ELEMENTS
        and tokens % (2 * bt) == 0
        and tokens // (2 * bt) * head_blocks >= min_programs
    ):
        bt *= 2
    warps = min(MAX_WARPS, max(1, bt * bh * half // (32 * ELEMENTS_PER_THREAD)))
    return LaunchConfig(bh, head_blocks, triton.next_power_of_2(warps), bt)


def _tiled_pdl(num_heads: int, head_dim: int, tokens: int, num_sms: int) -> LaunchConfig:
    # The gap between two kernels in a stream (the last stores draining, the next grid's
    # launch and its first loads) is ~2 us at every size: 10-20% of a 10-20 us launch.
    # With the early trigger the next launch's programs are resident when this one ends,
    # which beat a same-bytes clone by 3-5% there (H200, docs/kernels/split_rope.md).
    return _tiled(num_heads, head_dim, tokens, num_sms)._replace(pdl=True)


# The device algorithms (variant=): how many tokens and heads a program handles, with how
# many warps. Append only: a name is the key of its benchmark history.
ALGORITHMS: dict[str, ConfigFn] = {
    "per_head": _per_head,
    "blocked": _blocked,
    "blocked_wide": _wide,
    "tiled": _tiled,
    "tiled_pdl": _tiled_pdl,
}
# Names that once named an (algorithm, launch path) pair; still accepted as variant=.
LEGACY_VARIANTS = {"blocked_lean": ("blocked", "lean"), "blocked_native": ("blocked", "native")}
# Every accepted (variant, launch) -> (algorithm, launch path); every algorithm
# launches through any path (they share one kernel and its argument list).
CALLS = _launch.call_table(ALGORITHMS, ALGORITHMS, LEGACY_VARIANTS)
ACCEPTED_VARIANTS = tuple(ALGORITHMS) + tuple(LEGACY_VARIANTS)
# One native memo per algorithm (a memo is keyed by the inputs' layout only).
_SITES = {a: _native.Site(f"split_rope/{a}", n_inputs=3, unbind=False) for a in ALGORITHMS}


@functools.cache
def _has_pdl(device: torch.device) -> bool:
    # griddepcontrol is sm_90+ PTX; the interpreter runs no PTX (whatever the device).
    if device.type != "cuda" or _checks.INTERPRET:
        return False
    return torch.cuda.get_device_capability(device) >= (9, 0)


@functools.cache
def _num_sms(device: torch.device) -> int:
    # The interpreter runs programs one after another: one "SM", so small CPU tests
    # still reach every configuration.
    if device.type != "cuda":
        return 1
    return torch.cuda.get_device_properties(device).multi_processor_count


def _validate(
    x: object, cos: object, sin: object, names: tuple[str, str, str] = ("x", "cos", "sin")
) -> tuple[int, int, int, int]:
    """(B, S, H, D), or a ValueError/TypeError naming the argument (*names*: the caller's)."""
    B, S, H, D = _checks.rope_operands(x, cos, sin, names)
    _checks.same_device(**dict(zip(names, (x, cos, sin), strict=True)))
    return B, S, H, D


def _call(x, cos, sin, algo: str, path: str) -> torch.Tensor:
    """The registered op's implementation: the public function's launch paths, no routing."""
    if path == "native" and _native.plain3(x, cos, sin):
        out = _SITES[algo].call(x, cos, sin)
        if out is not None:
            return out
    return _launch_python(x, cos, sin, algo, path)


def _launch_python(x, cos, sin, algo: str, path: str) -> torch.Tensor:
    """Validate, allocate and launch from Python (recording the launch for the native path)."""
    B, S, H, D = _validate(x, cos, sin)
    # Not empty_like: x may be "contiguous" with an arbitrary stride on a
    # size-1 dim (PyTorch ignores those strides), and out must be dense rows.
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if not torch.compiler.is_compiling():
        _checks.real_data(x=x, cos=cos, sin=sin, out=out)
    if B * S == 0:
        return out
    cfg = ALGORITHMS[algo](H, D, B * S, _num_sms(x.device))
    pdl = cfg.pdl and _has_pdl(x.device)
    half = D // 2
    grid = (B * S // cfg.block_tokens, cfg.head_blocks)
    # H * D: the token stride of a contiguous [B, S, H*D]; x.stride(1) is arbitrary when S == 1
    scalars = (S, H, half, H * D, *cos.stride()[:3], *sin.stride()[:3])
    constexprs = (
        ("BLOCK_HEADS", cfg.block_heads),
        ("BLOCK_HALF", triton.next_power_of_2(half)),
        ("BLOCK_TOKENS", cfg.block_tokens),
        ("PDL", pdl),
    )
    _launch.launch_by(
        path,
        _split_rope_kernel,
        grid,
        (x, cos, sin, out),
        scalars,
        constexprs,
        cfg.num_warps,
        pdl,
        site=_SITES[algo] if path == "native" else None,
        inputs=(x, cos, sin),
        out=out,
    )
    return out


# --- the registered ops: torch.ops.ltx2k.split_rope and its gradient -------------------
# For every caller that is not plain inference (ltx2k.kernels.ops lists every op).


@torch.library.custom_op("ltx2k::split_rope", mutates_args=())
def split_rope(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, variant: str, launch: str
) -> torch.Tensor:
    return _call(x, cos, sin, *_launch.resolve(CALLS, variant, launch))


@split_rope.register_fake
def _(x, cos, sin, variant, launch):
    _launch.resolve(CALLS, variant, launch)
    _validate(x, cos, sin)
    _record.note_traced("split_rope", x, cos, sin)
    return torch.empty(x.shape, dtype=x.dtype, device=x.device)


_BACKWARD_NAMES = ("grad", "cos", "sin")


@torch.library.custom_op("ltx2k::split_rope_backward", mutates_args=())
def split_rope_backward(grad: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    _, _, H, _ = _validate(grad, cos, sin, _BACKWARD_NAMES)
    # The forward's "blocked" work split: the backward reads and writes the same bytes.
    cfg = _blocked(H)
    return rope_backward.split_rope_backward(
        grad, cos, sin, block_heads=cfg.block_heads, num_warps=cfg.num_warps
    )


@split_rope_backward.register_fake
def _(grad, cos, sin):
    _validate(grad, cos, sin, _BACKWARD_NAMES)
    return torch.empty(grad.shape, dtype=grad.dtype, device=grad.device)


def _halves(t: torch.Tensor, H: int, half: int) -> torch.Tensor:
    """``[B, S, H*D]`` -> ``[B, H, S, 2, D/2]``, the reference's view of x."""
    B, S, _ = t.shape
    return t.reshape(B, S, H, 2, half).permute(0, 2, 1, 3, 4)


def _rope_setup(ctx, inputs, output) -> None:
    x, cos, sin, _, _ = inputs
    ctx.save_for_backward(*_routing.saved(x, cos, sin))


def _rope_grad(ctx, grad):
    x, cos, sin = ctx.saved_tensors
    return (*split_rope_grads(grad, x, cos, sin, *ctx.needs_input_grad[:3]), None, None)


def split_rope_grads(grad, x, cos, sin, need_x: bool, need_cos: bool, need_sin: bool):
    """``(gx, gcos, gsin)`` of ``split_rope(x, cos, sin)`` for the output gradient *grad*
    (None where not needed): the backward kernel for x, eager ops for cos and sin. The
    kernels whose output is split RoPE of something (the pair, the fused prologue) take
    their gradients from here."""
    grad = grad.contiguous()
    gx = torch.ops.ltx2k.split_rope_backward(grad, cos, sin) if need_x else None
    gcos, gsin = _cos_sin_grads(grad, x, cos, need_cos, need_sin)
    return gx, gcos, gsin


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


@split_rope.register_vmap
def _(info, in_dims, x, cos, sin, variant, launch):
    # Every token is independent, so the vmapped dim folds into B; x must be contiguous
    # for the kernel (reshape copies when the fold is not a view).
    n = info.batch_size
    xd, cd, sd = in_dims[:3]
    xf = _routing.fold(x, xd, n).contiguous()
    out = torch.ops.ltx2k.split_rope(
        xf, _routing.fold(cos, cd, n), _routing.fold(sin, sd, n), variant, launch
    )
    return _routing.unfold(out, n, x, xd), 0


@split_rope_backward.register_vmap
def _(info, in_dims, grad, cos, sin):
    n = info.batch_size
    gd, cd, sd = in_dims
    gf = _routing.fold(grad, gd, n).contiguous()
    out = torch.ops.ltx2k.split_rope_backward(
        gf, _routing.fold(cos, cd, n), _routing.fold(sin, sd, n)
    )
    return _routing.unfold(out, n, grad, gd), 0


# --- the public function's entry to the op ---------------------------------------------
# A custom op's own autograd formula serves ``.backward()`` but not ``torch.func``
# transforms (its generated Function has no ``setup_context``) nor forward-mode AD (it
# takes no jvp formula). SplitRope adds both, with the same backward, and a jvp: split
# RoPE is linear in ``x`` and in ``(cos, sin)``, so each tangent goes through the
# forward kernel.


class SplitRope(torch.autograd.Function):
    """``torch.ops.ltx2k.split_rope`` with functorch-ready autograd and a jvp."""

    generate_vmap_rule = True  # vmap runs forward under vmap: the op's own vmap rule

    @staticmethod
    def forward(x, cos, sin, variant, launch):
        return torch.ops.ltx2k.split_rope(x, cos, sin, variant, launch)

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, cos, sin, variant, launch = inputs
        x, cos, sin = _routing.saved(x, cos, sin)
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


def split_rope_routed(x, cos, sin, variant: str, launch: str) -> torch.Tensor:
    """The public function's call when :func:`ltx2k.kernels._routing.routed` (or tracing)
    sends it here. While torch.compile/export traces, the op itself: dynamo does not trace
    an autograd.Function with a custom jvp, and AOTAutograd takes the op's registered
    autograd instead."""
    if torch.compiler.is_compiling():
        return torch.ops.ltx2k.split_rope(x, cos, sin, variant, launch)
    return SplitRope.apply(x, cos, sin, variant, launch)


# --- the public function ---------------------------------------------------------------


def apply_ltx2_split_rotary_emb(
    x: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    *,
    variant: str = variants.DEFAULT_VARIANT["split_rope"],
    launch: str = "auto",
) -> torch.Tensor:
    """Apply LTX-2 split rotary embedding. Bit-identical to the eager BF16 reference on a GPU.

    Args:
        x: ``[B, S, H*D]`` bf16, contiguous.
        cos, sin: ``[B, H, S, D/2]`` bf16, last-dim stride 1; other strides free
            (e.g. a transposed ``[B, S, H, D/2]`` view).
        variant: the device algorithm: ``"tiled_pdl"`` (default: ``"tiled"`` with
            programmatic dependent launch where the GPU has it), ``"tiled"`` (a tile of
            tokens x heads sized to the problem, ``"blocked"``'s configuration at decode
            sizes),
            ``"blocked"`` (up to 16 heads per program, adaptive ``num_warps``),
            ``"per_head"`` (sglang's original: one head per program) or
            ``"blocked_wide"`` (up to 32 heads per program).
            ``"blocked_lean"`` and ``"blocked_native"`` are older names of
            ``"blocked"`` with ``launch="lean"`` / ``"native"``.
        launch: the host path: ``"auto"`` (default: ``"native"``), ``"native"`` (after
            the first call with a given input layout the whole call is one C
            function, ``ltx2k.kernels._native``; without a C++ compiler it warns once
            and takes the lean path), ``"lean"`` (the compiled kernel's launcher,
            skipping Triton's dispatcher, ``ltx2k.kernels._launch``) or ``"triton"``
            (``kernel[grid]``). Every path launches the same compiled kernel.

    Returns:
        A new ``[B, S, H*D]`` bf16 tensor.
    """
    _checks.record_call("split_rope", x, cos, sin)
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
        and _native.plain3(x, cos, sin)  # functorch, fake, meta, subclasses (C++: autograd)
    ):
        # None: not seen with this layout yet, or not eligible (the Python path decides)
        out = _SITES[algo].call(x, cos, sin)
        if out is not None:
            return out
    if torch.compiler.is_compiling() or _routing.routed(x, cos, sin):
        return split_rope_routed(x, cos, sin, variant, launch)
    return _launch_python(x, cos, sin, algo, path)
