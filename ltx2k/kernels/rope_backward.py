"""Split RoPE's gradient with respect to ``x``: the transposed rotation, as one Triton kernel.

Given the output gradient ``g = (g1, g2)`` (halves of each head, as ``x``), ::

    gx1 = bf16(bf16(g1 * cos) + bf16(g2 * sin))
    gx2 = bf16(bf16(g2 * cos) - bf16(g1 * sin))

with every product rounded to bf16 before the sum: the rounding order of eager
autograd through :func:`ltx2k.workload.reference.split_rotary_reference`. There the
``addcmul_`` backward multiplies in bf16 (``grad * tensor1`` rounds) and the
engine adds the three bf16 gradient contributions of ``split_x``. The forward
kernel with the sine negated would keep the sine product exact in fp32 and so
differ from eager autograd in the last bit; that is why this is a kernel of its
own (docs/kernels/transforms.md).

Shapes and layouts are the forward's (``ltx2k.kernels.rope``); ``g`` must be a
contiguous ``[B, S, H*D]`` bf16 tensor (the op's backward makes it one). The module is
the kernel and its launcher; the op ``torch.ops.ltx2k.split_rope_backward`` is registered
with the forward's in :mod:`ltx2k.kernels.rope`, which validates and picks the work split.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ltx2k.kernels import _launch


@triton.jit
def _round_bf16(v):
    """fp32 -> the nearest bf16 (ties to even), kept as fp32, by integer operations.

    Not ``v.to(tl.bfloat16).to(tl.float32)``: LLVM turns that cast pair after a
    multiply, followed by an add, into bf16 arithmetic and then one bf16 ``fma``
    (sm_90 PTX: ``mul.bf16`` + ``fma.rn.bf16``), which never rounds the second
    product, one bit off eager autograd. The compiler cannot see through integer
    operations on the bits.
    """
    bits = v.to(tl.uint32, bitcast=True)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
    rounded = tl.where(v != v, bits, rounded)  # a NaN stays a NaN
    return rounded.to(tl.float32, bitcast=True)


@triton.jit
def _split_rope_backward_kernel(
    # pointers
    g_ptr,
    cos_ptr,
    sin_ptr,
    out_ptr,
    # sizes
    S,
    H,
    HALF,
    # strides (g and out are contiguous [B*S, H*D]; cos/sin through their own strides)
    stride_tok,
    stride_cos_b,
    stride_cos_h,
    stride_cos_s,
    stride_sin_b,
    stride_sin_h,
    stride_sin_s,
    # meta-parameters: compile-time block shape, as in the forward kernel
    BLOCK_HEADS: tl.constexpr,
    BLOCK_HALF: tl.constexpr,
):
    tok = tl.program_id(0)
    head_block = tl.program_id(1)
    b = (tok // S).to(tl.int64)
    s = (tok % S).to(tl.int64)
    heads = head_block * BLOCK_HEADS + tl.arange(0, BLOCK_HEADS)
    cols = tl.arange(0, BLOCK_HALF)
    mask = (heads[:, None] < H) & (cols[None, :] < HALF)
    g_row = g_ptr + tok.to(tl.int64) * stride_tok
    out_row = out_ptr + tok.to(tl.int64) * stride_tok
    first = heads[:, None] * (2 * HALF) + cols[None, :]
    cs_cos = cos_ptr + b * stride_cos_b + s * stride_cos_s
    cs_sin = sin_ptr + b * stride_sin_b + s * stride_sin_s

    g1 = tl.load(g_row + first, mask=mask, other=0.0).to(tl.float32)
    g2 = tl.load(g_row + first + HALF, mask=mask, other=0.0).to(tl.float32)
    c = tl.load(cs_cos + heads[:, None] * stride_cos_h + cols[None, :], mask=mask, other=0.0)
    sn = tl.load(cs_sin + heads[:, None] * stride_sin_h + cols[None, :], mask=mask, other=0.0)
    c = c.to(tl.float32)
    sn = sn.to(tl.float32)
    # Each product rounds to bf16 on its own (eager's bf16 multiplies), then one fp32
    # add of two bf16 values and one rounding (eager's bf16 accumulation).
    c1 = _round_bf16(g1 * c)
    c2 = _round_bf16(g2 * c)
    s1 = _round_bf16(g2 * sn)
    s2 = _round_bf16(g1 * sn)
    # Rounded here too, so the store's conversion is exact (also in the interpreter,
    # whose fp32->bf16 conversion truncates).
    tl.store(out_row + first, _round_bf16(c1 + s1).to(tl.bfloat16), mask=mask)
    tl.store(out_row + first + HALF, _round_bf16(c2 - s2).to(tl.bfloat16), mask=mask)


def split_rope_backward(
    g: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, *, block_heads: int, num_warps: int
) -> torch.Tensor:
    """``d(split RoPE)/dx`` applied to ``g``; ``g`` contiguous ``[B, S, H*D]`` bf16,
    ``cos``/``sin`` as validated for the forward. Returns a new tensor like ``g``.

    ``block_heads`` heads per program with ``num_warps`` warps: the caller's work split
    (the registered op, ``torch.ops.ltx2k.split_rope_backward``, takes the forward's), so
    that this module needs nothing from the forward's."""
    B, S, HD = g.shape
    H, half = cos.shape[1], cos.shape[3]
    out = torch.empty(g.shape, dtype=g.dtype, device=g.device)
    if B * S == 0:
        return out
    _launch.launch_by(  # lean: the compiled kernel's launcher, on g's device
        "lean",
        _split_rope_backward_kernel,
        (B * S, triton.cdiv(H, block_heads)),
        (g, cos, sin, out),
        (S, H, half, HD, *cos.stride()[:3], *sin.stride()[:3]),
        (("BLOCK_HEADS", block_heads), ("BLOCK_HALF", triton.next_power_of_2(half))),
        num_warps,
    )
    return out
