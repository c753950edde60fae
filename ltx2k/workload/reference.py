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
