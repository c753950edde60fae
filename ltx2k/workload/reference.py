"""Eager PyTorch references. The Triton kernels must match these bit for bit.

They are also the ``"eager"`` benchmark variant, and ``torch.compile`` of them
is the ``"compiled"`` variant. Tests, benchmarks and the library all import
them from here; nobody re-types them.
"""

from __future__ import annotations

import torch


def split_rotary_reference(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """LTX-2's split rotary embedding, exactly as the model's eager code computes it.

    x: [B, S, H*D] bf16; cos, sin: [B, H, S, D/2] bf16. Returns [B, S, H*D] bf16.

    The rounding order is the contract: ``split_x * cos`` is a bf16 multiply
    (rounded to bf16), then ``addcmul_`` adds ``±sin * other_half`` in fp32
    and rounds once more on the store.
    """
    b, s, _ = x.shape
    _, h, _, half = cos.shape
    xh = x.reshape(b, s, h, 2 * half).swapaxes(1, 2)  # [B, H, S, D]
    split_x = xh.reshape(b, h, s, 2, half)
    first_x = split_x[..., :1, :]
    second_x = split_x[..., 1:, :]
    cos_u = cos.unsqueeze(-2)
    sin_u = sin.unsqueeze(-2)
    out = split_x * cos_u  # bf16 multiply: the first rounding
    first_out = out[..., :1, :]
    second_out = out[..., 1:, :]
    first_out.addcmul_(-sin_u, second_x)  # fp32 multiply-add, rounded once
    second_out.addcmul_(sin_u, first_x)
    out = out.reshape(b, h, s, 2 * half)
    return out.swapaxes(1, 2).reshape(b, s, h * 2 * half)


def ada_values9_reference(scale_shift_table: torch.Tensor, timestep: torch.Tensor):
    """The nine AdaLN values: ``bf16(table[i]) + timestep[..., i*D:(i+1)*D]`` in bf16.

    scale_shift_table: [9, D] bf16 or fp32; timestep: [B, S, 9*D] bf16.
    Returns a tuple of 9 [B, S, D] bf16 tensors (views of one result).
    """
    b, s, _ = timestep.shape
    d = scale_shift_table.shape[-1]
    table = scale_shift_table.to(torch.bfloat16).view(1, 1, 9, d)
    return table.add(timestep.view(b, s, 9, d)).unbind(2)


# --- the attention prologue: q/k RMSNorm, then split RoPE on both ----------------------


def split_rope_pair_reference(q, k, q_cos, q_sin, k_cos, k_sin):
    """Split RoPE on q and on k: two :func:`split_rotary_reference` calls.

    q: [B, Sq, H*D], k: [B, Sk, H*D] bf16 (Sq and Sk may differ: cross-attention);
    q_cos/q_sin: [B, H, Sq, D/2], k_cos/k_sin: [B, H, Sk, D/2]. Returns (q_out, k_out).
    """
    return split_rotary_reference(q, q_cos, q_sin), split_rotary_reference(k, k_cos, k_sin)


def sum_of_squares_reference(x: torch.Tensor, heads: int) -> torch.Tensor:
    """Each token's sum of squares over its hidden size, in fp32, in a stated order.

    x: [B, S, H*D] bf16 -> [B, S, 1] fp32. The order is the contract the fused kernel
    reproduces bit for bit (a reduction's order changes its rounding):

    1. ``s[h, d] = x1[h, d]**2 + x2[h, d]**2`` for each head ``h`` and ``d < D/2``, where
       x1/x2 are the head's halves (the split RoPE layout): one fp32 rounding, the squares
       of bf16 values being exact in fp32;
    2. ``s`` zero-padded to ``[next_pow2(H), next_pow2(D/2)]`` and flattened head-major;
    3. a pairwise tree over adjacent elements: ``s = s[0::2] + s[1::2]`` until one is
       left, each level one fp32 rounding (the padding adds exact zeros).
    """
    b, s, hidden = x.shape
    half = hidden // heads // 2
    xf = x.float().reshape(b, s, heads, 2, half)
    sq = xf[..., 0, :] * xf[..., 0, :] + xf[..., 1, :] * xf[..., 1, :]
    hp, dp = _next_pow2(heads), _next_pow2(half)
    sq = torch.nn.functional.pad(sq, (0, dp - half, 0, hp - heads)).reshape(b, s, hp * dp)
    while sq.shape[-1] > 1:
        sq = sq[..., 0::2] + sq[..., 1::2]
    return sq


def rms_norm_reference(x: torch.Tensor, weight: torch.Tensor, eps: float, heads: int):
    """RMSNorm over the hidden size, with every rounding point stated.

    x: [B, S, H*D] bf16; weight: [H*D] bf16 or fp32. In fp32:
    ``var = ss / hidden`` (ss: :func:`sum_of_squares_reference`), ``rstd = 1 / sqrt(var
    + eps)`` (each op correctly rounded: division and square root, not an approximate
    reciprocal square root), ``y = (x * rstd) * weight``, then one rounding to bf16.
    ``torch.nn.functional.rms_norm`` differs in its summation order (and, on some
    devices, where it rounds); docs/kernels/attention_prologue.md says by how much.
    """
    hidden = x.shape[-1]
    var = sum_of_squares_reference(x, heads) / hidden
    rstd = torch.reciprocal(torch.sqrt(var + eps))
    return ((x.float() * rstd) * weight.float()).to(torch.bfloat16)


def qknorm_split_rope_pair_reference(q, k, q_weight, k_weight, q_cos, q_sin, k_cos, k_sin, eps):
    """The attention prologue: :func:`rms_norm_reference` of q and of k (each over its
    whole hidden size, with its own weight), then split RoPE of each
    (:func:`split_rotary_reference` on the bf16 normalized values). Shapes as
    :func:`split_rope_pair_reference`; the weights are [H*D]. Returns (q_out, k_out)."""
    heads = q_cos.shape[1]
    qn = rms_norm_reference(q, q_weight, eps, heads)
    kn = rms_norm_reference(k, k_weight, eps, heads)
    return split_rotary_reference(qn, q_cos, q_sin), split_rotary_reference(kn, k_cos, k_sin)


def unfused_prologue(q, k, q_weight, k_weight, q_cos, q_sin, k_cos, k_sin, eps):
    """The prologue as LTX-2's eager attention runs it: ``torch.nn.functional.rms_norm``
    of q and of k, then the split RoPE reference of each. Not bit-identical to
    :func:`qknorm_split_rope_pair_reference` (its own summation order)."""
    hidden = (q.shape[-1],)
    qn = torch.nn.functional.rms_norm(q, hidden, q_weight, eps)
    kn = torch.nn.functional.rms_norm(k, hidden, k_weight, eps)
    return split_rotary_reference(qn, q_cos, q_sin), split_rotary_reference(kn, k_cos, k_sin)


def _next_pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())
