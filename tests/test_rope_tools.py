"""The experiment tools' kernels in the interpreter, so that a tool times the work the
product does: the copy of split RoPE's tile path (tools/rope_pdl_sweep.py), with its PDL
switches off and with or without its cache hints, writes what the product kernel writes;
the fused prologue's candidate tiles (tools/fused_norm_occupancy.py) write the fused
reference."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
import triton

from ltx2k import runtime
from ltx2k.kernels import qknorm_rope, rope
from ltx2k.workload import cases, reference, shapes

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import fused_norm_occupancy  # noqa: E402 - tools/ is not a package
import rope_pdl_sweep  # noqa: E402

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


class _SMs:
    multi_processor_count = 2  # the persistent candidate then loops over several tokens


@pytest.mark.parametrize(
    "kind, k_after_q, per_sm", [("token", False, 1), ("token", True, 1), ("persistent", False, 1),
                                ("persistent", False, 2)],
)  # fmt: skip
@pytest.mark.parametrize("B, S, H, D", [(2, 7, 4, 16), (1, 5, 3, 12)])
def test_the_occupancy_tools_candidates_write_the_fused_reference(
    B, S, H, D, kind, k_after_q, per_sm, monkeypatch
):
    """tools/fused_norm_occupancy.py's candidate tiles (shared cos/sin), at heads and head
    dims that are not powers of two and several tokens per persistent program: exact inputs
    give the fused reference, random ones what the product kernel writes."""
    if DEVICE == "cpu":
        monkeypatch.setattr(torch.cuda, "get_device_properties", lambda _device: _SMs)
    fn = fused_norm_occupancy.candidate("t", kind, 4, k_after_q, per_sm)
    shape = shapes.QKNormPairShape(B, S, S, H, D, shared=True)
    args = cases.qknorm_pair_inputs(shape, DEVICE, seed=3, exact=True)
    want = reference.qknorm_split_rope_pair_reference(*args)
    assert all(torch.equal(a, b) for a, b in zip(fn(*args), want, strict=True))
    args = cases.qknorm_pair_inputs(shape, DEVICE, seed=4)
    want = qknorm_rope.ltx2_qknorm_split_rope_pair(*args, variant="tiled")
    assert all(torch.equal(a, b) for a, b in zip(fn(*args), want, strict=True))
