"""Seeded inputs for the two kernels, shared by the tests and the measurement code.

Values are drawn on the CPU with an explicit generator and then moved, so a
seed gives the same numbers on every device: a case that fails on a GPU can
be replayed in the CPU interpreter.

``exact=True`` draws values for which no rounding ever happens, so the
interpreter (which rounds fp32->bf16 by truncation, not round-to-nearest-even
as GPUs do) must agree with the reference bit for bit:

- RoPE: ``x`` integers in [-16, 16]; ``cos``/``sin`` from {±0.5, ±1, ±2}.
  Every product is k/2 with |k| <= 64 and every sum k/2 with |k| <= 128,
  which needs at most 8 significant bits: bf16 has exactly 8.
- AdaLN: table k/2 in [-8, 8]; timestep integers in [-16, 16]; every sum is
  k/2 with |k| <= 48.

Values are random per position, so reading any wrong element (a swapped head,
a missed block, a wrong stride) changes the output.
"""

from __future__ import annotations

import torch

_ROPE_TRIG = (-2.0, -1.0, -0.5, 0.5, 1.0, 2.0)
_TABLE_DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32}


def _table_dtype(table_dtype: torch.dtype | str) -> torch.dtype:
    if isinstance(table_dtype, torch.dtype):
        return table_dtype
    if table_dtype not in _TABLE_DTYPES:
        raise ValueError(f"table_dtype must be one of {sorted(_TABLE_DTYPES)}, got {table_dtype!r}")
    return _TABLE_DTYPES[table_dtype]


def _ints(shape, lo: int, hi: int, gen: torch.Generator) -> torch.Tensor:
    return torch.randint(lo, hi + 1, shape, generator=gen).to(torch.float32)


def rope_inputs(
    B: int,
    S: int,
    H: int,
    D: int,
    device: torch.device | str = "cpu",
    seed: int = 0,
    *,
    exact: bool = False,
    transposed: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(x [B, S, H*D], cos [B, H, S, D/2], sin [B, H, S, D/2])``, all bf16.

    ``transposed=True`` returns cos/sin as ``[B, S, H, D/2]`` tensors viewed
    as ``[B, H, S, D/2]`` (the layout the model passes; non-contiguous).
    """
    gen = torch.Generator().manual_seed(seed)
    half = D // 2
    trig_shape = (B, S, H, half) if transposed else (B, H, S, half)
    if exact:
        x = _ints((B, S, H * D), -16, 16, gen)
        trig = torch.tensor(_ROPE_TRIG)
        cos, sin = (trig[torch.randint(len(trig), trig_shape, generator=gen)] for _ in range(2))
    else:
        x = torch.randn((B, S, H * D), generator=gen)
        cos, sin = (torch.randn(trig_shape, generator=gen) for _ in range(2))
    x, cos, sin = (t.to(device=device, dtype=torch.bfloat16) for t in (x, cos, sin))
    if transposed:
        cos, sin = cos.transpose(1, 2), sin.transpose(1, 2)
    return x, cos, sin


def ada_inputs(
    B: int,
    S: int,
    D: int,
    table_dtype: torch.dtype | str = torch.bfloat16,
    device: torch.device | str = "cpu",
    seed: int = 0,
    *,
    exact: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(scale_shift_table [9, D] of table_dtype, timestep [B, S, 9*D] bf16)``.

    ``table_dtype`` is a torch dtype or a shape label's "bf16"/"fp32".
    """
    dtype = _table_dtype(table_dtype)
    gen = torch.Generator().manual_seed(seed)
    if exact:
        table = _ints((9, D), -16, 16, gen) / 2
        timestep = _ints((B, S, 9 * D), -16, 16, gen)
    else:
        table = torch.randn((9, D), generator=gen)
        timestep = torch.randn((B, S, 9 * D), generator=gen)
    return table.to(device=device, dtype=dtype), timestep.to(device=device, dtype=torch.bfloat16)
