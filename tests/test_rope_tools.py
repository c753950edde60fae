"""The experiment tools' copy of split RoPE's tile path (tools/rope_pdl_sweep.py), in the
interpreter: with its PDL switches off, and with or without its cache hints, it writes what
the product kernel writes, so a sweep times the same work as the product."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
import triton

from ltx2k import runtime
from ltx2k.kernels import rope
from ltx2k.workload import cases, reference, shapes

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import rope_pdl_sweep  # noqa: E402 - tools/ is not a package

DEVICE = runtime.device()


def _tool_tile(x, cos, sin, bt, bh, warps, hints):
    B, S, HD = x.shape
    H, half = cos.shape[1], cos.shape[3]
    out = torch.full_like(x, float("nan"))  # an element the kernel skips stays NaN
    rope_pdl_sweep._k[(B * S // bt, triton.cdiv(H, bh))](
        x, cos, sin, out, S, H, half, HD, *cos.stride()[:3], *sin.stride()[:3],
        BLOCK_HEADS=bh, BLOCK_HALF=triton.next_power_of_2(half), BLOCK_TOKENS=bt,
        TRIGGER=False, WAIT=False, HINTS=hints, num_warps=warps,
    )  # fmt: skip
    return out


@pytest.mark.parametrize("hints", [False, True])
@pytest.mark.parametrize(
    "B, S, H, D, bt, bh",
    [(2, 8, 5, 64, 2, 8), (1, 16, 33, 16, 4, 32), (4, 4, 3, 96, 2, 4), (1, 4, 3, 64, 1, 4)],
)
def test_the_tools_tile_path_writes_the_reference(B, S, H, D, bt, bh, hints):
    shape = shapes.RopeShape(B, S, H, D)
    x, c, s = cases.rope_inputs(shape, DEVICE, seed=3, exact=True)
    got = _tool_tile(x, c, s, bt, bh, 4, hints)
    assert torch.equal(got, reference.split_rotary_reference(x, c, s))
    assert torch.equal(got, rope.apply_ltx2_split_rotary_emb(x, c, s, variant="tiled"))
