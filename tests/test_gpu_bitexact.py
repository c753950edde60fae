"""GPU contract: both variants of both kernels are bit-identical to the eager references.

Random normal inputs (not the interpreter's exact values): on a GPU the
rounding order itself is under test. Outputs are NaN-poisoned first, so an
element no program wrote cannot pass. Skipped without CUDA; run on the H200.
"""

from __future__ import annotations

import pytest
import torch

from ltx2k import cases, reference, shapes

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

ROPE = [shapes.RopeShape(1, 1024, 32, 128), shapes.RopeShape(1, 4096, 16, 128),
        shapes.RopeShape(4, 1152, 32, 128), shapes.RopeShape(4, 25, 32, 64)]
ADA = [shapes.AdaShape(1, 1, 4096, "bf16"), shapes.AdaShape(1, 1, 4096, "fp32"),
       shapes.AdaShape(2, 3, 2048, "bf16"), shapes.AdaShape(2, 3, 2048, "fp32")]


@pytest.fixture
def poison(monkeypatch):
    """Make the launchers' torch.empty/empty_like return NaN-filled tensors."""
    real_empty, real_like = torch.empty, torch.empty_like

    def empty(*a, **k):
        return real_empty(*a, **k).fill_(float("nan"))

    def empty_like(*a, **k):
        return real_like(*a, **k).fill_(float("nan"))

    from ltx2k.kernels import adaln, rope

    for mod in (rope, adaln):
        monkeypatch.setattr(mod.torch, "empty", empty)
        monkeypatch.setattr(mod.torch, "empty_like", empty_like)


@pytest.mark.parametrize("transposed", [True, False], ids=["cs_transposed", "cs_contig"])
@pytest.mark.parametrize("shape", ROPE, ids=lambda s: s.label)
@pytest.mark.parametrize("variant", ["per_head", "blocked"])
def test_rope_bitexact(variant, shape, transposed, poison):
    from ltx2k import apply_ltx2_split_rotary_emb

    x, cos, sin = cases.rope_inputs(shape, "cuda", seed=3, transposed=transposed)
    out = apply_ltx2_split_rotary_emb(x, cos, sin, variant=variant)
    ref = reference.split_rotary_reference(x, cos, sin)
    torch.testing.assert_close(out, ref, atol=0, rtol=0)


@pytest.mark.parametrize("shape", ADA, ids=lambda s: s.label)
@pytest.mark.parametrize("variant", ["separate", "slab"])
def test_ada_bitexact(variant, shape, poison):
    from ltx2k import ltx2_ada_values9

    table, ts = cases.ada_inputs(shape, "cuda", seed=5)
    outs = ltx2_ada_values9(table, ts, variant=variant)
    refs = reference.ada_values9_reference(table, ts)
    assert len(outs) == 9
    for o, r in zip(outs, refs):
        assert o.is_contiguous() and o.shape == (shape.B, shape.S, shape.D)
        torch.testing.assert_close(o, r, atol=0, rtol=0)


def test_rope_fma_would_differ():
    """The bit-exact tests have teeth: skipping the cos rounding changes bits."""
    x, cos, sin = cases.rope_inputs(ROPE[0], "cuda", seed=3)
    ref = reference.split_rotary_reference(x, cos, sin)
    b, s, _ = x.shape
    h, half = cos.shape[1], cos.shape[3]
    xh = x.view(b, s, h, 2, half).float()
    c = cos.transpose(1, 2).float()
    sn = sin.transpose(1, 2).float()
    fused = torch.stack([xh[..., 0, :] * c - xh[..., 1, :] * sn,
                         xh[..., 1, :] * c + xh[..., 0, :] * sn], dim=3)
    assert not torch.equal(fused.to(torch.bfloat16).view_as(ref), ref)


def test_compile_fullgraph():
    from ltx2k import apply_ltx2_split_rotary_emb, ltx2_ada_values9

    x, cos, sin = cases.rope_inputs(ROPE[3], "cuda", seed=1)
    rope_c = torch.compile(apply_ltx2_split_rotary_emb, fullgraph=True)
    torch.testing.assert_close(rope_c(x, cos, sin), reference.split_rotary_reference(x, cos, sin),
                               atol=0, rtol=0)
    table, ts = cases.ada_inputs(ADA[0], "cuda", seed=2)
    ada_c = torch.compile(ltx2_ada_values9, fullgraph=True)
    outs = ada_c(table, ts)
    for o, r in zip(outs, reference.ada_values9_reference(table, ts)):
        torch.testing.assert_close(o, r, atol=0, rtol=0)
    # still one slab: 9 views of one storage, in order
    base = outs[0].untyped_storage().data_ptr()
    assert all(o.untyped_storage().data_ptr() == base for o in outs)


@pytest.mark.parametrize("variant,expected", [("separate", 9), ("slab", 1)])
def test_allocations(variant, expected):
    from ltx2k.measure.allocations import allocations_per_call

    table, ts = cases.ada_inputs(ADA[0], "cuda", seed=0)
    fn = cases.variant_fn("ada_values9", variant)
    assert allocations_per_call(lambda: fn(table, ts), on_gpu=True) == expected
