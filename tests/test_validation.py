"""Bad input never reaches a kernel: it raises, naming the argument and what it got.

A kernel fed the wrong layout does not fail; it returns a silently wrong
tensor. So every bad input must raise ValueError (TypeError for
non-tensors) before launch, with a message that names the offending
argument and shows the actual shape/dtype/device. The table-driven tests
pin each message; the hypothesis tests check the property over random
shapes, dtypes and strides: a call either raises such an error for input
the contract rejects, or returns exactly the reference for input it accepts.
"""

from __future__ import annotations

import re

import pytest
import torch
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import ltx2k
from ltx2k import runtime
from ltx2k.kernels import _checks, adaln, rope
from ltx2k.workload import cases, reference, shapes, variants

DEVICE = runtime.device()


def rope_inputs(B, S, H, D, *, seed, exact=False, transposed=False, device=DEVICE):
    """The inputs the benchmarks and the gate use (ltx2k.workload.cases), for an ad-hoc shape."""
    shape = shapes.RopeShape(B, S, H, D)
    return cases.rope_inputs(shape, device, seed, exact=exact, transposed=transposed)


def ada_inputs(B, S, D, table_dtype, *, seed, exact=False, device=DEVICE):
    """The inputs the benchmarks and the gate use (ltx2k.workload.cases); table_dtype is
    "bf16" or "fp32"."""
    return cases.ada_inputs(shapes.AdaShape(B, S, D, table_dtype), device, seed, exact=exact)


BF16 = torch.bfloat16

# --- split RoPE: one case per rule -------------------------------------------------
# Base inputs: B=2, S=3, H=4, D=8 -> x (2, 3, 32), cos/sin (2, 4, 3, 4).


def _rope_base():
    x, cos, sin = rope_inputs(2, 3, 4, 8, seed=0, exact=True)
    return {"x": x, "cos": cos, "sin": sin}


def _zeros(*shape, dtype=BF16, device=DEVICE):
    return torch.zeros(shape, dtype=dtype, device=device)


def _padded_x(x):
    wide = _zeros(*x.shape[:-1], 2 * x.shape[-1])
    wide[..., : x.shape[-1]] = x
    return wide[..., : x.shape[-1]]


# id: (changes applied to the base inputs, exception, regexes the message must contain)
ROPE_BAD = {
    "x_not_tensor": (
        lambda a: {"x": a["x"].tolist()},
        TypeError,
        ["x must be a torch.Tensor", "list"],
    ),
    "cos_none": (lambda a: {"cos": None}, TypeError, ["cos must be a torch.Tensor", "NoneType"]),
    "sin_ndarray": (
        lambda a: {"sin": a["sin"].float().cpu().numpy()},
        TypeError,
        ["sin", "ndarray"],
    ),
    "x_rank2": (
        lambda a: {"x": a["x"].reshape(6, 32)},
        ValueError,
        ["x must be 3-D", r"\(6, 32\)"],
    ),
    "cos_rank3": (lambda a: {"cos": a["cos"][0]}, ValueError, ["cos must be 4-D", r"\(4, 3, 4\)"]),
    "sin_rank5": (
        lambda a: {"sin": a["sin"][None]},
        ValueError,
        ["sin must be 4-D", r"\(1, 2, 4, 3, 4\)"],
    ),
    "B_mismatch": (
        lambda a: {"cos": a["cos"][:1], "sin": a["sin"][:1]},
        ValueError,
        [r"cos\.shape\[0\] \(B\)", r"x\.shape\[0\]=2", r"\(1, 4, 3, 4\)"],
    ),
    "S_mismatch": (
        lambda a: {"cos": a["cos"][:, :, :2], "sin": a["sin"][:, :, :2]},
        ValueError,
        [r"cos\.shape\[2\] \(S\)", r"x\.shape\[1\]=3", r"\(2, 4, 2, 4\)"],
    ),
    "H_mismatch_divides": (  # 2 heads of D=16 would need cos.shape[3] == 8
        lambda a: {"cos": a["cos"][:, :2], "sin": a["sin"][:, :2]},
        ValueError,
        [r"cos\.shape\[3\] must be D/2 = 8", r"\(2, 2, 3, 4\)"],
    ),
    "H_mismatch_not_divides": (
        lambda a: {"cos": a["cos"][:, :3], "sin": a["sin"][:, :3]},
        ValueError,
        [r"x\.shape\[2\]=32 is not a multiple of H=cos\.shape\[1\]=3", r"\(2, 3, 32\)"],
    ),
    "odd_head_dim": (  # 4 heads of D=5
        lambda a: {
            "x": a["x"][..., :20].contiguous(),
            "cos": a["cos"][..., :2],
            "sin": a["sin"][..., :2],
        },
        ValueError,
        ["head dim D", "20/4 = 5", "odd"],
    ),
    "sin_shape_ne_cos": (
        lambda a: {"sin": a["sin"][..., :2]},
        ValueError,
        [r"sin\.shape must equal cos\.shape", r"\(2, 4, 3, 2\)", r"\(2, 4, 3, 4\)"],
    ),
    "x_fp32": (
        lambda a: {"x": a["x"].float()},
        ValueError,
        ["x must be bfloat16", "torch.float32"],
    ),
    "cos_fp16": (
        lambda a: {"cos": a["cos"].half()},
        ValueError,
        ["cos must be bfloat16", "float16"],
    ),
    "sin_fp32": (
        lambda a: {"sin": a["sin"].float()},
        ValueError,
        ["sin must be bfloat16", "float32"],
    ),
    "x_noncontiguous": (
        lambda a: {"x": _padded_x(a["x"])},
        ValueError,
        ["x must be contiguous", r"\(2, 3, 32\)", r"strides \(192, 64, 1\)"],
    ),
    "cos_last_stride_2": (
        lambda a: {"cos": a["cos"].repeat_interleave(2, -1)[..., ::2]},
        ValueError,
        ["cos must have last-dim stride 1", r"strides \(\d+, \d+, \d+, 2\)"],
    ),
    "mixed_devices": (
        lambda a: {"x": a["x"].to("meta")},
        ValueError,
        ["one device", "x on meta", f"cos on {torch.device(DEVICE)}"],
    ),
    "H_above_1024": (
        lambda a: {
            "x": _zeros(1, 1, 1025 * 2),
            "cos": _zeros(1, 1025, 1, 1),
            "sin": _zeros(1, 1025, 1, 1),
        },
        ValueError,
        [r"cos\.shape\[1\]", "H=1025", r"\[1, 1024\]"],
    ),
    "H_zero": (
        lambda a: {"x": _zeros(1, 1, 0), "cos": _zeros(1, 0, 1, 1), "sin": _zeros(1, 0, 1, 1)},
        ValueError,
        ["H=0", r"\[1, 1024\]"],
    ),
    "D_above_512": (
        lambda a: {
            "x": _zeros(1, 1, 514),
            "cos": _zeros(1, 1, 1, 257),
            "sin": _zeros(1, 1, 1, 257),
        },
        ValueError,
        ["head dim D=514", r"\[2, 512\]"],
    ),
    "D_zero": (
        lambda a: {"x": _zeros(1, 1, 0), "cos": _zeros(1, 1, 1, 0), "sin": _zeros(1, 1, 1, 0)},
        ValueError,
        ["head dim D=0", r"\[2, 512\]"],
    ),
    "variant_unknown": (
        lambda a: {"variant": "fast"},
        ValueError,
        ["variant must be one of", "'blocked'", "'fast'"],
    ),
}


@pytest.mark.parametrize("case", sorted(ROPE_BAD))
def test_rope_rejects(case, record_launch):
    change, exc, patterns = ROPE_BAD[case]
    recorder = record_launch(rope, "_split_rope_kernel")
    args = _rope_base()
    args.update(change(args))
    with pytest.raises(exc) as info:
        rope.apply_ltx2_split_rotary_emb(**args)
    for pattern in patterns:
        assert re.search(pattern, str(info.value)), f"{pattern!r} not in: {info.value}"
    assert recorder.launches == []


# --- AdaLN values9: one case per rule ----------------------------------------------
# Base inputs: D=8 -> table (9, 8) fp32, timestep (2, 3, 72).


def _ada_base():
    table, ts = ada_inputs(2, 3, 8, "fp32", seed=0, exact=True)
    return {"scale_shift_table": table, "timestep": ts}


T, TS = "scale_shift_table", "timestep"
ADA_BAD = {
    "table_not_tensor": (
        lambda a: {T: a[T].tolist()},
        TypeError,
        [f"{T} must be a torch.Tensor", "list"],
    ),
    "timestep_int": (lambda a: {TS: 3}, TypeError, [f"{TS} must be a torch.Tensor", "int"]),
    "table_rank1": (lambda a: {T: a[T].flatten()}, ValueError, [f"{T} must be 2-D", r"\(72,\)"]),
    "table_rank3": (lambda a: {T: a[T][None]}, ValueError, [f"{T} must be 2-D", r"\(1, 9, 8\)"]),
    "timestep_rank2": (lambda a: {TS: a[TS][0]}, ValueError, [f"{TS} must be 3-D", r"\(3, 72\)"]),
    "table_8_rows": (
        lambda a: {T: a[T][:8]},
        ValueError,
        [rf"{T}\.shape\[0\] must be 9", r"\(8, 8\)"],
    ),
    "timestep_last_ne_9D": (
        lambda a: {TS: a[TS][..., :64].contiguous()},
        ValueError,
        [rf"{TS}\.shape\[-1\] must be 9\*D = 72", r"\(2, 3, 64\)"],
    ),
    "table_fp16": (
        lambda a: {T: a[T].half()},
        ValueError,
        [f"{T} must be bfloat16 or float32", "float16"],
    ),
    "timestep_fp32": (
        lambda a: {TS: a[TS].float()},
        ValueError,
        [f"{TS} must be bfloat16", "float32"],
    ),
    "table_transposed": (
        lambda a: {T: a[T].t().contiguous().t()},
        ValueError,
        [f"{T} must have last-dim stride 1", r"strides \(1, 9\)"],
    ),
    "timestep_noncontiguous": (
        lambda a: {TS: _padded_x(a[TS])},
        ValueError,
        [f"{TS} must be contiguous", r"strides \(432, 144, 1\)"],
    ),
    "mixed_devices": (
        lambda a: {TS: a[TS].to("meta")},
        ValueError,
        ["one device", "timestep on meta", f"{T} on {torch.device(DEVICE)}"],
    ),
    "D_above_16384": (
        lambda a: {T: _zeros(9, 16385), TS: _zeros(1, 1, 9 * 16385)},
        ValueError,
        ["D=16385", r"\[1, 16384\]", rf"{T}\.shape\[1\]"],
    ),
    "D_zero": (
        lambda a: {T: _zeros(9, 0), TS: _zeros(1, 1, 0)},
        ValueError,
        ["D=0", r"\[1, 16384\]"],
    ),
    "variant_unknown": (
        lambda a: {"variant": "fused"},
        ValueError,
        ["variant must be one of", "'slab'", "'fused'"],
    ),
}


@pytest.mark.parametrize("case", sorted(ADA_BAD))
def test_ada_rejects(case, record_launch):
    change, exc, patterns = ADA_BAD[case]
    recorder = record_launch(adaln, "_ada_values9_kernel")
    args = _ada_base()
    args.update(change(args))
    with pytest.raises(exc) as info:
        adaln.ltx2_ada_values9(**args)
    for pattern in patterns:
        assert re.search(pattern, str(info.value)), f"{pattern!r} not in: {info.value}"
    assert recorder.launches == []


def test_cpu_tensors_rejected_outside_interpreter(monkeypatch):
    """Without TRITON_INTERPRET a CPU tensor would reach a GPU kernel: refuse it by name."""
    monkeypatch.setattr(_checks, "INTERPRET", False)
    x, cos, sin = rope_inputs(1, 2, 3, 8, seed=0, device="cpu")
    with pytest.raises(ValueError, match="x is on cpu.*CUDA"):
        rope.apply_ltx2_split_rotary_emb(x, cos, sin)
    table, ts = ada_inputs(1, 2, 8, "bf16", seed=0, device="cpu")
    with pytest.raises(ValueError, match="scale_shift_table is on cpu.*CUDA"):
        adaln.ltx2_ada_values9(table, ts)


@pytest.mark.parametrize("kernel", sorted(cases.KERNELS))
def test_zero_tensors_are_refused_by_name(kernel):
    """A ZeroTensor (torch._efficientzerotensor) has contiguous strides but no memory: its
    data_ptr() is 0, which a launch would read on the GPU (an illegal address: the CUDA
    context is lost). Each tensor argument in its place is refused, naming it."""
    spec = cases.KERNELS[kernel]
    args = spec.make_inputs(spec.cpu_shapes[0], DEVICE, seed=3, exact=True)
    positions = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
    assert len(positions) == len(spec.record_args)
    fn = cases.variant_fn(kernel, variants.DEFAULT_VARIANT[kernel])
    for i, name in zip(positions, spec.record_args, strict=True):
        zero = list(args)
        zero[i] = torch._efficientzerotensor(args[i].shape, dtype=args[i].dtype, device=DEVICE)
        with pytest.raises(TypeError, match=rf"^{name} is a ZeroTensor"):
            fn(*zero)


@pytest.mark.parametrize(
    "kernel, shape",
    [
        ("rope", (1, 1, rope.MAX_HEADS, 2)),
        ("rope", (1, 1, 1, rope.MAX_HEAD_DIM)),
        ("ada", (1, 1, 1)),
    ],
    ids=["rope_H_max", "rope_D_max", "ada_D_min"],
)
def test_limits_are_inclusive(kernel, shape, poison):
    """The edges of the supported ranges are accepted and computed (adaln's D max: test_adaln)."""
    if kernel == "rope":
        x, cos, sin = rope_inputs(*shape, seed=2, exact=True)
        out = rope.apply_ltx2_split_rotary_emb(x, cos, sin)
        assert torch.equal(out, reference.split_rotary_reference(x, cos, sin))
    else:
        table, ts = ada_inputs(*shape, "bf16", seed=2, exact=True)
        outs = adaln.ltx2_ada_values9(table, ts)
        assert all(map(torch.equal, outs, reference.ada_values9_reference(table, ts)))


# --- the property, over random shapes, dtypes and strides -----------------------------

PROPERTY = settings(
    max_examples=100,
    deadline=None,  # the interpreter's first launch of a new block shape is slow
    derandomize=True,  # same examples on every run: a CI failure reproduces locally
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
DTYPES = [BF16, torch.float32, torch.float16]


def _make(shape: list[int], dtype, layout: str, gen: torch.Generator, values) -> torch.Tensor:
    """A tensor of ``shape`` with exact values, viewed through ``layout``'s strides."""
    shape = [max(0, n) for n in shape]
    if layout == "transposed" and len(shape) >= 2:
        d0, d1 = (1, 2) if len(shape) >= 3 else (0, 1)
        stored = list(shape)
        stored[d0], stored[d1] = stored[d1], stored[d0]
        return values(stored, gen).to(device=DEVICE, dtype=dtype).transpose(d0, d1)
    if layout == "padded" and shape:  # unit last stride, not contiguous
        base = values([*shape[:-1], shape[-1] + 3], gen).to(device=DEVICE, dtype=dtype)
        return base[..., : shape[-1]]
    if layout == "strided_last" and shape:
        base = values([*shape[:-1], 2 * shape[-1]], gen).to(device=DEVICE, dtype=dtype)
        return base[..., ::2]
    return values(shape, gen).to(device=DEVICE, dtype=dtype)


def _ints(lo, hi):
    return lambda shape, gen: torch.randint(lo, hi + 1, shape, generator=gen).float()


def _trig(shape, gen):
    return torch.tensor([-2.0, -1.0, -0.5, 0.5, 1.0, 2.0])[torch.randint(6, shape, generator=gen)]


def _names_in(message: str, names) -> bool:
    return any(re.search(rf"(?<![\w.]){re.escape(n)}\b", message) for n in names)


def _describe(args: dict) -> str:
    """Shapes, strides and dtypes: what a failing example's tensor repr leaves out."""
    return ", ".join(
        f"{n}={tuple(a.shape)}/{a.stride()}/{a.dtype}"
        if isinstance(a, torch.Tensor)
        else f"{n}={a!r:.40}"
        for n, a in args.items()
    )


def _expected_error(args: dict) -> type[Exception]:
    tensors = (a for name, a in args.items() if name != "variant")
    return TypeError if any(not isinstance(a, torch.Tensor) for a in tensors) else ValueError


def _check_property(call, args: dict, problems: list[str]):
    """Raise with a named argument for rejected input; return the result otherwise."""
    error_type = _expected_error(args)
    try:
        result = call(**args)
    except (ValueError, TypeError) as e:
        event(f"rejected ({type(e).__name__})")
        assert problems, f"valid input rejected: {e!r}; {_describe(args)}"
        assert isinstance(e, error_type), f"expected {error_type.__name__}, got {e!r}"
        assert _names_in(str(e), problems), f"message names none of {problems}: {e}"
        return None
    assert not problems, f"invalid input accepted (problems: {problems}); {_describe(args)}"
    event("accepted")
    return result


# Empty inputs (B or S = 0) are valid and return empty outputs; not too often,
# since nothing is wrongly indexed in an empty tensor.
_EMPTY = st.sampled_from([False] * 9 + [True])


def _faults(draw, kinds: list[str]) -> set[str]:
    """0, 1 or 2 things to get wrong; about 40% of calls are valid and reach the kernel."""
    n = draw(st.sampled_from([0, 0, 1, 1, 2]))
    return set(draw(st.lists(st.sampled_from(kinds), min_size=n, max_size=n, unique=True)))


def _tensor(draw, name, faults, shape, values, gen, dtype=BF16, layouts=("contiguous",)):
    """One argument: right unless ``faults`` names one of its ``{name}_*`` faults."""
    if f"{name}_rank" in faults:
        shape = draw(st.sampled_from([shape[:-1], [1, *shape]]))
    if f"{name}_dtype" in faults:
        dtype = draw(st.sampled_from([d for d in DTYPES if d != dtype]))
    layout = draw(st.sampled_from(layouts))
    if f"{name}_layout" in faults:  # non-contiguous, or last-dim stride != 1
        layout = draw(st.sampled_from(["transposed", "padded", "strided_last"]))
    t = _make(shape, dtype, layout, gen, values)
    return t.tolist() if f"{name}_not_tensor" in faults else t


ROPE_FAULTS = [
    *(f"{n}_{k}" for n in ("x", "cos", "sin") for k in ("not_tensor", "rank", "dtype", "layout")),
    *("B", "S", "H", "HD", "sin_shape", "H_range", "D_range", "variant"),
]


@st.composite
def rope_calls(draw):
    """RoPE arguments of small random sizes, valid but for a few random faults."""
    faults = _faults(draw, ROPE_FAULTS)
    B, S, H, half = (draw(st.integers(lo, hi)) for lo, hi in ((1, 2), (1, 3), (1, 5), (1, 5)))
    if draw(_EMPTY):
        B, S = draw(st.sampled_from([(0, S), (B, 0)]))
    if "H_range" in faults:
        H = draw(st.sampled_from([0, rope.MAX_HEADS + 1]))
    if "D_range" in faults:
        half = draw(st.sampled_from([0, rope.MAX_HEAD_DIM // 2 + 1]))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    x_shape = [B, S, H * 2 * half + (draw(st.sampled_from([1, 2, -1])) if "HD" in faults else 0)]
    trig = [B + ("B" in faults), H + ("H" in faults), S + ("S" in faults), half]
    sin_shape = list(trig)
    if "sin_shape" in faults:
        sin_shape[draw(st.integers(0, 3))] += 1
    trig_layouts = ("contiguous", "transposed", "padded")  # all valid for cos/sin
    return {
        # a transposed or padded x is non-contiguous (rejected) unless B or S is 1
        "x": _tensor(draw, "x", faults, x_shape, _ints(-16, 16), gen, layouts=trig_layouts),
        "cos": _tensor(draw, "cos", faults, trig, _trig, gen, layouts=trig_layouts),
        "sin": _tensor(draw, "sin", faults, sin_shape, _trig, gen, layouts=trig_layouts),
        "variant": "fast"
        if "variant" in faults
        else draw(st.sampled_from(sorted(rope.ACCEPTED_VARIANTS))),
    }


def rope_problems(x, cos, sin, variant) -> list[str]:
    """The contract (rope.py docstring), restated independently of the implementation."""
    args = {"x": x, "cos": cos, "sin": sin}
    not_tensors = [n for n, t in args.items() if not isinstance(t, torch.Tensor)]
    if not_tensors:
        return not_tensors
    problems = [] if variant in rope.ACCEPTED_VARIANTS else ["variant"]
    problems += [n for n, t, r in (("x", x, 3), ("cos", cos, 4), ("sin", sin, 4)) if t.dim() != r]
    if problems:
        return problems
    problems += ["sin"] if sin.shape != cos.shape else []
    problems += [n for n, t in args.items() if t.dtype != BF16]
    problems += [] if x.is_contiguous() else ["x"]
    problems += [n for n in ("cos", "sin") if args[n].shape[-1] > 1 and args[n].stride(-1) != 1]
    B, S, HD = x.shape
    cb, H, cs, half = cos.shape
    if (cb, cs) != (B, S) or H * 2 * half != HD:
        problems += ["x", "cos", "H", "D"]
    if not 1 <= H <= rope.MAX_HEADS:
        problems += ["H"]
    if not 2 <= 2 * half <= rope.MAX_HEAD_DIM:
        problems += ["D"]
    return problems


@PROPERTY
@given(args=rope_calls())
def test_rope_property(args, poison):
    out = _check_property(rope.apply_ltx2_split_rotary_emb, args, rope_problems(**args))
    if out is not None:
        where = _describe(args)
        args.pop("variant")
        expected = reference.split_rotary_reference(**args)
        assert out.shape == expected.shape, where
        assert not out.isnan().any(), f"unwritten output elements; {where}"
        assert torch.equal(out, expected), f"wrong result; {where}"


ADA_FAULTS = [
    *(f"{n}_{k}" for n in ("table", "ts") for k in ("not_tensor", "rank", "dtype", "layout")),
    *("rows", "ts_last", "D_range", "variant"),
]


@st.composite
def ada_calls(draw):
    """AdaLN arguments of small random sizes, valid but for a few random faults."""
    faults = _faults(draw, ADA_FAULTS)
    B, S, D = draw(st.integers(1, 2)), draw(st.integers(1, 3)), draw(st.integers(1, 40))
    if draw(_EMPTY):
        B, S = draw(st.sampled_from([(0, S), (B, 0)]))
    if "D_range" in faults:
        D = draw(st.sampled_from([0, adaln.MAX_D + 1]))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    rows = 9 + (draw(st.sampled_from([-1, 1])) if "rows" in faults else 0)
    ts_last = 9 * D + (draw(st.sampled_from([1, -1])) if "ts_last" in faults else 0)
    table_dtype = draw(st.sampled_from([BF16, torch.float32]))
    table_values = lambda shape, g: _ints(-16, 16)(shape, g) / 2  # noqa: E731
    return {
        T: _tensor(draw, "table", faults, [rows, D], table_values, gen, dtype=table_dtype),
        TS: _tensor(draw, "ts", faults, [B, S, ts_last], _ints(-16, 16), gen),
        "variant": "fused"
        if "variant" in faults
        else draw(st.sampled_from(sorted(adaln.ACCEPTED_VARIANTS))),
    }


def ada_problems(scale_shift_table, timestep, variant) -> list[str]:
    """The contract (adaln.py docstring), restated independently of the implementation."""
    table, ts = scale_shift_table, timestep
    not_tensors = [n for n, t in ((T, table), (TS, ts)) if not isinstance(t, torch.Tensor)]
    if not_tensors:
        return not_tensors
    problems = [] if variant in adaln.ACCEPTED_VARIANTS else ["variant"]
    problems += [n for n, t, r in ((T, table, 2), (TS, ts, 3)) if t.dim() != r]
    if problems:
        return problems
    problems += [T] if table.shape[0] != 9 else []
    problems += [T] if table.dtype not in (BF16, torch.float32) else []
    problems += [TS] if ts.dtype != BF16 else []
    problems += [T] if table.shape[-1] > 1 and table.stride(-1) != 1 else []
    problems += [] if ts.is_contiguous() else [TS]
    D = table.shape[1]
    problems += ["D"] if not 1 <= D <= adaln.MAX_D else []
    problems += [TS, "D"] if ts.shape[-1] != 9 * D else []
    return problems


@PROPERTY
@given(args=ada_calls())
def test_ada_property(args, poison):
    outs = _check_property(adaln.ltx2_ada_values9, args, ada_problems(**args))
    if outs is not None:
        where = _describe(args)
        args.pop("variant")
        expected = reference.ada_values9_reference(**args)
        assert len(outs) == 9
        for out, exp in zip(outs, expected, strict=True):
            assert out.shape == exp.shape and out.is_contiguous(), where
            assert not out.isnan().any(), f"unwritten output elements; {where}"
            assert torch.equal(out, exp), f"wrong result; {where}"


@pytest.mark.parametrize("call", ["single", "pair", "fused"])
def test_angles_past_32_bit_offsets_inside_a_token_are_refused(call):
    """The kernels index a token's angles in 32 bits: a head-major cos/sin long enough to put
    its last head past 2**31 is refused, naming the argument; the same angles laid out
    token-major, and one token fewer than the limit, are accepted (meta tensors: no memory)."""
    H, D = 32, 128
    limit = 2**31 // ((H - 1) * (D // 2))  # tokens at which head H-1 starts past 2**31 - 1

    def run(S: int, token_major: bool = False):
        bf = torch.bfloat16
        q = torch.empty(1, S, H * D, device="meta", dtype=bf)
        if token_major:
            cos = torch.empty(1, S, H, D // 2, device="meta", dtype=bf).transpose(1, 2)
        else:
            cos = torch.empty(1, H, S, D // 2, device="meta", dtype=bf)
        w = torch.empty(H * D, device="meta", dtype=bf)
        if call == "single":
            return ltx2k.apply_ltx2_split_rotary_emb(q, cos, cos)
        if call == "pair":
            return ltx2k.apply_ltx2_split_rotary_emb_pair(q, q, cos, cos, cos, cos)
        return ltx2k.ltx2_qknorm_split_rope_pair(q, q, w, w, cos, cos, cos, cos, 1e-6)

    with pytest.raises(ValueError, match=r"cos: head 31 starts .* past the kernels' 32-bit"):
        run(limit + 1)
    run(limit + 1, token_major=True)
    run(limit - 1)


@pytest.mark.parametrize("call", ["single", "backward", "pair_q", "pair_k", "fused_q", "fused_k"])
def test_token_counts_past_32_bit_program_ids_are_refused(call):
    """The kernels number programs and tokens in 32 bits (a tiled program's first token is
    program_id * BLOCK_TOKENS): 2**30 tokens or more in an operand are refused, naming it;
    one fewer is accepted (meta tensors: no memory)."""
    bf = torch.bfloat16

    def operand(B: int, S: int):
        return (
            torch.empty(B, S, 2, device="meta", dtype=bf),
            torch.empty(B, 1, S, 1, device="meta", dtype=bf),
        )

    def run(B: int, S: int):
        x, cos = operand(B, S)
        y, y_cos = operand(B, 1)
        w = torch.empty(2, device="meta", dtype=bf)
        if call == "single":
            return ltx2k.apply_ltx2_split_rotary_emb(x, cos, cos)
        if call == "backward":
            return torch.ops.ltx2k.split_rope_backward(x, cos, cos)
        if call.endswith("_k"):  # x is k, a short q
            x, cos, y, y_cos = y, y_cos, x, cos
        if call.startswith("pair"):
            return ltx2k.apply_ltx2_split_rotary_emb_pair(x, y, cos, cos, y_cos, y_cos)
        return ltx2k.ltx2_qknorm_split_rope_pair(x, y, w, w, cos, cos, y_cos, y_cos, 1e-6)

    name = {"single": "x", "backward": "grad"}.get(call, call[-1])
    pattern = rf"token count \({name}\.shape\[0\] \* {name}\.shape\[1\]\) B\*S=1073741824 "
    with pytest.raises(ValueError, match=pattern):
        run(2, 2**29)
    run(1, 2**30 - 1)


def test_adaln_table_rows_past_32_bit_offsets_are_refused():
    """AdaLN's kernels offset the table's row as ``value * stride(0)`` in 32 bits: a [9, D]
    view of a buffer so wide that row 8 starts past 2**31 is refused, naming the table; the
    widest stride that keeps row 8 inside is accepted (meta tensors: no memory)."""
    D = 64
    ts = torch.empty(1, 1, 9 * D, device="meta", dtype=torch.bfloat16)

    def run(width: int):
        big = torch.empty(9, width, device="meta", dtype=torch.bfloat16)
        return ltx2k.ltx2_ada_values9(big[:, :D], ts)

    fits = (2**31 - 1 - (D - 1)) // 8  # row 8's last element at 2**31 - 1 exactly
    run(fits)
    with pytest.raises(ValueError, match=r"^scale_shift_table: row 8 starts .* 32-bit row"):
        run(fits + 1)
