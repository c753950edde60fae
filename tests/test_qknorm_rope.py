"""The attention prologue in one launch (ltx2k.kernels.qknorm_rope) vs. the eager reference.

As tests/test_rope_pair.py for the pair: bit-exactness on exact inputs through every
variant and the "triton" and "lean" launch paths, a random-input check bounded by the
interpreter's rounding mode, mutation tests, the shared mode by identity, validation
(the weights and eps too) and the registered op; the export of a module calling both
public functions is here. The ``gpu`` tests at the bottom add random inputs at LTX-2's
shapes through every launch path with the native replays, opcheck and gradients on
CUDA, torch.compile and CUDA graphs of both functions, and an ``nn.Parameter`` weight
under inference mode on the native path.

Exact inputs for the norm: every element of a token is ``±2**m`` with ``m`` in 3..6
drawn per token, so its mean square is ``4**m`` (``+ 1e-6`` rounds back to it in fp32,
eps being below half its ulp), rstd is ``2**-m`` exactly and the normalized value is the
weight's sign-flipped; weights and cos/sin in {±0.5, ±1, ±2} keep split RoPE of it exact
in bf16, whichever rounding mode. A kernel that normalizes a token by another token's
rstd (or q by k's) is off by a power of two.
"""

from __future__ import annotations

import math

import pytest
import torch
import triton
from torch.library import opcheck

from ltx2k import runtime
from ltx2k.kernels import qknorm_rope, rope_pair
from ltx2k.workload import cases, reference, shapes
from tests.test_rope import assert_bitexact, bf16_ulp, padded_token_major
from tests.test_rope_pair import bad_operand_cases, case_id

DEVICE = runtime.device()
HEAD_MAJOR = "head_major"
EPS = cases.QK_NORM_EPS
SEPARATE, SHARED, ROW = qknorm_rope.SEPARATE, qknorm_rope.SHARED, qknorm_rope.ROW
VARIANTS = sorted(qknorm_rope.ACCEPTED_VARIANTS)
TILED_VARIANTS = [v for v in VARIANTS if v != "row"]
CALLS = sorted((v, launch) for v, launch in qknorm_rope.CALLS if launch in ("triton", "lean"))
NAMES = ("q", "k", "q_weight", "k_weight", "q_cos", "q_sin", "k_cos", "k_sin")
Shape = shapes.QKNormPairShape

# As tests/test_rope_pair.py's SHAPES, two of them with fp32 weights.
SHAPES = [
    Shape(1, 4, 4, 3, 16, shared=True),
    Shape(2, 3, 5, 17, 12, HEAD_MAJOR),
    Shape(1, 9, 7, 5, 64, weight_dtype="fp32"),
    Shape(2, 1, 3, 3, 6, HEAD_MAJOR),
    Shape(1, 3, 1, 3, 16),
    Shape(1, 1, 1, 17, 8, shared=True),
    Shape(2, 8, 8, 5, 10, HEAD_MAJOR, shared=True, weight_dtype="fp32"),
]
WIDE_TILES = [Shape(1, 37, 27, 2, 8), Shape(1, 32, 32, 2, 8, shared=True)]
# (mode, block_tokens, q_programs, k_programs) of "tiled" on one SM: two tokens a
# program from 15 tokens on (the grid keeps 8 programs).
TILED_IN_INTERPRETER = {
    SHAPES[0]: (SHARED, 1, 4, 0),
    SHAPES[1]: (SEPARATE, 2, 3, 5),
    SHAPES[2]: (SEPARATE, 2, 5, 4),
    SHAPES[3]: (SEPARATE, 1, 2, 6),
    SHAPES[4]: (SEPARATE, 1, 3, 1),
    SHAPES[5]: (SHARED, 1, 1, 0),
    SHAPES[6]: (SHARED, 2, 8, 0),
    WIDE_TILES[0]: (SEPARATE, 8, 5, 4),
    WIDE_TILES[1]: (SHARED, 4, 8, 0),
}
_WEIGHT_DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32}


def label(shape) -> str:
    return shape.label


def norm_inputs(shape, *, seed, exact=True, device=DEVICE):
    """(q, k, q_weight, k_weight, q_cos, q_sin, k_cos, k_sin): exact values as the module
    docstring says, or the benchmarks' random ones. With a shared shape, k_cos is q_cos
    and k_sin is q_sin."""
    if not exact:
        return cases.qknorm_pair_inputs(shape, device, seed, exact=False)[:8]
    pair = shapes.PairShape(
        shape.B, shape.Sq, shape.Sk, shape.H, shape.D, shape.layout, shape.shared
    )
    _, _, q_cos, q_sin, k_cos, k_sin = cases.pair_inputs(pair, device, seed, exact=True)
    gen = torch.Generator().manual_seed(seed)
    hidden = shape.H * shape.D

    def tokens(S):
        m = torch.randint(3, 7, (shape.B, S, 1), generator=gen)
        sign = torch.randint(0, 2, (shape.B, S, hidden), generator=gen) * 2 - 1
        return (sign * torch.exp2(m.float())).to(torch.bfloat16).to(device)

    values = torch.tensor([-2.0, -1.0, -0.5, 0.5, 1.0, 2.0])
    dtype = _WEIGHT_DTYPES[shape.weight_dtype]
    q_weight, k_weight = (
        values[torch.randint(0, 6, (hidden,), generator=gen)].to(device, dtype) for _ in range(2)
    )
    return tokens(shape.Sq), tokens(shape.Sk), q_weight, k_weight, q_cos, q_sin, k_cos, k_sin


def config(variant: str, shape, num_sms: int):
    algo = qknorm_rope.CALLS[(variant, "auto")][0]
    return qknorm_rope.ALGORITHMS[algo](
        shape.H, shape.D, shape.B * shape.Sq, shape.B * shape.Sk, num_sms, shape.shared
    )


def run(args, variant: str, launch: str = "triton", eps: float = EPS):
    return qknorm_rope.ltx2_qknorm_split_rope_pair(*args, eps, variant=variant, launch=launch)


def want(args, eps: float = EPS):
    return reference.qknorm_split_rope_pair_reference(*args, eps)


def check_exact(args, variant: str, launch: str = "triton") -> None:
    """The bit-exactness check every exact-input test (and every mutant) goes through."""
    before = [t.clone() for t in args]
    for out, ref in zip(run(args, variant, launch), want(args), strict=True):
        assert_bitexact(out, ref)
    for t, t0 in zip(args, before, strict=True):
        assert torch.equal(t, t0), "kernel modified an input"


def _halves(t, H: int):
    """[B, S, H*D] as [B, S, H, 2, D/2]: the split halves of each head."""
    return t.reshape(*t.shape[:2], H, 2, -1)


def check_within_rounding(args, variant: str, launch: str = "triton") -> None:
    """Random inputs. The interpreter truncates where the reference rounds to nearest:
    the normalized value ``y`` can be one of its ulps off (the norm's fp32 arithmetic is
    the reference's, in the same order), and split RoPE of it adds what
    tests/test_rope_pair.py's check allows. Per element of an output half:
    ``2 * ((|cos| + |sin|) * max ulp(y of the two halves) + ulp(cos term) + ulp(out))``
    (doubled: each ulp is measured at the reference's value, which may sit a binade
    below the kernel's). On a GPU the difference is exactly zero."""
    q, k, q_weight, k_weight, q_cos, q_sin, k_cos, k_sin = args
    H = q_cos.shape[1]
    outs = run(args, variant, launch)
    for name, out, (x, w, cos, sin) in zip(
        ("q_out", "k_out"), outs, ((q, q_weight, q_cos, q_sin), (k, k_weight, k_cos, k_sin)),
        strict=True,
    ):  # fmt: skip
        assert not out.isnan().any(), f"{name}: output elements never written (NaN poison survived)"
        y = reference.rms_norm_reference(x, w, EPS, H)
        expected = reference.split_rotary_reference(y, cos, sin)
        cos_term = reference.split_rotary_reference(y, cos, torch.zeros_like(sin))
        u = _halves(bf16_ulp(y), H).amax(dim=3, keepdim=True)  # [B, S, H, 1, D/2]
        c, s = (t.transpose(1, 2).unsqueeze(3).float().abs() for t in (cos, sin))
        from_y = ((c + s) * u).expand(*u.shape[:3], 2, u.shape[-1]).reshape(out.shape)
        tol = 2 * (from_y + bf16_ulp(cos_term) + bf16_ulp(expected))
        err = (out.float() - expected.float()).abs()
        bad = err > tol
        assert not bad.any(), (
            f"{name}: {int(bad.sum())} elements beyond the rounding-mode bound; "
            f"worst error {err.max().item()} at {tuple(bad.nonzero()[0].tolist())}"
        )


def _equal(a, b) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and torch.equal(a, b)


# --- the inputs and the configurations they reach ---------------------------------


@pytest.mark.parametrize("shape", [SHAPES[1], SHAPES[6]], ids=label)
def test_exact_inputs_never_round(shape):
    """The premise of the bit-exact tests: each token's rstd is 2**-m exactly, so the
    normalized values are ± the weight, and the outputs are fp64 math; the tokens' scales
    differ, so another token's rstd would change them."""
    args = norm_inputs(shape, seed=1)
    H = shape.H
    for x, w, cos, sin, out in zip(
        args[:2], args[2:4], args[4::2], args[5::2], want(args), strict=True
    ):
        y = reference.rms_norm_reference(x, w, EPS, H)
        assert torch.equal(y.double(), torch.sign(x.double()) * w.double())
        scales = x.double().abs().amax(-1).flatten()
        assert scales.unique().numel() > 1
        assert (scales == x.double().abs().amin(-1).flatten()).all()
        yd = _halves(y.double(), H)
        c, s = cos.double().transpose(1, 2), sin.double().transpose(1, 2)
        y1, y2 = yd[..., 0, :], yd[..., 1, :]
        exact = torch.stack([y1 * c - y2 * s, y2 * c + y1 * s], dim=-2).reshape(out.shape)
        assert torch.equal(out.double(), exact)
    assert not torch.equal(args[2], args[3])  # q's and k's weights differ


@pytest.mark.parametrize("shape", SHAPES + WIDE_TILES, ids=label)
def test_tiled_configuration_in_the_interpreter(shape):
    cfg = config("tiled", shape, 1)
    assert (cfg.mode, cfg.block_tokens, cfg.q_programs, cfg.k_programs) == (
        TILED_IN_INTERPRETER[shape]
    )
    assert config("tiled_pdl", shape, 1) == cfg._replace(pdl=True)
    row = config("row", shape, 1)
    assert (row.mode, row.block_tokens, row.k_programs) == (ROW, 1, 0)
    assert row.q_programs == shape.B * max(shape.Sq, shape.Sk)


@pytest.mark.parametrize(
    "H, D, tokens, shared, warps",
    [
        (32, 128, 6144, True, 8),  # video: one token of 4096 a program, a full tile
        (32, 128, 1, True, 8),
        (32, 64, 100, True, 4),  # audio below ~1k tokens: one token of 2048, half a tile
        (32, 64, 252, True, 4),
        (32, 64, 3072, False, 8),  # two tokens a program: a full tile again
    ],
)
def test_warps_follow_the_tile_at_the_production_hidden_sizes(H, D, tokens, shared, warps):
    """The H100 measurement behind ELEMENTS_PER_THREAD (docs/kernels/attention_prologue.md,
    "Warps at hidden 2048"): a one-token program at hidden 2048 at 4 warps, a full tile at 8."""
    cfg = qknorm_rope._tiled(H, D, tokens, tokens, 132, shared)
    assert cfg.num_warps == warps
    assert cfg.block_tokens * triton.next_power_of_2(H) * D // 2 <= qknorm_rope.TILE_ELEMENTS


def test_the_shapes_reach_every_branch_of_tiled():
    cfgs = [config("tiled", s, 1) for s in SHAPES]
    assert any(c.mode == SEPARATE and c.block_tokens > 1 for c in cfgs)
    assert any(c.mode == SHARED and c.block_tokens > 1 for c in cfgs)
    assert {s.weight_dtype for s in SHAPES} == {"bf16", "fp32"}


@pytest.mark.parametrize(
    "H, D, warps", [(32, 128, 4), (16, 256, 4), (64, 128, 4), (32, 64, 8), (31, 128, 8)]
)
def test_row_takes_upstreams_warps(H, D, warps):
    """The "row" algorithm is sglang's launch as written upstream: 4 warps at a hidden size
    H*D of 4096 and over, else 8 (the module docstring)."""
    for tokens in (1, 6144):
        assert qknorm_rope._row(H, D, tokens, tokens, 132, True).num_warps == warps


# --- correctness ------------------------------------------------------------------------


def _assert_launched_as(recorder, variant: str, shape) -> None:
    cfg = config(variant, shape, rope_pair._num_sms(torch.device(DEVICE)))
    [(grid, meta)] = recorder.launches
    assert grid == (cfg.q_programs + cfg.k_programs,)
    assert (meta["MODE"], meta["BLOCK_TOKENS"]) == (cfg.mode, cfg.block_tokens)
    assert meta["num_warps"] == cfg.num_warps and meta["EPS"] == EPS


@pytest.mark.parametrize("shape", SHAPES, ids=label)
@pytest.mark.parametrize("variant, launch", CALLS)
def test_bitexact_on_exact_inputs(variant, launch, shape, poison, record_launch):
    recorder = record_launch(qknorm_rope, "_qknorm_rope_pair_kernel")
    check_exact(norm_inputs(shape, seed=shape.Sq + 7 * shape.Sk), variant, launch)
    assert poison.calls == 2  # both outputs really were NaN-poisoned
    _assert_launched_as(recorder, variant, shape)


@pytest.mark.parametrize("shape", WIDE_TILES, ids=label)
@pytest.mark.parametrize("variant, launch", [c for c in CALLS if c[0] != "row"])
def test_bitexact_with_wide_tiles(variant, launch, shape, poison, record_launch):
    recorder = record_launch(qknorm_rope, "_qknorm_rope_pair_kernel")
    check_exact(norm_inputs(shape, seed=3), variant, launch)
    assert poison.calls == 2
    _assert_launched_as(recorder, variant, shape)


@pytest.mark.parametrize(
    "shape",
    [Shape(2, 5, 3, 17, 12), Shape(1, 16, 16, 5, 64, HEAD_MAJOR, shared=True, weight_dtype="fp32")],
    ids=label,
)
@pytest.mark.parametrize("variant", VARIANTS)
def test_random_inputs_within_rounding_mode_difference(variant, shape, poison):
    check_within_rounding(norm_inputs(shape, seed=7, exact=False), variant)
    assert poison.calls == 2


@pytest.mark.parametrize("variant", VARIANTS)
def test_cos_sin_views_and_batch_broadcast(variant):
    B, Sq, Sk, H, D = 2, 3, 4, 5, 12
    q, k, qw, kw, q_cos, q_sin, k_cos, k_sin = norm_inputs(Shape(B, Sq, Sk, H, D), seed=4)
    padded = []
    for t in (q_cos, q_sin):
        pad = torch.full((B, H + 2, Sq + 1, D), 99.0, dtype=torch.bfloat16, device=DEVICE)
        pad[:, 1 : H + 1, :Sq, : D // 2] = t
        padded.append(pad[:, 1 : H + 1, :Sq, : D // 2])
    k_cos_b, k_sin_b = (t[:1].expand(B, -1, -1, -1) for t in (k_cos, k_sin))
    assert not padded[0].is_contiguous() and k_cos_b.stride(0) == 0
    check_exact((q, k, qw, kw, *padded, k_cos_b, k_sin_b), variant)


@pytest.mark.parametrize("variant", VARIANTS)
def test_cos_and_sin_read_through_their_own_strides(variant, poison):
    """Each sin in a layout unlike its cos (tests/test_rope.py's padded_token_major), and
    the reverse, with separate angles (Sq != Sk) and shared ones: a kernel or launcher that
    reads one through the other's strides reads other angles or padding."""
    q, k, qw, kw, q_cos, q_sin, k_cos, k_sin = norm_inputs(
        Shape(2, 5, 3, 5, 12, HEAD_MAJOR), seed=15
    )
    odd = padded_token_major
    check_exact((q, k, qw, kw, q_cos, odd(q_sin), k_cos, odd(k_sin)), variant)
    check_exact((q, k, qw, kw, odd(q_cos), q_sin, odd(k_cos), k_sin), variant)
    shared = Shape(2, 8, 8, 5, 12, HEAD_MAJOR, shared=True)
    q, k, qw, kw, cos, sin, _, _ = norm_inputs(shared, seed=16)
    odd_sin = odd(sin)
    check_exact((q, k, qw, kw, cos, odd_sin, cos, odd_sin), variant)
    assert poison.calls == 6


@pytest.mark.parametrize("shape", [SHAPES[1], SHAPES[5], WIDE_TILES[0]], ids=label)
@pytest.mark.parametrize("variant", VARIANTS)
def test_stores_stay_inside_the_outputs(variant, shape, guarded):
    """As tests/test_rope_pair.py's: partial head blocks and half dims, partial last tiles;
    nothing is stored outside either output."""
    check_exact(norm_inputs(shape, seed=24), variant)
    assert guarded.calls == 2
    guarded.check()


@pytest.mark.parametrize("shared", [False, True], ids=["separate", "shared"])
@pytest.mark.parametrize("variant", VARIANTS)
def test_sum_of_squares_in_the_reference_order(variant, shared, poison):
    """The norm's sum is the reference's pairwise tree over adjacent elements, not another
    order. One head of D = 8: the sums of squares s = x1**2 + x2**2 are, in fp32,
    [2**26 + 16, 2**26, 2**-3, 2**2 + 2**-4]. The reference's
    (s0 + s1) + (s2 + s3) absorbs the small ones: 2**27 + 16, so rstd is 2**-12 and every
    normalized value x * 2**-12 * w is exact. Pairing s0 with s2 and s1 with s3 (a tree over
    halves) gives 2**27 + 32, an rstd one fp32 ulp smaller, and normalized values just under
    the exact ones: one bf16 ulp smaller under the interpreter's truncation. (A GPU rounds
    them back up, so there only the random-input GPU tests tell the orders apart.) sin = 0
    and cos = ±1, so each output is ± a normalized value, exactly."""
    B, Sq, H, D = 1, 3, 1, 8
    Sk = Sq if shared else 2
    gen = torch.Generator().manual_seed(19)
    exponents = torch.tensor([2, 13, -2, -2, 13, -3, -2, 1])  # x1 then x2 of the head

    def tokens(S):
        sign = torch.randint(0, 2, (B, S, D), generator=gen) * 2 - 1
        return (sign * torch.exp2(exponents.float())).to(DEVICE, torch.bfloat16)

    def angles(S):
        cos = torch.randint(0, 2, (B, H, S, D // 2), generator=gen) * 2.0 - 1
        cos = cos.to(DEVICE, torch.bfloat16)
        return cos, torch.zeros_like(cos)

    values = torch.tensor([-2.0, -1.0, -0.5, 0.5, 1.0, 2.0])
    qw, kw = (values[torch.randint(0, 6, (D,), generator=gen)].to(DEVICE) for _ in range(2))
    q, k = tokens(Sq), tokens(Sk)
    q_cos, q_sin = angles(Sq)
    k_cos, k_sin = (q_cos, q_sin) if shared else angles(Sk)
    args = (q, k, qw.to(torch.bfloat16), kw.to(torch.bfloat16), q_cos, q_sin, k_cos, k_sin)
    # the premise: the reference's order and the other one differ, and the former is exact
    s = torch.exp2(exponents[:4].float() * 2) + torch.exp2(exponents[4:].float() * 2)
    assert float((s[0] + s[2]) + (s[1] + s[3])) == 2**27 + 32
    assert reference.sum_of_squares_reference(q, H).eq(2**27 + 16).all()
    y = reference.rms_norm_reference(q, args[2], EPS, H)
    assert torch.equal(y.double(), q.double() * 2**-12 * qw.double())
    check_exact(args, variant)
    assert poison.calls == 2


@pytest.mark.filterwarnings("error:divide by zero:RuntimeWarning")
@pytest.mark.parametrize("Sq, Sk", [(0, 3), (3, 0), (0, 0)])
@pytest.mark.parametrize("variant", VARIANTS)
def test_empty_q_or_k(variant, Sq, Sk, poison, record_launch):
    recorder = record_launch(qknorm_rope, "_qknorm_rope_pair_kernel")
    check_exact(norm_inputs(Shape(2, Sq, Sk, 3, 8), seed=5), variant)
    assert len(recorder.launches) == (0 if Sq == Sk == 0 else 1)


@pytest.mark.parametrize("eps", [1e-5, 192.0])
def test_eps_is_the_callers(eps, record_launch):
    """eps is compiled in: another value, another binary, the reference's bits. Every
    element here is ±8: 1e-5 is absorbed by the mean square 64, and 192 makes it 256
    (rstd 1/16 instead of 1/8, exact still), which halves every normalized value."""
    recorder = record_launch(qknorm_rope, "_qknorm_rope_pair_kernel")
    args = list(norm_inputs(Shape(1, 2, 3, 2, 8), seed=6))
    args[0], args[1] = (torch.sign(x) * 8 for x in args[:2])
    outs = run(args, "tiled", eps=eps)
    for out, ref in zip(outs, want(args, eps), strict=True):
        assert_bitexact(out, ref)
    assert recorder.launches[0][1]["EPS"] == eps
    assert _equal(outs[0], want(args)[0]) == (eps < 1)


def test_default_variant_is_tiled_pdl(record_launch):
    recorder = record_launch(qknorm_rope, "_qknorm_rope_pair_kernel")
    args = norm_inputs(SHAPES[2], seed=0)
    outs = qknorm_rope.ltx2_qknorm_split_rope_pair(*args)
    assert all(map(_equal, outs, want(args)))
    _assert_launched_as(recorder, "tiled_pdl", SHAPES[2])


# --- shared cos/sin: by identity ----------------------------------------------------------


@pytest.mark.parametrize("variant", VARIANTS)
def test_shared_angles_by_identity(variant, record_launch):
    """The very same cos/sin tensors for q and k launch the shared mode; equal values in
    other tensors, or only cos shared, the separate mode ("row" has its own). The same bits."""
    recorder = record_launch(qknorm_rope, "_qknorm_rope_pair_kernel")
    shape = SHAPES[6]
    q, k, qw, kw, cos, sin, k_cos, k_sin = norm_inputs(shape, seed=9)
    assert k_cos is cos and k_sin is sin
    calls = {
        "shared": (q, k, qw, kw, cos, sin, cos, sin),
        "equal": (q, k, qw, kw, cos, sin, cos.clone(), sin.clone()),
        "cos only": (q, k, qw, kw, cos, sin, cos, sin.clone()),
    }
    ref = want(calls["shared"])
    for name, args in calls.items():
        assert all(map(_equal, run(args, variant), ref)), name
    modes = [meta["MODE"] for _, meta in recorder.launches]
    grids = [grid for grid, _ in recorder.launches]
    if variant == "row":
        assert modes == [ROW] * 3
        return
    assert modes == [SHARED, SEPARATE, SEPARATE]
    sms = rope_pair._num_sms(torch.device(DEVICE))
    tokens = shape.B * shape.Sq
    one, two = (qknorm_rope._tiled(shape.H, shape.D, tokens, tokens, sms, sh) for sh in (1, 0))
    assert grids[0] == (one.q_programs,) and one.k_programs == 0
    assert grids[1] == (two.q_programs + two.k_programs,)


# --- mutation tests: the checks above fail for a wrongly indexed launch ---------------

ARGS = (
    *("q", "k", "q_weight", "k_weight", "q_cos", "q_sin", "k_cos", "k_sin", "q_out", "k_out"),
    *("Sq", "Sk", "H", "HALF", "q_tokens", "k_tokens", "q_programs"),
    *("qcb", "qch", "qcs", "qsb", "qsh", "qss", "kcb", "kch", "kcs", "ksb", "ksh", "kss"),
)


def _named(args) -> dict:
    return dict(zip(ARGS, args, strict=True))


def _with(args, **changes) -> tuple:
    named = _named(args)
    named.update(changes)
    return tuple(named[a] for a in ARGS)


def _q_programs_short(grid, args, kw):
    return grid, _with(args, q_programs=_named(args)["q_programs"] - 1), kw


def _q_programs_long(grid, args, kw):
    return grid, _with(args, q_programs=_named(args)["q_programs"] + 1), kw


def _block_tokens_halved(grid, args, kw):
    return grid, args, {**kw, "BLOCK_TOKENS": kw["BLOCK_TOKENS"] // 2}


def _mode_changed(grid, args, kw):
    mode = {SEPARATE: SHARED, SHARED: SEPARATE, ROW: SEPARATE}[kw["MODE"]]
    return grid, args, {**kw, "MODE": mode}


def _weights_swapped(grid, args, kw):
    n = _named(args)
    return grid, _with(args, q_weight=n["k_weight"], k_weight=n["q_weight"]), kw


def _k_rotated_by_q_angles(grid, args, kw):
    n = _named(args)
    return grid, _with(args, k_cos=n["q_cos"], k_sin=n["q_sin"]), kw


def _batch_stride_ignored(grid, args, kw):
    return grid, _with(args, qcb=0, qsb=0, kcb=0, ksb=0), kw


def _view_strides_ignored(grid, args, kw):
    n = _named(args)
    changes = {}
    for prefix, t in (("qc", "q_cos"), ("qs", "q_sin"), ("kc", "k_cos"), ("ks", "k_sin")):
        _, H, S, half = n[t].shape
        changes.update({f"{prefix}b": H * S * half, f"{prefix}h": S * half, f"{prefix}s": half})
    return grid, _with(args, **changes), kw


def _last_head_missed(grid, args, kw):
    return grid, _with(args, H=_named(args)["H"] - 1), kw


def _last_q_token_missed(grid, args, kw):
    return grid, _with(args, q_tokens=_named(args)["q_tokens"] - 1), kw


def _last_k_token_missed(grid, args, kw):
    return grid, _with(args, k_tokens=_named(args)["k_tokens"] - 1), kw


SAME_LENGTH = Shape(1, 3, 3, 3, 8, HEAD_MAJOR)  # separate cos/sin, Sq == Sk
MUTANTS = {
    # name: (mutate, shape, variants)
    "q_programs_short": (_q_programs_short, Shape(1, 2, 3, 3, 8), TILED_VARIANTS),
    "q_programs_long": (_q_programs_long, Shape(1, 2, 3, 3, 8), TILED_VARIANTS),
    "block_tokens_halved": (_block_tokens_halved, SHAPES[2], TILED_VARIANTS),
    "mode_changed": (_mode_changed, SAME_LENGTH, VARIANTS),
    "shared_mode_changed": (_mode_changed, Shape(1, 3, 3, 3, 8, shared=True), TILED_VARIANTS),
    "weights_swapped": (_weights_swapped, SAME_LENGTH, VARIANTS),
    "k_rotated_by_q_angles": (_k_rotated_by_q_angles, SAME_LENGTH, VARIANTS),
    "batch_stride_ignored": (_batch_stride_ignored, Shape(2, 2, 1, 3, 8), VARIANTS),
    "view_strides_ignored": (_view_strides_ignored, Shape(1, 3, 4, 3, 8), VARIANTS),
    "last_head_missed": (_last_head_missed, Shape(1, 2, 3, 5, 8), VARIANTS),
    "last_q_token_missed": (_last_q_token_missed, Shape(1, 2, 3, 3, 8), VARIANTS),
    "last_k_token_missed": (_last_k_token_missed, Shape(1, 3, 2, 3, 8), VARIANTS),
}
CHECKS = {"exact": check_exact, "within_rounding": check_within_rounding}
CHECK_FAILED = "never written|not equal|beyond the rounding-mode bound"
MUTANT_CASES = [
    (variant, mutant, check)
    for mutant, (_, _, variants) in sorted(MUTANTS.items())
    for variant in variants
    for check in sorted(CHECKS)
]


@pytest.mark.parametrize("variant, mutant, check", MUTANT_CASES)
def test_checks_catch_mutant_launch(variant, mutant, check, poison, record_launch):
    mutate, shape, _ = MUTANTS[mutant]
    sms = rope_pair._num_sms(torch.device(DEVICE))
    if mutant == "block_tokens_halved" and config(variant, shape, sms).block_tokens == 1:
        pytest.skip("one token per program on this device's grid")
    recorder = record_launch(qknorm_rope, "_qknorm_rope_pair_kernel", mutate=mutate)
    args = norm_inputs(shape, seed=11, exact=check == "exact")
    with pytest.raises(AssertionError, match=CHECK_FAILED):
        CHECKS[check](args, variant)
    assert len(recorder.launches) == 1  # the mutant really ran


def test_rstd_of_another_token_is_caught():
    """The exact inputs' point: normalizing by the wrong token's (or operand's) rstd
    changes bits, as the norm's reference computed with rolled scales shows."""
    args = norm_inputs(SHAPES[1], seed=12)
    q, w = args[0], args[2]
    H = SHAPES[1].H
    rstd = torch.rsqrt(reference.sum_of_squares_reference(q, H) / q.shape[-1])
    wrong = ((q.float() * rstd.roll(1, dims=1)) * w.float()).to(torch.bfloat16)
    assert not torch.equal(wrong, reference.rms_norm_reference(q, w, EPS, H))


# --- validation: errors name the argument -----------------------------------------------

VALID = Shape(1, 2, 3, 2, 8, HEAD_MAJOR)


def _call(**changes):
    args = dict(zip(NAMES, norm_inputs(VALID, seed=1), strict=True))
    eps = changes.pop("eps", EPS)
    args.update(changes)
    return qknorm_rope.ltx2_qknorm_split_rope_pair(**args, eps=eps)


@pytest.mark.parametrize("case", bad_operand_cases(), ids=case_id)
def test_bad_operand_named(case):
    name, make_bad, error, match = case
    good = dict(zip(NAMES, norm_inputs(VALID, seed=1), strict=True))
    with pytest.raises(error, match=match):
        _call(**{name: make_bad(good[name])})


def _float16(w):
    return w.half()


def _two_dims(w):
    return w.view(2, -1)


def _one_short(w):
    return w[:-1]


def _strided(w):
    return torch.stack([w, w], dim=1)[:, 0]


def _as_list(w):
    return w.tolist()


WEIGHT_CASES = [
    (_float16, ValueError, "must be bfloat16 or float32, got torch.float16"),
    (_two_dims, ValueError, r"must be 1-D \[H\*D\] = \[16\], got shape \(2, 8\)"),
    (_one_short, ValueError, r"must have H\*D = 16 elements .* got shape \(15,\)"),
    (_strided, ValueError, "must be contiguous"),
    (_as_list, TypeError, "must be a torch.Tensor, got list"),
]


@pytest.mark.parametrize("case", WEIGHT_CASES, ids=lambda c: c[0].__name__.strip("_"))
@pytest.mark.parametrize("name", ["q_weight", "k_weight"])
def test_bad_weight_named(name, case):
    make_bad, error, match = case
    good = dict(zip(NAMES, norm_inputs(VALID, seed=1), strict=True))
    with pytest.raises(error, match=rf"^{name} {match}"):
        _call(**{name: make_bad(good[name])})


def test_q_k_mismatch_named():
    q_args = norm_inputs(VALID, seed=2)
    for k_shape, match in (
        (Shape(2, 2, 3, 2, 8), r"^k\.shape\[0\] \(B\) must equal q\.shape\[0\]=1"),
        (Shape(1, 2, 3, 4, 4), r"^k's heads and head dim \(H=4, D=4, from k_cos"),
        (Shape(1, 2, 3, 2, 4), r"^k's heads and head dim \(H=2, D=4, from k_cos"),
    ):
        k_args = norm_inputs(k_shape, seed=3)
        args = (q_args[0], k_args[1], *q_args[2:6], *k_args[6:8])
        with pytest.raises(ValueError, match=match):
            qknorm_rope.ltx2_qknorm_split_rope_pair(*args)


BAD_EPS = [
    (-1e-6, ValueError, r"^eps must be a finite positive float, got -1e-06"),
    (0.0, ValueError, r"^eps must be a finite positive float, got 0\.0"),
    (math.nan, ValueError, r"^eps must be a finite positive float, got nan"),
    (math.inf, ValueError, r"^eps must be a finite positive float, got inf"),
    ("1e-6", TypeError, r"^eps must be a float, got str"),
    (True, TypeError, r"^eps must be a float, got bool"),
    (None, TypeError, r"^eps must be a float, got NoneType"),
]


BAD_EPS += [
    (10**400, ValueError, r"^eps must be a finite positive float, got an int of 1329 bits"),
    # float32 rounds these to a subnormal, to 0 and to inf: not the eps asked for
    (1e-40, ValueError, r"^eps must lie in float32's normal range \[1\.17549e-38, .*got 1e-40$"),
    (1e-50, ValueError, r"^eps must lie in float32's normal range .*got 1e-50$"),
    (1e39, ValueError, r"^eps must lie in float32's normal range .*3\.40282e\+38\] .*got 1e\+39$"),
    (10**39, ValueError, r"^eps must lie in float32's normal range .*got 10{39}$"),
    (torch.tensor(1e-6), TypeError, r"^eps must be a float, got Tensor"),
]


@pytest.mark.parametrize("eps, error, match", BAD_EPS, ids=repr)
@pytest.mark.parametrize("route", ["plain", "autograd"])
def test_bad_eps_named(eps, error, match, route):
    """Named on every path: the autograd one too (the op's schema would take a bool as 1.0
    and a numeric string as its float)."""
    changes = {"eps": eps}
    if route == "autograd":  # a norm weight as a model holds it: the call goes to the op
        weight = norm_inputs(VALID, seed=1)[2]
        changes["q_weight"] = torch.nn.Parameter(weight.clone())
    with pytest.raises(error, match=match):
        _call(**changes)


@pytest.mark.parametrize("eps", [torch.finfo(torch.float32).tiny, torch.finfo(torch.float32).max])
def test_eps_range_edges_taken(eps):
    """float32's smallest normal and its largest are eps the kernel adds as given."""
    args = norm_inputs(VALID, seed=1)  # _call's
    for out, ref in zip(_call(eps=eps), want(args, eps), strict=True):
        assert_bitexact(out, ref)


def test_rejected_eps_adds_no_native_memo():
    before = set(qknorm_rope._SITES)
    for eps in (-1e-6, 0.0, math.inf, float("nan"), 1e-40, 1e39):
        with pytest.raises(ValueError, match="^eps"):
            _call(eps=eps)
    assert set(qknorm_rope._SITES) == before


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"variant": "nope"}, r"^variant must be one of \['row', 'tiled', 'tiled_pdl'\]"),
        ({"launch": "nope"}, r"^launch must be one of"),
    ],
)
def test_unknown_variant_or_launch(kw, match):
    args = norm_inputs(VALID, seed=1)
    with pytest.raises(ValueError, match=match):
        qknorm_rope.ltx2_qknorm_split_rope_pair(*args, **kw)
    with pytest.raises(ValueError, match=match):  # the op's too
        torch.ops.ltx2k.qknorm_split_rope_pair(
            *args, EPS, kw.get("variant", "row"), kw.get("launch", "auto")
        )


@pytest.mark.parametrize("mode", ["grad", "meta"])
def test_bad_weight_through_the_op_named(mode):
    args = list(norm_inputs(VALID, seed=1))
    args[3] = args[3][:-1]  # k_weight one short
    if mode == "grad":
        args[0].requires_grad_()
    else:
        args = [t.to("meta") for t in args]
    with pytest.raises(ValueError, match=r"^k_weight must have H\*D = 16 elements"):
        qknorm_rope.ltx2_qknorm_split_rope_pair(*args)


# --- the registered op -----------------------------------------------------------------

OP_SHAPES = [Shape(1, 1, 2, 2, 4, weight_dtype="fp32"), Shape(1, 2, 2, 2, 4, shared=True)]


def leaves(args):
    """Fresh leaves requiring grad, one per distinct input (a shared cos stays shared)."""
    fresh = {id(t): t.detach().clone().requires_grad_() for t in args}
    return [fresh[id(t)] for t in args]


OP_CASES = list(zip(OP_SHAPES, ["row", "tiled_pdl"], strict=True))


@pytest.mark.parametrize("shape, variant", OP_CASES, ids=str)
def test_opcheck(shape, variant):
    args = leaves(norm_inputs(shape, seed=0))
    opcheck(torch.ops.ltx2k.qknorm_split_rope_pair.default, (*args, EPS, variant, "auto"))


GRAD_SHAPES = [
    Shape(2, 3, 5, 3, 8, HEAD_MAJOR),
    Shape(1, 4, 4, 5, 6, shared=True, weight_dtype="fp32"),
]


@pytest.mark.parametrize("shape", GRAD_SHAPES, ids=label)
def test_grads_of_every_input_match_eager_autograd(shape):
    """``.backward()`` through the public function gives every input (q, k, both weights,
    each cos/sin: a shared one the sum of q's and k's terms) eager autograd's gradient
    through the reference, bit for bit."""
    base = norm_inputs(shape, seed=3)
    grads = [o.detach() for o in want(norm_inputs(shape, seed=4))]
    got_args, want_args = leaves(base), leaves(base)
    out = qknorm_rope.ltx2_qknorm_split_rope_pair(*got_args)
    ref = want(want_args)
    assert all(o.grad_fn is not None for o in out) and all(map(_equal, out, ref))
    torch.autograd.backward(out, grads)
    torch.autograd.backward(ref, grads)
    assert (got_args[4] is got_args[6]) == shape.shared
    for name, a, b in zip(NAMES, got_args, want_args, strict=True):
        assert a.grad is not None and _equal(a.grad, b.grad), name


def _ltx2k(*args):
    return qknorm_rope.ltx2_qknorm_split_rope_pair(*args, EPS)


def _eager(*args):
    return reference.qknorm_split_rope_pair_reference(*args, EPS)


def test_double_backward_matches_eager_autograd():
    """backward(create_graph=True) (a gradient penalty): the first-order gradients are the
    reference's and differentiable again, so the second-order term is the reference's."""
    base = norm_inputs(GRAD_SHAPES[0], seed=5)
    g = want(norm_inputs(GRAD_SHAPES[0], seed=6))[0].detach()
    results = []
    for fn in (_ltx2k, _eager):
        args = leaves(base)
        q_out, _ = fn(*args)
        gq, gw = torch.autograd.grad(q_out, (args[0], args[2]), g, create_graph=True)
        assert gq.requires_grad and gw.requires_grad
        penalty = gq.float().square().sum() + gw.float().square().sum()
        results.append((gq, gw, *torch.autograd.grad(penalty, (args[0], args[2]))))
    for name, a, b in zip(("gq", "gw", "d2q", "d2w"), *results, strict=True):
        assert a.abs().max() > 0 and _equal(a, b), name


def test_weight_grads_of_inference_activations_as_eager():
    """Activations made under inference mode, weights that need grad (a model's norm
    weights), called outside that mode: as with the reference, the weights get gradients
    (an inference tensor cannot be saved for backward: the op saves a copy)."""
    shape = GRAD_SHAPES[0]
    frozen = list(norm_inputs(shape, seed=7))
    with torch.inference_mode():  # q and k (cos/sin too would stop the reference as well)
        frozen[:2] = [t.clone() for t in frozen[:2]]
    assert frozen[0].is_inference() and not frozen[4].is_inference()
    grads = [o.detach() for o in want(norm_inputs(shape, seed=8))]
    weights = []
    for fn in (_ltx2k, _eager):
        qw, kw = (torch.nn.Parameter(w.clone()) for w in frozen[2:4])
        torch.autograd.backward(fn(frozen[0], frozen[1], qw, kw, *frozen[4:]), grads)
        weights.append((qw.grad, kw.grad))
    for a, b in zip(*weights, strict=True):
        assert a is not None and _equal(a, b)


def _vmapped(fn, in_dims, n=2, *, shared):
    shape = Shape(2, 2, 3 - shared, 3, 8, shared=shared)
    calls = [norm_inputs(shape, seed=20 + i) for i in range(n)]
    stacks = [torch.stack(ts) for ts in zip(*calls, strict=True)]
    args = [
        s.movedim(0, d) if d is not None else s[0] for s, d in zip(stacks, in_dims, strict=True)
    ]
    if shared:
        args[6], args[7] = args[4], args[5]
        stacks[6], stacks[7] = stacks[4], stacks[5]
    one = [
        [s[i] if d is not None else s[0] for s, d in zip(stacks, in_dims, strict=True)]
        for i in range(n)
    ]
    return torch.vmap(fn, in_dims=tuple(in_dims))(*args), one


@pytest.mark.parametrize(
    "in_dims, shared, launches",
    [
        ((0, 0, None, None, 0, 0, 0, 0), False, 1),  # folds into B
        ((1, 0, None, None, None, None, None, None), True, 1),
        ((0, 0, 0, None, 0, 0, None, None), False, 2),  # a weight per sample: a loop
        ((0, 0, 0, 0, None, None, None, None), True, 2),
    ],
)
def test_vmap_folds_or_loops(in_dims, shared, launches, record_launch):
    recorder = record_launch(qknorm_rope, "_qknorm_rope_pair_kernel")
    (q_out, k_out), calls = _vmapped(
        qknorm_rope.ltx2_qknorm_split_rope_pair, in_dims, shared=shared
    )
    for i, one in enumerate(calls):
        ref = want(one)
        assert _equal(q_out[i], ref[0]) and _equal(k_out[i], ref[1]), i
    assert len(recorder.launches) == launches


# "row" runs the empty operand's half too, masked off, with S = 1: no division by zero
@pytest.mark.filterwarnings("error:divide by zero:RuntimeWarning")
@pytest.mark.parametrize("B, Sq, Sk, n", [(2, 0, 3, 2), (0, 3, 3, 2), (2, 3, 4, 0)])
@pytest.mark.parametrize("weight_dim", [None, 0])  # folds into B; a weight per sample
def test_vmap_of_empty_inputs(B, Sq, Sk, n, weight_dim):
    """Zero tokens or zero samples under vmap give the reference's empty outputs: the fold
    unfolds the batch by its size (a view of zero elements cannot infer it), the loop over
    weights per sample stacks nothing."""
    one = norm_inputs(Shape(B, Sq, Sk, 3, 8), seed=6)
    in_dims = (0, 0, weight_dim, weight_dim, 0, 0, 0, 0)

    def stacked(n):
        return [
            t if d is None else t.expand(n, *t.shape) for t, d in zip(one, in_dims, strict=True)
        ]

    got = torch.vmap(run_default, in_dims)(*stacked(n))
    # over at least one copy, then cut to n: eager's vmap fallback refuses zero samples
    ref = torch.vmap(lambda *a: want(a), in_dims)(*stacked(max(n, 1)))
    assert all(_equal(a, b[:n]) for a, b in zip(got, ref, strict=True))


def test_vmap_of_no_samples_still_validates():
    """With no samples to loop over, a weight per sample is still checked (its length)."""
    args = [t.expand(0, *t.shape) for t in norm_inputs(Shape(2, 3, 3, 3, 8), seed=6)]
    args[2] = args[2][:, :5]
    with pytest.raises(ValueError, match=r"q_weight must have H\*D = 24 elements"):
        torch.vmap(run_default)(*args)


def run_default(*args):
    return qknorm_rope.ltx2_qknorm_split_rope_pair(*args, EPS)


def test_jvp_matches_the_reference():
    """torch.func.jvp of the fused function is the reference's, for tangents of the
    activations, the weights, the angles and all of them; shared angles too."""
    for shape in (Shape(2, 1, 2, 2, 8), Shape(1, 2, 2, 2, 8, shared=True)):
        primals = norm_inputs(shape, seed=5)
        tangents = norm_inputs(shape, seed=6)
        for given in ((0, 1), (2, 3), (4, 5, 6, 7), tuple(range(8))):
            if shape.shared:
                given = tuple(i for i in given if i < 6)  # k's angles are q's
            got = _jvp(qknorm_rope.ltx2_qknorm_split_rope_pair, primals, tangents, given)
            ref = _jvp(reference.qknorm_split_rope_pair_reference, primals, tangents, given)
            for a, b in zip(got, ref, strict=True):
                assert all(map(_equal, a, b)), (shape.label, given)


def _jvp(fn, primals, tangents, given):
    shared = primals[4] is primals[6]

    def of(*args):
        full = list(primals)
        for i, a in zip(given, args, strict=True):
            full[i] = a
        if shared:
            full[6], full[7] = full[4], full[5]
        return fn(*full, EPS)

    return torch.func.jvp(of, tuple(primals[i] for i in given), tuple(tangents[i] for i in given))


def test_meta_inputs_give_meta_outputs():
    for shape in OP_SHAPES:
        args = [t.to("meta") for t in norm_inputs(shape, seed=0)]
        if shape.shared:
            args[6], args[7] = args[4], args[5]
        q_out, k_out = qknorm_rope.ltx2_qknorm_split_rope_pair(*args)
        assert q_out.is_meta and q_out.shape == args[0].shape and q_out.is_contiguous()
        assert k_out.is_meta and k_out.shape == args[1].shape and k_out.is_contiguous()
        assert q_out.dtype == k_out.dtype == torch.bfloat16


def test_plain_inference_stays_off_the_dispatcher(monkeypatch):
    """Plain tensors, and the model's own nn.Parameter weights under inference mode or
    no_grad, launch directly (the Python path here; the native one on a GPU)."""

    def forbidden(*args, **kwargs):
        raise AssertionError("plain inference went through the registered op")

    monkeypatch.setattr(qknorm_rope, "_routed", forbidden)
    monkeypatch.setattr(rope_pair, "_routed", forbidden)
    for shape in OP_SHAPES:
        args = list(norm_inputs(shape, seed=0))
        ref = want(args)
        assert all(map(_equal, run(args, "tiled_pdl", "auto"), ref))
        args[2], args[3] = (torch.nn.Parameter(w) for w in args[2:4])
        for context in (torch.inference_mode, torch.no_grad):
            with context():
                assert all(map(_equal, run(args, "tiled_pdl", "auto"), ref))


# --- both public functions: export (and, on a GPU, compile and CUDA graphs) ------------


def prologue(q, k, qw, kw, qc, qs, kc, ks):
    """Both public functions, their default variants: what a model's attention calls."""
    a = rope_pair.apply_ltx2_split_rotary_emb_pair(q, k, qc, qs, kc, ks)
    b = qknorm_rope.ltx2_qknorm_split_rope_pair(q, k, qw, kw, qc, qs, kc, ks, EPS)
    return (*a, *b)


def prologue_reference(q, k, qw, kw, qc, qs, kc, ks):
    return (
        *reference.split_rope_pair_reference(q, k, qc, qs, kc, ks),
        *reference.qknorm_split_rope_pair_reference(q, k, qw, kw, qc, qs, kc, ks, EPS),
    )


class _Prologue(torch.nn.Module):
    def __init__(self, shared: bool):
        super().__init__()
        self.shared = shared

    def forward(self, q, k, qw, kw, qc, qs, kc, ks):
        if self.shared:
            kc, ks = qc, qs
        return prologue(q, k, qw, kw, qc, qs, kc, ks)


def _export_and_compare(args, shared: bool) -> None:
    ep = torch.export.export(_Prologue(shared), tuple(args))
    targets = {str(n.target) for n in ep.graph.nodes if n.op == "call_function"}
    expected = {"ltx2k.split_rope_pair.default", "ltx2k.qknorm_split_rope_pair.default"}
    assert expected <= targets, targets
    called = list(args)
    if shared:
        called[6], called[7] = called[4], called[5]
    for a, b in zip(ep.module()(*args), prologue_reference(*called), strict=True):
        assert _equal(a, b)


@pytest.mark.parametrize("shape", OP_SHAPES, ids=label)
def test_export_records_both_ops(shape):
    _export_and_compare(norm_inputs(shape, seed=2), shape.shared)


# --- on a GPU ------------------------------------------------------------------------

gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
GPU_SHAPES = [
    Shape(1, 6144, 6144, 32, 128, shared=True),
    Shape(1, 6144, 126, 32, 64),
    Shape(2, 251, 251, 32, 64, shared=True),
    Shape(1, 1, 1, 32, 128),
    Shape(2, 251, 126, 32, 64, weight_dtype="fp32"),
]
GPU_CALLS = sorted({pair for (_, launch), pair in qknorm_rope.CALLS.items() if launch != "auto"})


def native_hits(variant: str, shared: bool) -> int:
    return qknorm_rope._site(variant, shared, EPS).stats()[1]


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("shape", GPU_SHAPES, ids=label)
@pytest.mark.parametrize("variant, launch", GPU_CALLS)
def test_gpu_bitexact(variant, launch, shape, poison):
    """Random inputs: on a GPU the rounding order itself is under test."""
    args = norm_inputs(shape, seed=3, exact=False, device="cuda")
    ref = want(args)
    hits = native_hits(variant, shape.shared)
    for call in (1, 2):  # the native path records, then replays
        outs = run(args, variant, launch)
        if launch != "native" or call == 1:
            assert poison.calls == 2 * call
        for out, r in zip(outs, ref, strict=True):
            assert_bitexact(out, r)
    if launch == "native":
        assert native_hits(variant, shape.shared) == hits + 1


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("shape", [GPU_SHAPES[3], Shape(1, 64, 48, 32, 64)], ids=label)
def test_gpu_opcheck(shape):
    args = leaves(norm_inputs(shape, seed=0, exact=False, device="cuda"))
    op = torch.ops.ltx2k.qknorm_split_rope_pair.default
    opcheck(op, (*args, EPS, "tiled_pdl", "auto"))
    shared = Shape(shape.B, shape.Sq, shape.Sq, shape.H, shape.D, shared=True, weight_dtype="fp32")
    args = leaves(norm_inputs(shared, seed=1, exact=False, device="cuda"))
    opcheck(op, (*args, EPS, "row", "auto"))


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("shape", GPU_SHAPES[1:], ids=label)
def test_gpu_grads_match_eager_autograd(shape):
    base = norm_inputs(shape, seed=3, exact=False, device="cuda")
    grads = [torch.randn_like(t) for t in base[:2]]
    got_args, want_args = leaves(base), leaves(base)
    out = qknorm_rope.ltx2_qknorm_split_rope_pair(*got_args)
    ref = want(want_args)
    assert all(map(_equal, out, ref))
    torch.autograd.backward(out, grads)
    torch.autograd.backward(ref, grads)
    for name, a, b in zip(NAMES, got_args, want_args, strict=True):
        assert _equal(a.grad, b.grad), name


GPU_PROLOGUE = [Shape(2, 251, 251, 32, 64, shared=True), Shape(1, 6144, 126, 32, 64)]


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("shape", GPU_PROLOGUE, ids=label)
def test_gpu_compile_fullgraph_and_export(shape):
    torch._dynamo.reset()
    args = list(norm_inputs(shape, seed=4, exact=False, device="cuda"))
    compiled = torch.compile(_Prologue(shape.shared), fullgraph=True, dynamic=False)
    called = list(args)
    if shape.shared:
        called[6], called[7] = called[4], called[5]
    for a, b in zip(compiled(*args), prologue_reference(*called), strict=True):
        assert_bitexact(a, b)
    _export_and_compare(args, shape.shared)


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("shape", GPU_PROLOGUE, ids=label)
def test_gpu_cuda_graph_replay_with_new_inputs(shape):
    """Both functions (their defaults: the native path) captured in a CUDA graph; the
    replay reads the captured addresses' new values."""
    static = list(norm_inputs(shape, seed=5, exact=False, device="cuda"))
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            prologue(*static)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        outs = prologue(*static)
    fresh = norm_inputs(shape, seed=6, exact=False, device="cuda")
    for dst, src in {id(d): (d, s) for d, s in zip(static, fresh, strict=True)}.values():
        dst.copy_(src)
    graph.replay()
    torch.cuda.synchronize()
    for a, b in zip(outs, prologue_reference(*static), strict=True):
        assert_bitexact(a, b)


@gpu
@pytest.mark.gpu
def test_gpu_parameter_weight_under_inference_mode_takes_the_native_path():
    shape = GPU_PROLOGUE[0]
    args = list(norm_inputs(shape, seed=7, exact=False, device="cuda"))
    args[2], args[3] = (torch.nn.Parameter(w) for w in args[2:4])
    ref = want(args)
    hits = native_hits("tiled_pdl", True)
    with torch.inference_mode():
        for _ in range(3):
            outs = qknorm_rope.ltx2_qknorm_split_rope_pair(*args)
            assert all(map(_equal, outs, ref))
    assert native_hits("tiled_pdl", True) >= hits + 2
