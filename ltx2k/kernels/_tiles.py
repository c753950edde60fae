"""Triton building blocks shared by the attention-prologue kernels: a (tokens, heads,
half-dim) tile of one split-RoPE operand, its angles, its rotation, and the sum of
squares of RMSNorm in the order :func:`ltx2k.workload.reference.sum_of_squares_reference`
states. Each is ``@triton.jit``, inlined into its caller: no launch of its own.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def tile_offsets(tok0, n_tokens, S, H, HALF, BLOCK_TOKENS, BLOCK_HEADS, BLOCK_HALF, head0):
    """A tile's first-half elements in a contiguous ``[B*S, H*D]`` operand as two offsets,
    ``row`` (int64, ``[BLOCK_TOKENS, 1, 1]``: each token's first element) and ``inner``
    (int32, ``[1, BLOCK_HEADS, BLOCK_HALF]``: inside the token), to be added to a pointer in
    that order; the tile's (token, head, column) mask; its tokens' batch and sequence
    indices.

    Two offsets, not one int64 offset per element: only the per-token part needs 64 bits
    (B*S*H*D exceeds 2**31 for long videos), and a full int64 tile of offsets cost the
    fused prologue registers (one program per SM fewer) and instructions (docs/kernels/
    attention_prologue.md, "Offsets and occupancy")."""
    toks = (tok0 + tl.arange(0, BLOCK_TOKENS)).to(tl.int64)
    heads = head0 + tl.arange(0, BLOCK_HEADS)
    cols = tl.arange(0, BLOCK_HALF)
    row = (toks * (H * 2 * HALF))[:, None, None]
    inner = (heads * (2 * HALF))[None, :, None] + cols[None, None, :]
    mask = (toks[:, None, None] < n_tokens) & (heads[None, :, None] < H)
    mask &= cols[None, None, :] < HALF
    return row, inner, mask, toks // S, toks % S, heads, cols


@triton.jit
def load_angles(cos_ptr, sin_ptr, b, s, heads, cols, scb, sch, scs, ssb, ssh, sss, mask):
    """cos and sin of a tile, in fp32, read through their own strides (the token's part of
    the offset in 64 bits, the part inside the token as the tile's ``inner``)."""
    c_row = (b * scb + s * scs)[:, None, None]
    s_row = (b * ssb + s * sss)[:, None, None]
    c_in = (heads * sch)[None, :, None] + cols[None, None, :]
    s_in = (heads * ssh)[None, :, None] + cols[None, None, :]
    c = tl.load(cos_ptr + c_row + c_in, mask=mask, other=0.0).to(tl.float32)
    sn = tl.load(sin_ptr + s_row + s_in, mask=mask, other=0.0).to(tl.float32)
    return c, sn


@triton.jit
def rotate_store(out_ptr, inner, x1, x2, c, sn, HALF, mask):
    """Store the split rotation of halves x1, x2 (bf16 values held in fp32) at
    ``out_ptr + inner`` (``out_ptr``: the tile's rows, as :func:`tile_offsets` gives).

    The cos product is rounded to bf16 before the sine term is added, as the eager bf16
    ``split_x * cos`` does; the sine product of two bf16 values is exact in fp32, so
    whether the compiler contracts it into an FMA cannot change a bit."""
    c1 = (x1 * c).to(tl.bfloat16).to(tl.float32)
    c2 = (x2 * c).to(tl.bfloat16).to(tl.float32)
    tl.store(out_ptr + inner, (c1 - x2 * sn).to(tl.bfloat16), mask=mask)
    tl.store(out_ptr + inner + HALF, (c2 + x1 * sn).to(tl.bfloat16), mask=mask)


@triton.jit
def pairwise_sum(v, BLOCK_TOKENS: tl.constexpr, N: tl.constexpr, LOG2N: tl.constexpr):
    """Each token's sum over a ``[BLOCK_TOKENS, heads, half]`` tile (N = heads x half, a
    power of two), as a tree over adjacent elements of the head-major flattening:
    ``v = v[0::2] + v[1::2]`` LOG2N times. A fixed order, so the rounding is the
    reference's; one ``tl.sum`` over all of it leaves its order to the compiler. Each level
    sums an axis of two (one addition, whichever operand comes first), which Triton lowers
    to in-thread adds and warp shuffles; pairing through ``tl.split`` moved every level
    through shared memory."""
    v = tl.reshape(v, [BLOCK_TOKENS, N])
    for i in tl.static_range(LOG2N):
        v = tl.sum(tl.reshape(v, [BLOCK_TOKENS, N >> (i + 1), 2]), axis=2)
    return tl.reshape(v, [BLOCK_TOKENS])


@triton.jit
def rms_normalize(x1, x2, w1, w2, hidden, EPS, BLOCK_TOKENS, N, LOG2N):
    """RMSNorm of a tile of whole tokens (every head of each), as
    :func:`ltx2k.workload.reference.rms_norm_reference`: fp32 throughout, each division
    and the square root correctly rounded, one rounding to bf16 at the end. Returns the
    bf16 values held in fp32."""
    ss = pairwise_sum(x1 * x1 + x2 * x2, BLOCK_TOKENS, N, LOG2N)
    var = tl.div_rn(ss, hidden.to(tl.float32))
    rstd = tl.div_rn(tl.full(var.shape, 1.0, tl.float32), tl.sqrt_rn(var + EPS))
    rstd = rstd[:, None, None]
    y1 = ((x1 * rstd) * w1).to(tl.bfloat16).to(tl.float32)
    y2 = ((x2 * rstd) * w2).to(tl.bfloat16).to(tl.float32)
    return y1, y2
