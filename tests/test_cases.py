"""The attention prologue's cases (ltx2k/workload/cases.py): their inputs, the bytes they
move, their peers, and what each variant is gated against (ltx2k/measure/gate.py)."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from conftest import DEVICE

from ltx2k.measure import gate
from ltx2k.workload import cases, reference, shapes, variants

PAIRS = ("split_rope_pair", "qknorm_rope_pair")
SHAPE = {
    "split_rope_pair": shapes.PairShape(2, 3, 5, 3, 16),
    "qknorm_rope_pair": shapes.QKNormPairShape(2, 3, 5, 3, 16),
}


def _shared(kernel, **fields):
    return dataclasses.replace(SHAPE[kernel], Sk=SHAPE[kernel].Sq, shared=True, **fields)


@pytest.mark.parametrize("kernel", PAIRS)
@pytest.mark.parametrize("layout", shapes.LAYOUTS)
@pytest.mark.parametrize("exact", [True, False], ids=["exact", "random"])
def test_pair_inputs_have_the_shapes_strides_and_layout_of_the_shape(kernel, layout, exact):
    shape = dataclasses.replace(SHAPE[kernel], layout=layout)
    args = cases.KERNELS[kernel].make_inputs(shape, DEVICE, seed=3, exact=exact)
    q, k, *rest = args
    assert q.shape == (2, 3, 48) and k.shape == (2, 5, 48) and q.is_contiguous()
    if kernel == "qknorm_rope_pair":
        q_weight, k_weight, *rest, eps = rest
        assert q_weight.shape == k_weight.shape == (48,) and q_weight.dtype == torch.bfloat16
        assert eps == 1e-6
    q_cos, q_sin, k_cos, k_sin = rest
    assert q_cos.shape == q_sin.shape == (2, 3, 3, 8)
    assert k_cos.shape == k_sin.shape == (2, 3, 5, 8)
    for t in (q_cos, q_sin, k_cos, k_sin):
        assert t.dtype == torch.bfloat16 and t.stride(-1) == 1
        # token-major: a [B, S, H, D/2] tensor seen as [B, H, S, D/2]
        assert (t.stride(2) > t.stride(1)) == (layout == "token_major")
    assert k_cos is not q_cos and not torch.equal(q, k[:, :3])  # never the same draw twice


@pytest.mark.parametrize("kernel", PAIRS)
def test_shared_cos_sin_are_the_very_same_tensors(kernel):
    args = cases.KERNELS[kernel].make_inputs(_shared(kernel), DEVICE, seed=1)
    q_cos, q_sin, k_cos, k_sin = args[-4:] if kernel == "split_rope_pair" else args[-5:-1]
    assert k_cos is q_cos and k_sin is q_sin
    assert args[0] is not args[1]


def test_pair_bytes_by_hand():
    # q [2, 3, 48] and k [2, 5, 48]: 288 and 480 elements, each read and written in bf16;
    # cos + sin of q: 2 x 144 elements, of k: 2 x 240.
    q, k = 2 * 3 * 48, 2 * 5 * 48
    assert cases.pair_bytes(SHAPE["split_rope_pair"]) == 2 * (2 * q + 2 * k) + 2 * (q + k)
    assert cases.pair_bytes(SHAPE["split_rope_pair"]) == 4608
    # shared: one cos/sin pair, counted once
    shared = _shared("split_rope_pair")
    assert cases.pair_bytes(shared) == 2 * (2 * q + 2 * q) + 2 * q == 5 * 2 * 288
    # the fused prologue adds two [48] weights, 2 or 4 bytes an element
    assert cases.qknorm_pair_bytes(SHAPE["qknorm_rope_pair"]) == 4608 + 2 * 48 * 2
    fp32 = dataclasses.replace(SHAPE["qknorm_rope_pair"], weight_dtype="fp32")
    assert cases.qknorm_pair_bytes(fp32) == 4608 + 2 * 48 * 4


@pytest.mark.parametrize("kernel", PAIRS)
def test_bytes_are_what_the_inputs_and_outputs_hold(kernel):
    """The minimum traffic is the bytes of the distinct input tensors and of the outputs."""
    spec = cases.KERNELS[kernel]
    for shape in (SHAPE[kernel], _shared(kernel)):
        args = spec.make_inputs(shape, DEVICE)
        distinct = {id(t): t for t in args if isinstance(t, torch.Tensor)}.values()
        inputs = sum(t.numel() * t.element_size() for t in distinct)
        outputs = sum(t.numel() * t.element_size() for t in spec.reference(*args))
        assert spec.bytes_moved(shape) == inputs + outputs, shape.label


@pytest.mark.parametrize("kernel", PAIRS)
def test_gpu_shapes_bytes_grow_with_the_tokens(kernel):
    spec = cases.KERNELS[kernel]
    by_label = {s.label: spec.bytes_moved(s) for s in spec.gpu_shapes}
    assert (
        by_label["B1_Sq6144_Sk6144_H32_D128_shared"] > by_label["B2_Sq1536_Sk1536_H32_D128_shared"]
    )
    assert by_label["B2_Sq1536_Sk126_H32_D64"] == by_label["B2_Sq126_Sk1536_H32_D64"]


def test_exact_inputs_make_the_norm_exact():
    """Every token's squares average exactly 64, so rstd is 1/8 in any summation order and
    the fused reference equals torch.nn.functional.rms_norm's prologue bit for bit."""
    spec = cases.KERNELS["qknorm_rope_pair"]
    for shape in spec.cpu_shapes + (SHAPE["qknorm_rope_pair"],):
        args = spec.make_inputs(shape, DEVICE, seed=5, exact=True)
        q, k = args[0], args[1]
        for x in (q, k):
            assert torch.equal(x.float().pow(2).mean(-1), torch.full(x.shape[:2], 64.0))
            assert len(torch.unique(x.abs())) > 2  # not one value: a norm of something
        fused = reference.qknorm_split_rope_pair_reference(*args)
        assert cases.outputs_equal(fused, reference.unfused_prologue(*args)), shape.label
        assert all(o.abs().max() > 0 for o in fused)


def test_the_peers_are_data_and_so_is_what_each_is_gated_against():
    pair, prologue = cases.KERNELS["split_rope_pair"], cases.KERNELS["qknorm_rope_pair"]
    assert set(pair.peers) == {"eager", "compiled", "two_launches"}
    assert set(prologue.peers) == {"eager", "unfused_eager", "unfused_compiled", "unfused_ltx2k"}
    for spec in cases.KERNELS.values():
        # every timed variant is a peer of the kernel or one of its device algorithms
        algorithms = [v for v in spec.variants if v not in spec.peers]
        assert set(spec.peers) <= set(spec.variants)
        assert variants.DEFAULT_VARIANT[spec.name] in algorithms
        assert variants.BASELINE_VARIANT[spec.name] in spec.variants
        for variant in algorithms:  # the device algorithms: the reference, bit for bit
            check = spec.gate(variant)
            assert check.against is spec.reference and check.tolerance.exact
    for variant in ("unfused_eager", "unfused_ltx2k"):
        check = prologue.gate(variant)
        assert check.against is reference.unfused_prologue and check.tolerance.exact
    check = prologue.gate("unfused_compiled")
    assert check.against is reference.unfused_prologue
    assert check.tolerance == cases.UNFUSED_COMPILED and not check.tolerance.exact
    assert prologue.gate("eager").against is reference.qknorm_split_rope_pair_reference
    for kernel, current in variants.UPSTREAM_CURRENT_VARIANT.items():
        assert current in cases.KERNELS[kernel].variants
    for kernel, roles in variants.SPEEDUP_PEERS.items():
        assert set(roles.values()) <= set(cases.KERNELS[kernel].peers)


@pytest.mark.parametrize("kernel", PAIRS)
def test_every_variant_passes_its_gate_in_the_interpreter(kernel):
    spec = cases.KERNELS[kernel]
    for shape in spec.cpu_shapes:
        for variant in spec.variants:
            if variant in variants.COMPILED_VARIANTS and DEVICE == "cpu":
                continue  # inductor's CPU backend compiles C++ for minutes
            for launch in gate.launches(kernel, variant):
                gate.check_case(kernel, variant, shape, DEVICE, launch=launch)


def _perturbed(fn, by):
    def wrong(*args):
        q_out, k_out = fn(*args)
        return by(q_out), k_out

    return wrong


def _one_bit(t: torch.Tensor) -> torch.Tensor:
    """*t* with the lowest mantissa bit of its first element flipped."""
    bits = t.contiguous().view(torch.int16).clone()
    bits.view(-1)[0] ^= 1
    return bits.view(torch.bfloat16).view(t.shape)


def test_a_device_algorithm_one_bit_off_fails_its_gate(monkeypatch):
    kernel = "qknorm_rope_pair"
    shape = cases.KERNELS[kernel].cpu_shapes[0]
    real = cases.variant_fn
    monkeypatch.setattr(cases, "variant_fn", lambda *a, **kw: _perturbed(real(*a, **kw), _one_bit))
    with pytest.raises(gate.CorrectnessError, match="not bit-identical to"):
        gate.check_case(kernel, "tiled_pdl", shape, DEVICE)
    # the exact unfused peers too
    with pytest.raises(gate.CorrectnessError, match="unfused_prologue"):
        gate.check_case(kernel, "unfused_ltx2k", shape, DEVICE)


def test_an_unfused_peer_passes_within_its_tolerance_and_fails_beyond_it(monkeypatch):
    """The compiled unfused peer stands in as the eager unfused prologue with its outputs
    moved: by one bf16 ulp where the values are below 16 it passes, by twice the bound it
    fails."""
    kernel = "qknorm_rope_pair"
    spec = cases.KERNELS[kernel]
    shape = spec.cpu_shapes[0]
    tol = cases.UNFUSED_COMPILED
    moved = {}

    def peer(by):
        return _perturbed(reference.unfused_prologue, by)

    for name, by in (
        ("within", lambda t: t + tol.atol),
        ("beyond", lambda t: t + 2 * (tol.atol + tol.rtol * t.abs())),
    ):
        moved[name] = peer(by)
    peers = dict(spec.peers)
    for name, fn in moved.items():
        peers["unfused_compiled"] = lambda spec, fn=fn: fn
        monkeypatch.setitem(cases.KERNELS, kernel, dataclasses.replace(spec, peers=peers))
        if name == "within":
            gate.check_case(kernel, "unfused_compiled", shape, DEVICE)
        else:
            with pytest.raises(gate.CorrectnessError, match="within atol=0.0625"):
                gate.check_case(kernel, "unfused_compiled", shape, DEVICE)


def test_outputs_close_needs_every_element_shape_and_dtype():
    tol = cases.Tolerance(atol=0.5, rtol=0.0)
    a = torch.ones(4, dtype=torch.bfloat16)
    assert cases.outputs_close((a, a), (a + 0.25, a), tol)
    assert not cases.outputs_close((a, a), (a + 1, a), tol)
    assert not cases.outputs_close(a, a.float(), tol)
    assert not cases.outputs_close(a, a[:3], tol)
    nan = a.clone()
    nan[1] = float("nan")
    assert not cases.outputs_close(nan, nan, tol)  # an element no program wrote
    assert cases.outputs_close(a, a, cases.EXACT) and not cases.outputs_close(a, a + 1, cases.EXACT)


def test_a_kernel_without_its_module_is_unavailable_not_an_error(monkeypatch):
    """A commit before the kernel's module (or a peer built on it) skips cleanly."""
    spec = cases.KERNELS["split_rope_pair"]
    gone = dataclasses.replace(spec, triton_module="ltx2k.kernels.no_such_module")
    monkeypatch.setitem(cases.KERNELS, "split_rope_pair", gone)
    with pytest.raises(cases.VariantUnavailable, match="no ltx2k.kernels.no_such_module"):
        cases.variant_fn("split_rope_pair", "tiled_pdl")
    with pytest.raises(cases.VariantUnavailable):  # built on the pair function
        cases.variant_fn("qknorm_rope_pair", "unfused_ltx2k")
    assert gate.launches("split_rope_pair", "row") == ("auto",)
    assert cases.variant_fn("split_rope_pair", "eager") is spec.reference


def test_two_launches_is_split_ropes_public_function_twice():
    spec = cases.KERNELS["split_rope_pair"]
    args = spec.make_inputs(SHAPE["split_rope_pair"], DEVICE, exact=True)
    q_out, k_out = cases.variant_fn("split_rope_pair", "two_launches")(*args)
    assert cases.outputs_equal(q_out, reference.split_rotary_reference(args[0], *args[2:4]))
    assert cases.outputs_equal(k_out, reference.split_rotary_reference(args[1], *args[4:6]))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("kernel", PAIRS)
def test_gpu_every_variant_passes_its_gate_at_every_gpu_shape(kernel):
    """On a GPU: the device algorithms and exact peers bit for bit at the suite's shapes,
    the compiled unfused prologue within its tolerance (measured margin:
    docs/measurement.md, "The correctness gate")."""
    spec = cases.KERNELS[kernel]
    with gate.recompiles_allowed(len(spec.gpu_shapes)):
        for shape in spec.gpu_shapes:
            for variant in spec.variants:
                for launch in gate.launches(kernel, variant):
                    gate.check_case(kernel, variant, shape, "cuda", launch=launch)
