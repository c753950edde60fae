"""The registered ops (``torch.ops.ltx2k.*``) and what the public functions do with them.

On the CPU (Triton's interpreter): ``torch.library.opcheck`` of every op; gradients,
jvp and vmap against the eager reference's own autograd and a Python loop, bit for bit
on exact inputs, plus inputs chosen so that the backward's rounding order shows (one
ulp apart otherwise); export; errors in the caller's terms; plain tensors stay off the
dispatcher. On a GPU: opcheck at a decode shape and a large shape, and random-input
gradients against eager autograd, exactly.
"""

from __future__ import annotations

import pytest
import torch
from torch.library import opcheck

import ltx2k
from ltx2k import runtime
from ltx2k.kernels import _native, adaln, ops, rope
from ltx2k.workload import cases, reference, shapes
from tests.test_rope import padded_token_major

DEVICE = runtime.device()
gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def _rope(shape, seed=0, exact=True, device=DEVICE, grad=False):
    x, cos, sin = cases.rope_inputs(shape, device, seed, exact=exact)
    return tuple(t.requires_grad_(grad) for t in (x, cos, sin))


def _ada(shape, seed=0, exact=True, device=DEVICE, grad=False):
    table, ts = cases.ada_inputs(shape, device, seed, exact=exact)
    return table.requires_grad_(grad), ts.requires_grad_(grad)


# Awkward on purpose: a partial head block (17 heads), S=1, B>1, a non-power-of-two half.
ROPE_SHAPES = [shapes.RopeShape(2, 3, 3, 8), shapes.RopeShape(1, 1, 17, 12)]
ADA_SHAPES = [shapes.AdaShape(2, 3, 16, "bf16"), shapes.AdaShape(1, 1, 24, "fp32")]


def _equal(a, b) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and torch.equal(a, b)


# --- opcheck --------------------------------------------------------------------------


@pytest.mark.parametrize("variant", ["blocked", "per_head"])
@pytest.mark.parametrize("shape", ROPE_SHAPES, ids=lambda s: s.label)
def test_opcheck_split_rope(shape, variant):
    x, cos, sin = _rope(shape, grad=True)
    opcheck(torch.ops.ltx2k.split_rope.default, (x, cos, sin, variant, "auto"))
    g = _rope(shape, seed=1)[0]
    opcheck(torch.ops.ltx2k.split_rope_backward.default, (g.requires_grad_(), cos, sin))


@pytest.mark.parametrize("variant", ["slab_dconst", "separate"])
@pytest.mark.parametrize("shape", ADA_SHAPES, ids=lambda s: s.label)
def test_opcheck_ada_values9(shape, variant):
    table, ts = _ada(shape, grad=True)
    opcheck(torch.ops.ltx2k.ada_values9.default, (table, ts, variant, "auto"))


# --- gradients against eager autograd through the reference -------------------------


@pytest.mark.parametrize("shape", ROPE_SHAPES, ids=lambda s: s.label)
def test_rope_grads_match_eager_autograd(shape):
    x, cos, sin = _rope(shape, grad=True)
    g = _rope(shape, seed=1)[0]
    out = ltx2k.apply_ltx2_split_rotary_emb(x, cos, sin)
    ref = reference.split_rotary_reference(x, cos, sin)
    assert out.grad_fn is not None and _equal(out, ref)
    got = torch.autograd.grad(out, (x, cos, sin), g)
    want = torch.autograd.grad(ref, (x, cos, sin), g)
    for name, a, b in zip(("x", "cos", "sin"), got, want, strict=True):
        assert _equal(a, b), name


def test_rope_backward_rounds_each_product_as_eager_autograd():
    """Eager autograd rounds ``g2 * sin`` to bf16 before adding it to ``bf16(g1 * cos)``;
    the forward kernel with the sine negated would add it exactly. These values make the
    two differ (0 against 2**-14 in gx1) while rounding down exactly, so the interpreter's
    truncation and eager's round-to-nearest agree: the test fails for the fused order."""
    shape = shapes.RopeShape(1, 1, 1, 2)
    bf16 = {"dtype": torch.bfloat16, "device": DEVICE}
    x = torch.tensor([[[3.0, 5.0]]], **bf16, requires_grad=True)
    cos = torch.ones((1, 1, 1, 1), **bf16)
    sin = torch.full((1, 1, 1, 1), 1 + 2**-7, **bf16)
    g = torch.tensor([[[-(1 + 2**-6), 1 + 2**-7]]], **bf16)
    assert tuple(x.shape) == (shape.B, shape.S, shape.H * shape.D)
    (got,) = torch.autograd.grad(ltx2k.apply_ltx2_split_rotary_emb(x, cos, sin), x, g)
    (want,) = torch.autograd.grad(reference.split_rotary_reference(x, cos, sin), x, g)
    assert want[0, 0, 0].item() == 0.0 and want[0, 0, 1].item() == 2 + 2**-5
    assert _equal(got, want), (got, want)


@pytest.mark.parametrize("shape", ROPE_SHAPES + [shapes.RopeShape(1, 5, 32, 64)], ids=str)
def test_rope_backward_kernel_is_exact_on_random_inputs(shape):
    """The backward kernel rounds by integer operations (round to nearest even), so even
    the interpreter, which truncates casts to bf16, matches eager autograd bit for bit
    on inputs that are not exactly representable; inf and NaN gradients pass through."""
    x, cos, sin = _rope(shape, exact=False, grad=True)
    g = _rope(shape, seed=1, exact=False)[0] * 1e3
    g.view(-1)[:4] = torch.tensor([float("nan"), float("inf"), -float("inf"), 3e38])
    (want,) = torch.autograd.grad(reference.split_rotary_reference(x, cos, sin), x, g)
    got = torch.ops.ltx2k.split_rope_backward(g, cos.detach(), sin.detach())
    both_nan = got.isnan() & want.isnan()
    assert both_nan.any()
    assert torch.equal(got.view(torch.int16)[~both_nan], want.view(torch.int16)[~both_nan])


def test_rope_backward_reads_cos_and_sin_through_their_own_strides():
    """The backward kernel with sin in a layout unlike cos's (tests/test_rope.py's
    padded_token_major), and the reverse: each must be read through its own strides, which
    every other test gives both alike. Exact inputs: eager autograd's bits on the CPU too."""
    shape = shapes.RopeShape(2, 3, 5, 12)
    x, cos, sin = cases.rope_inputs(shape, DEVICE, 21, exact=True, transposed=False)
    g = cases.rope_inputs(shape, DEVICE, 22, exact=True)[0]
    for c, s in ((cos, padded_token_major(sin)), (padded_token_major(cos), sin)):
        xr = x.detach().clone().requires_grad_()
        (want,) = torch.autograd.grad(reference.split_rotary_reference(xr, c, s), xr, g)
        assert _equal(torch.ops.ltx2k.split_rope_backward(g, c, s), want)


def test_rope_backward_stores_stay_inside_the_output(guarded):
    """The backward kernel's masks (17 heads: a partial second block of 16; half dim 6
    under 8): nothing is stored outside its output."""
    shape = shapes.RopeShape(1, 2, 17, 12)
    x, cos, sin = _rope(shape, seed=26)
    g = _rope(shape, seed=27)[0]
    xr = x.detach().clone().requires_grad_()
    (want,) = torch.autograd.grad(reference.split_rotary_reference(xr, cos, sin), xr, g)
    assert _equal(torch.ops.ltx2k.split_rope_backward(g, cos, sin), want)
    assert guarded.calls == 1
    guarded.check()


@pytest.mark.parametrize("shape", ADA_SHAPES, ids=lambda s: s.label)
def test_ada_grads_match_eager_autograd(shape):
    table, ts = _ada(shape, grad=True)
    weights = torch.arange(1, 10, dtype=torch.float32)  # a different gradient per value

    def loss(outs):
        return sum((o.float() * w).sum() for o, w in zip(outs, weights, strict=True))

    outs = ltx2k.ltx2_ada_values9(table, ts)
    ref = reference.ada_values9_reference(table, ts)
    assert all(_equal(a, b) for a, b in zip(outs, ref, strict=True))
    got = torch.autograd.grad(loss(outs), (table, ts))
    want = torch.autograd.grad(loss(ref), (table, ts))
    assert _equal(got[0], want[0]) and got[0].dtype == table.dtype
    assert _equal(got[1], want[1])


def test_func_grad_and_vjp():
    x, cos, sin = _rope(ROPE_SHAPES[0])
    g = _rope(ROPE_SHAPES[0], seed=1)[0]
    got = torch.func.vjp(ltx2k.apply_ltx2_split_rotary_emb, x, cos, sin)[1](g)
    want = torch.func.vjp(reference.split_rotary_reference, x, cos, sin)[1](g)
    assert all(_equal(a, b) for a, b in zip(got, want, strict=True))
    table, ts = _ada(ADA_SHAPES[0])
    got = torch.func.grad(lambda t: ltx2k.ltx2_ada_values9(t, ts)[4].float().sum())(table)
    want = torch.func.grad(lambda t: reference.ada_values9_reference(t, ts)[4].float().sum())(table)
    assert _equal(got, want)


# --- jvp and vmap ---------------------------------------------------------------------


def test_jvp_matches_the_reference():
    x, cos, sin = _rope(ROPE_SHAPES[0])
    xt, ct, st = _rope(ROPE_SHAPES[0], seed=2)
    for tangents in ((xt, None, None), (None, ct, st), (xt, ct, None)):
        primals = (x, cos, sin)
        given = [i for i, t in enumerate(tangents) if t is not None]

        def with_(fn, *args, given=given, primals=primals):
            full = list(primals)
            for i, a in zip(given, args, strict=True):
                full[i] = a
            return fn(*full)

        args = tuple(primals[i] for i in given)
        tans = tuple(tangents[i] for i in given)
        got = torch.func.jvp(lambda *a: with_(ltx2k.apply_ltx2_split_rotary_emb, *a), args, tans)
        want = torch.func.jvp(lambda *a: with_(reference.split_rotary_reference, *a), args, tans)
        assert _equal(got[0], want[0]) and _equal(got[1], want[1]), given
    table, ts = _ada(ADA_SHAPES[0])
    tt, tst = _ada(ADA_SHAPES[0], seed=3)
    _, got = torch.func.jvp(ltx2k.ltx2_ada_values9, (table, ts), (tt, tst))
    _, want = torch.func.jvp(reference.ada_values9_reference, (table, ts), (tt, tst))
    assert all(_equal(a, b) for a, b in zip(got, want, strict=True))


def test_eager_forward_ad():
    import torch.autograd.forward_ad as fwad

    x, cos, sin = _rope(ROPE_SHAPES[0])
    xt = _rope(ROPE_SHAPES[0], seed=2)[0]
    with fwad.dual_level():
        out = ltx2k.apply_ltx2_split_rotary_emb(fwad.make_dual(x, xt), cos, sin)
        tangent = fwad.unpack_dual(out).tangent
    assert _equal(tangent, reference.split_rotary_reference(xt, cos, sin))


@pytest.mark.parametrize("in_dims", [(0, None, None), (1, 0, 0), (None, 0, None)])
def test_vmap_rope_folds_into_batch(in_dims):
    shape = ROPE_SHAPES[0]
    got, calls = _vmapped(
        ltx2k.apply_ltx2_split_rotary_emb, _rope(shape), _rope(shape, seed=4), in_dims
    )
    for n, one in enumerate(calls):
        assert _equal(got[n], reference.split_rotary_reference(*one))


def _vmapped(fn, first, second, in_dims):
    """fn vmapped over two stacked calls (a None dim takes the first call's tensor), and
    the two calls' arguments one by one."""
    stacks = [torch.stack([a, b], dim=0) for a, b in zip(first, second, strict=True)]
    args = [
        s.movedim(0, d) if d is not None else s[0] for s, d in zip(stacks, in_dims, strict=True)
    ]
    calls = [
        [s[n] if d is not None else s[0] for s, d in zip(stacks, in_dims, strict=True)]
        for n in range(2)
    ]
    return torch.vmap(fn, in_dims=in_dims)(*args), calls


@pytest.mark.parametrize("in_dims", [(None, 0), (0, None), (0, 1)])
def test_vmap_ada_folds_or_loops(in_dims):
    shape = ADA_SHAPES[0]
    got, calls = _vmapped(ltx2k.ltx2_ada_values9, _ada(shape), _ada(shape, seed=4), in_dims)
    for n, one in enumerate(calls):
        want = reference.ada_values9_reference(*one)
        assert all(_equal(a[n], b) for a, b in zip(got, want, strict=True))


def _batched(args, in_dims, n: int):
    """``args`` as n samples vmapped at ``in_dims`` (a None dim: the tensor as it is)."""
    return [
        t if d is None else t.expand(n, *t.shape).movedim(0, d)
        for t, d in zip(args, in_dims, strict=True)
    ]


def _vmap_reference(ref, args, in_dims, n: int):
    """The reference vmapped over n copies of ``args``: over one copy, then cut to n
    (eager's vmap fallback refuses zero samples)."""
    got = torch.vmap(ref, in_dims)(*_batched(args, in_dims, max(n, 1)))
    return got[:n] if isinstance(got, torch.Tensor) else tuple(t[:n] for t in got)


# (B, S, samples): a sample without tokens, a sample without batch entries, no samples
EMPTY_VMAPS = [(2, 0, 2), (0, 3, 2), (2, 3, 0)]


@pytest.mark.parametrize("B, S, n", EMPTY_VMAPS)
@pytest.mark.parametrize("in_dims", [(0, 0, 0), (1, None, None)])
def test_vmap_rope_of_empty_inputs(B, S, n, in_dims):
    """Zero tokens or zero samples under vmap give the reference's empty output (the rule
    unfolds the batch by its size, which a view of zero elements cannot infer), and so does
    the backward's rule (vmap of grad)."""
    one = _rope(shapes.RopeShape(B, S, 3, 8))

    def loss(fn):
        return torch.func.grad(lambda x, cos, sin: fn(x, cos, sin).float().sum())

    for fn, ref in (
        (ltx2k.apply_ltx2_split_rotary_emb, reference.split_rotary_reference),
        (loss(ltx2k.apply_ltx2_split_rotary_emb), loss(reference.split_rotary_reference)),
    ):
        got = torch.vmap(fn, in_dims)(*_batched(one, in_dims, n))
        assert _equal(got, _vmap_reference(ref, one, in_dims, n))


@pytest.mark.parametrize("B, S, n", EMPTY_VMAPS)
@pytest.mark.parametrize("in_dims", [(None, 0), (0, 0)])  # folds into B; a table per sample
def test_vmap_ada_of_empty_inputs(B, S, n, in_dims):
    one = _ada(shapes.AdaShape(B, S, 8, "bf16"))
    got = torch.vmap(ltx2k.ltx2_ada_values9, in_dims)(*_batched(one, in_dims, n))
    want = _vmap_reference(reference.ada_values9_reference, one, in_dims, n)
    assert len(got) == 9 and all(_equal(a, b) for a, b in zip(got, want, strict=True))


def test_vmap_ada_of_no_samples_still_validates():
    """With no samples to loop over, a table per sample is still checked (by its layout)."""
    table, ts = _ada(shapes.AdaShape(2, 3, 8, "bf16"))
    args = _batched((table[:8], ts), (0, 0), 0)
    with pytest.raises(ValueError, match=r"scale_shift_table\.shape\[0\] must be 9"):
        torch.vmap(ltx2k.ltx2_ada_values9)(*args)


# --- export, meta, and which calls go through the op ---------------------------------


class _Block(torch.nn.Module):
    def forward(self, x, cos, sin, table, ts):
        values = ltx2k.ltx2_ada_values9(table, ts)
        return ltx2k.apply_ltx2_split_rotary_emb(x, cos, sin), values[0], values[8]


def test_export_records_the_ops():
    _export_and_compare((*_rope(ROPE_SHAPES[0]), *_ada(shapes.AdaShape(2, 3, 8, "bf16"))))


def _export_and_compare(args) -> None:
    """torch.export of both functions keeps them as the ltx2k ops, and the exported
    program gives the references' bits."""
    ep = torch.export.export(_Block(), args)
    targets = {str(n.target) for n in ep.graph.nodes if n.op == "call_function"}
    assert {"ltx2k.split_rope.default", "ltx2k.ada_values9.default"} <= targets, targets
    want = (
        reference.split_rotary_reference(*args[:3]),
        *(reference.ada_values9_reference(*args[3:])[i] for i in (0, 8)),
    )
    for a, b in zip(ep.module()(*args), want, strict=True):
        assert _equal(a, b)


@gpu
@pytest.mark.gpu
def test_gpu_export_records_the_ops():
    _export_and_compare((*_rope(GPU_ROPE[1], device="cuda"), *_ada(GPU_ADA[0], device="cuda")))


def test_meta_inputs_give_meta_outputs():
    x, cos, sin = (t.to("meta") for t in _rope(ROPE_SHAPES[0]))
    out = ltx2k.apply_ltx2_split_rotary_emb(x, cos, sin)
    assert out.is_meta and out.shape == x.shape and out.is_contiguous()
    table, ts = (t.to("meta") for t in _ada(ADA_SHAPES[0]))
    outs = ltx2k.ltx2_ada_values9(table, ts)
    assert len(outs) == 9 and all(o.is_meta and o.is_contiguous() for o in outs)
    with pytest.raises(ValueError, match="timestep.shape"):
        ltx2k.ltx2_ada_values9(table, ts[..., :-1].contiguous())


class _Forbidden:
    def __init__(self):
        self.calls = 0

    def __call__(self, *args, **kwargs):
        self.calls += 1
        raise AssertionError("plain inference went through the registered op")


def test_plain_inference_stays_off_the_dispatcher(monkeypatch):
    forbidden = _Forbidden()
    monkeypatch.setattr(rope, "split_rope_routed", forbidden)
    monkeypatch.setattr(adaln, "ada_values9_routed", forbidden)
    x, cos, sin = _rope(ROPE_SHAPES[0])
    assert _equal(
        ltx2k.apply_ltx2_split_rotary_emb(x, cos, sin),
        reference.split_rotary_reference(x, cos, sin),
    )
    table, ts = _ada(ADA_SHAPES[0])
    ltx2k.ltx2_ada_values9(table, ts)
    with torch.no_grad():  # inference with the model's own Parameter
        ltx2k.ltx2_ada_values9(torch.nn.Parameter(table), ts)
    assert forbidden.calls == 0


def test_routed():
    a = torch.zeros(2)
    assert not ops.routed(a, a)
    assert not ops.routed(a, [1])  # not a tensor: the Python path's validation names it
    assert ops.routed(a.to("meta"), a)
    assert ops.routed(a.requires_grad_(), torch.zeros(2))
    with torch.no_grad():
        assert not ops.routed(a, torch.nn.Parameter(torch.zeros(2)))
    assert torch.vmap(lambda t: torch.tensor(ops.routed(t, a)))(torch.zeros(2, 2)).all()


# --- errors in the caller's terms -----------------------------------------------------


@pytest.mark.parametrize("mode", ["grad", "vmap", "meta"])
def test_bad_inputs_through_the_op_name_the_argument(mode):
    x, cos, sin = _rope(ROPE_SHAPES[0])
    bad = x.float()
    if mode == "grad":
        bad.requires_grad_()
        call = lambda: ltx2k.apply_ltx2_split_rotary_emb(bad, cos, sin)  # noqa: E731
    elif mode == "vmap":
        stacked = torch.stack([bad, bad])
        call = lambda: torch.vmap(  # noqa: E731
            lambda t: ltx2k.apply_ltx2_split_rotary_emb(t, cos, sin)
        )(stacked)
    else:
        call = lambda: ltx2k.apply_ltx2_split_rotary_emb(  # noqa: E731
            bad.to("meta"), cos.to("meta"), sin.to("meta")
        )
    with pytest.raises(ValueError, match=r"^x must be bfloat16, got torch.float32"):
        call()
    with pytest.raises(ValueError, match="variant must be one of"):
        ltx2k.apply_ltx2_split_rotary_emb(x.requires_grad_(), cos, sin, variant="nope")


@pytest.mark.parametrize("exact", [True, False], ids=["exact", "random"])
def test_second_derivatives_match_eager_autograd(exact):
    """Random inputs too: the double backward rounds as eager autograd does (the
    backward kernel rounds to nearest even by integer operations, in the interpreter too)."""
    x, cos, sin = _rope(ROPE_SHAPES[0], exact=exact, grad=True)
    g = _rope(ROPE_SHAPES[0], seed=1, exact=exact)[0].requires_grad_()
    h = _rope(ROPE_SHAPES[0], seed=2, exact=exact)[0]

    def twice(fn):
        (gx,) = torch.autograd.grad(fn(x, cos, sin), x, g, create_graph=True)
        return torch.autograd.grad(gx, (g, cos, sin), h)

    got = twice(ltx2k.apply_ltx2_split_rotary_emb)
    want = twice(reference.split_rotary_reference)
    for name, a, b in zip(("grad", "cos", "sin"), got, want, strict=True):
        assert _equal(a, b), name


# --- on a GPU -------------------------------------------------------------------------

# The decode shape and a production-size one (tracked shapes, ltx2k.workload.shapes).
GPU_ROPE = [shapes.RopeShape(1, 1, 32, 128), shapes.RopeShape(2, 4096, 32, 128)]
GPU_ADA = [shapes.AdaShape(1, 1, 4096, "bf16"), shapes.AdaShape(2, 4096, 4096, "fp32")]


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("shape", GPU_ROPE, ids=lambda s: s.label)
def test_gpu_opcheck_and_grads_split_rope(shape):
    x, cos, sin = _rope(shape, exact=False, device="cuda", grad=True)
    opcheck(torch.ops.ltx2k.split_rope.default, (x, cos, sin, "blocked", "auto"))
    g = _rope(shape, seed=1, exact=False, device="cuda")[0]
    opcheck(torch.ops.ltx2k.split_rope_backward.default, (g.requires_grad_(), cos, sin))
    out = ltx2k.apply_ltx2_split_rotary_emb(x, cos, sin)
    ref = reference.split_rotary_reference(x, cos, sin)
    got = torch.autograd.grad(out, (x, cos, sin), g.detach())
    want = torch.autograd.grad(ref, (x, cos, sin), g.detach())
    assert _equal(out, ref)
    for name, a, b in zip(("x", "cos", "sin"), got, want, strict=True):
        assert _equal(a, b), name


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("shape", GPU_ROPE, ids=lambda s: s.label)
def test_gpu_second_derivatives_split_rope(shape):
    x, cos, sin = _rope(shape, exact=False, device="cuda", grad=True)
    g = _rope(shape, seed=1, exact=False, device="cuda")[0].requires_grad_()
    h = _rope(shape, seed=2, exact=False, device="cuda")[0]

    def twice(fn):
        (gx,) = torch.autograd.grad(fn(x, cos, sin), x, g, create_graph=True)
        return torch.autograd.grad(gx, (g, cos, sin), h)

    got = twice(ltx2k.apply_ltx2_split_rotary_emb)
    want = twice(reference.split_rotary_reference)
    for name, a, b in zip(("grad", "cos", "sin"), got, want, strict=True):
        assert _equal(a, b), name


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("shape", GPU_ADA, ids=lambda s: s.label)
def test_gpu_opcheck_and_grads_ada_values9(shape):
    table, ts = _ada(shape, exact=False, device="cuda", grad=True)
    opcheck(torch.ops.ltx2k.ada_values9.default, (table, ts, "slab_dconst", "auto"))
    weights = torch.arange(1, 10, dtype=torch.float32, device="cuda")
    got = torch.autograd.grad(
        sum(
            (o.float() * w).sum()
            for o, w in zip(ltx2k.ltx2_ada_values9(table, ts), weights, strict=True)
        ),
        (table, ts),
    )
    ref = reference.ada_values9_reference(table, ts)
    want = torch.autograd.grad(
        sum((o.float() * w).sum() for o, w in zip(ref, weights, strict=True)), (table, ts)
    )
    assert _equal(got[0], want[0]) and _equal(got[1], want[1])


@gpu
@pytest.mark.gpu
def test_gpu_vmap_jvp_and_compiled_backward():
    x, cos, sin = _rope(GPU_ROPE[0], exact=False, device="cuda")
    xs = torch.stack([x, x.flip(-1).contiguous()])
    got = torch.vmap(lambda t: ltx2k.apply_ltx2_split_rotary_emb(t, cos, sin))(xs)
    assert all(_equal(got[i], reference.split_rotary_reference(xs[i], cos, sin)) for i in range(2))
    _, tangent = torch.func.jvp(
        lambda t: ltx2k.apply_ltx2_split_rotary_emb(t, cos, sin), (x,), (xs[1],)
    )
    assert _equal(tangent, reference.split_rotary_reference(xs[1], cos, sin))
    fn = torch.compile(ltx2k.apply_ltx2_split_rotary_emb, fullgraph=True)
    xg = x.detach().requires_grad_()
    g = torch.randn_like(x)
    (got,) = torch.autograd.grad(fn(xg, cos, sin), xg, g)
    (want,) = torch.autograd.grad(reference.split_rotary_reference(xg, cos, sin), xg, g)
    assert _equal(got, want)
    assert _native.plain3(x, cos, sin)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_compile_fullgraph_traces_the_ops_forward_and_backward(backend):
    """dynamo (and AOTAutograd, which traces the backward with fake tensors) over both
    public functions: one graph, the reference's values and gradients."""
    torch._dynamo.reset()
    block = torch.compile(_Block(), backend=backend, fullgraph=True)
    args = (*_rope(ROPE_SHAPES[0], grad=True), *_ada(shapes.AdaShape(2, 3, 8, "bf16"), grad=True))
    got = block(*args)
    want = (
        reference.split_rotary_reference(*args[:3]),
        *(reference.ada_values9_reference(*args[3:])[i] for i in (0, 8)),
    )
    assert all(_equal(a, b) for a, b in zip(got, want, strict=True))
    gout = [_rope(ROPE_SHAPES[0], seed=5)[0], *(torch.ones_like(w) for w in want[1:])]
    grads = torch.autograd.grad(got, args, gout)
    ref_grads = torch.autograd.grad(want, args, gout)
    for i, (a, b) in enumerate(zip(grads, ref_grads, strict=True)):
        assert _equal(a, b), i
