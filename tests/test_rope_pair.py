"""Split RoPE of q and k in one launch (ltx2k.kernels.rope_pair) vs. the eager reference.

In the CPU interpreter (and on a GPU, where the same tests run): bit-exactness on exact
inputs through every variant and the "triton" and "lean" launch paths (the interpreter
has no native launches), one random-input check per variant bounded by the interpreter's
rounding mode, mutation tests that launch the real kernel with a broken stride, program
split or mode and prove the checks fail for it, the shared mode (cos/sin read once) by
identity, the validation's errors, and the registered op (opcheck, gradients, vmap, jvp,
export, meta). The ``gpu`` tests at the bottom run on a CUDA GPU only: random inputs at
LTX-2's shapes through every launch path, the native replays, opcheck and gradients on
CUDA, torch.compile, CUDA graphs.
"""

from __future__ import annotations

import pytest
import torch
from torch.library import opcheck

from ltx2k import runtime
from ltx2k.kernels import rope_pair
from ltx2k.workload import cases, reference, shapes
from tests.test_rope import assert_bitexact, bf16_ulp, padded_token_major

DEVICE = runtime.device()
HEAD_MAJOR = "head_major"
SEPARATE, SHARED, ROW = rope_pair.SEPARATE, rope_pair.SHARED, rope_pair.ROW
VARIANTS = sorted(rope_pair.ACCEPTED_VARIANTS)
TILED_VARIANTS = [v for v in VARIANTS if v != "row"]
# Every (variant, launch) of CALLS but the native path (a GPU-only one: the interpreter's
# native calls take the Python path) and "auto" (the native path).
CALLS = sorted((v, launch) for v, launch in rope_pair.CALLS if launch in ("triton", "lean"))
Pair = shapes.PairShape

# Awkward on purpose: Sq != Sk both ways, Sq = 1 and Sk = 1, shared and separate cos/sin
# in both layouts, odd head counts (3, 5, 17), half dims that are no power of two (6, 3,
# 5), B > 1, and 16 tokens where "tiled" is to put two tokens in a program (the
# interpreter counts as one SM; TILED_IN_INTERPRETER says which configuration each takes).
SHAPES = [
    Pair(1, 4, 4, 3, 16, shared=True),
    Pair(2, 3, 5, 17, 12, HEAD_MAJOR),
    Pair(1, 9, 7, 5, 64),
    Pair(2, 1, 3, 3, 6, HEAD_MAJOR),
    Pair(1, 3, 1, 3, 16),
    Pair(1, 1, 1, 17, 8, shared=True),
    Pair(2, 8, 8, 5, 10, HEAD_MAJOR, shared=True),
]
# "tiled" only (row would launch a program per token): 8 and 4 tokens per program, the
# last tile of q and of k partial.
WIDE_TILES = [Pair(1, 37, 27, 2, 8), Pair(1, 32, 32, 2, 8, shared=True)]
# (mode, block_tokens, q_programs, k_programs, head_blocks) of "tiled" on one SM. Under
# 8 tokens a program, it takes split RoPE's blocked tile (one token, up to 16 heads).
TILED_IN_INTERPRETER = {
    SHAPES[0]: (SHARED, 1, 4, 0, 1),
    SHAPES[1]: (SEPARATE, 2, 3, 5, 1),  # the last q and k tiles of each batch entry straddle
    SHAPES[2]: (SEPARATE, 2, 5, 4, 1),
    SHAPES[3]: (SEPARATE, 1, 2, 6, 1),
    SHAPES[4]: (SEPARATE, 1, 3, 1, 1),
    SHAPES[5]: (SHARED, 1, 1, 0, 2),  # two head blocks of 16
    SHAPES[6]: (SHARED, 2, 8, 0, 1),
    WIDE_TILES[0]: (SEPARATE, 8, 5, 4, 1),
    WIDE_TILES[1]: (SHARED, 4, 8, 0, 1),
}


def label(shape) -> str:
    return shape.label


def pair_inputs(shape, *, seed, exact=True, device=DEVICE):
    """(q, k, q_cos, q_sin, k_cos, k_sin) as the benchmarks make them; with a shared shape,
    k_cos is q_cos and k_sin is q_sin."""
    return cases.pair_inputs(shape, device, seed, exact=exact)


def config(variant: str, shape, num_sms: int):
    algo = rope_pair.CALLS[(variant, "auto")][0]
    return rope_pair.ALGORITHMS[algo](
        shape.H, shape.D, shape.B * shape.Sq, shape.B * shape.Sk, num_sms, shape.shared
    )


def run(args, variant: str, launch: str = "triton"):
    return rope_pair.apply_ltx2_split_rotary_emb_pair(*args, variant=variant, launch=launch)


def check_exact(args, variant: str, launch: str = "triton") -> None:
    """The bit-exactness check every exact-input test (and every mutant) goes through."""
    before = [t.clone() for t in args]
    outs = run(args, variant, launch)
    for out, want in zip(outs, reference.split_rope_pair_reference(*args), strict=True):
        assert_bitexact(out, want)
    for t, t0 in zip(args, before, strict=True):
        assert torch.equal(t, t0), "kernel modified an input"


def check_within_rounding(args, variant: str, launch: str = "triton") -> None:
    """Random inputs: each output within the rounding-mode bound of
    tests/test_rope.py's check_within_rounding (one ulp of the rounded cos product and one
    of the output, doubled for the binade); exactly equal on a GPU."""
    q, k, q_cos, q_sin, k_cos, k_sin = args
    outs = run(args, variant, launch)
    for name, out, (x, cos, sin) in zip(
        ("q_out", "k_out"), outs, ((q, q_cos, q_sin), (k, k_cos, k_sin)), strict=True
    ):
        expected = reference.split_rotary_reference(x, cos, sin)
        cos_term = reference.split_rotary_reference(x, cos, torch.zeros_like(sin))
        assert not out.isnan().any(), f"{name}: output elements never written (NaN poison survived)"
        tol = 2 * (bf16_ulp(cos_term) + bf16_ulp(expected))
        err = (out.float() - expected.float()).abs()
        bad = err > tol
        assert not bad.any(), (
            f"{name}: {int(bad.sum())} elements beyond the rounding-mode bound; "
            f"worst error {err.max().item()} at {tuple(bad.nonzero()[0].tolist())}"
        )


def _equal(a, b) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and torch.equal(a, b)


# --- the inputs and the configurations they reach ---------------------------------


def test_exact_inputs_never_round():
    """The premise of the bit-exact tests: on exact inputs the reference equals fp64 math
    (integers in [-16, 16] rotated by cos/sin in {±0.5, ±1, ±2}), for q and for k."""
    shape = SHAPES[1]
    args = pair_inputs(shape, seed=1)
    for x, cos, sin, out in zip(
        args[:2], args[2::2], args[3::2], reference.split_rope_pair_reference(*args), strict=True
    ):
        B, S, _ = x.shape
        xd = x.double().reshape(B, S, shape.H, 2, shape.D // 2)
        c, s = cos.double().transpose(1, 2), sin.double().transpose(1, 2)
        x1, x2 = xd[..., 0, :], xd[..., 1, :]
        exact = torch.stack([x1 * c - x2 * s, x2 * c + x1 * s], dim=-2).reshape(B, S, -1)
        assert torch.equal(out.double(), exact)
    q, k, q_cos, _, k_cos, _ = args
    # ...and q's and k's values differ, so a kernel that mixes them up cannot pass
    assert (q.unique().numel() > 20) and not torch.equal(q_cos[:, :, :3], k_cos[:, :, :3])


@pytest.mark.parametrize("shape", SHAPES + WIDE_TILES, ids=label)
def test_tiled_configuration_in_the_interpreter(shape):
    cfg = config("tiled", shape, 1)
    got = (cfg.mode, cfg.block_tokens, cfg.q_programs, cfg.k_programs, cfg.head_blocks)
    assert got == TILED_IN_INTERPRETER[shape]
    assert config("tiled_pdl", shape, 1) == cfg._replace(pdl=True)
    assert cfg.block_tokens * cfg.q_programs >= shape.B * shape.Sq
    assert cfg.block_tokens * (cfg.q_programs - 1) < max(1, shape.B * shape.Sq)
    row = config("row", shape, 1)
    assert (row.mode, row.block_tokens, row.head_blocks) == (ROW, 1, 1)
    assert row.q_programs == shape.B * max(shape.Sq, shape.Sk) and row.k_programs == 0


def test_the_shapes_reach_every_branch_of_tiled():
    cfgs = [config("tiled", s, 1) for s in SHAPES]
    assert any(c.mode == SEPARATE and c.block_tokens > 1 for c in cfgs)
    assert any(c.mode == SHARED and c.block_tokens > 1 for c in cfgs)
    assert any(c.head_blocks > 1 for c in cfgs)
    assert rope_pair._num_sms(torch.device("cpu")) == 1


@pytest.mark.parametrize(
    "H, D, warps", [(32, 128, 4), (16, 256, 4), (64, 128, 4), (32, 64, 8), (31, 128, 8)]
)
def test_row_takes_upstreams_warps(H, D, warps):
    """The "row" algorithm is sglang's launch as written upstream: 4 warps at a hidden size
    H*D of 4096 and over, else 8 (the module docstring)."""
    for tokens in (1, 6144):
        assert rope_pair._row(H, D, tokens, tokens, 132, True).num_warps == warps


# --- correctness ------------------------------------------------------------------------


def _assert_launched_as(recorder, variant: str, shape) -> None:
    cfg = config(variant, shape, rope_pair._num_sms(torch.device(DEVICE)))
    [(grid, meta)] = recorder.launches
    assert grid == (cfg.q_programs + cfg.k_programs, cfg.head_blocks)
    assert (meta["MODE"], meta["BLOCK_TOKENS"]) == (cfg.mode, cfg.block_tokens)
    assert meta["BLOCK_HEADS"] == cfg.block_heads and meta["num_warps"] == cfg.num_warps


@pytest.mark.parametrize("shape", SHAPES, ids=label)
@pytest.mark.parametrize("variant, launch", CALLS)
def test_bitexact_on_exact_inputs(variant, launch, shape, poison, record_launch):
    recorder = record_launch(rope_pair, "_split_rope_pair_kernel")
    check_exact(pair_inputs(shape, seed=shape.Sq + 7 * shape.Sk), variant, launch)
    assert poison.calls == 2  # both outputs really were NaN-poisoned
    _assert_launched_as(recorder, variant, shape)


@pytest.mark.parametrize("shape", WIDE_TILES, ids=label)
@pytest.mark.parametrize("variant, launch", [c for c in CALLS if c[0] != "row"])
def test_bitexact_with_wide_tiles(variant, launch, shape, poison, record_launch):
    recorder = record_launch(rope_pair, "_split_rope_pair_kernel")
    check_exact(pair_inputs(shape, seed=3), variant, launch)
    assert poison.calls == 2
    _assert_launched_as(recorder, variant, shape)


@pytest.mark.parametrize(
    "shape", [Pair(2, 5, 3, 17, 12), Pair(1, 16, 16, 5, 64, HEAD_MAJOR, shared=True)], ids=label
)
@pytest.mark.parametrize("variant", VARIANTS)
def test_random_inputs_within_rounding_mode_difference(variant, shape, poison):
    check_within_rounding(pair_inputs(shape, seed=7, exact=False), variant)
    assert poison.calls == 2


@pytest.mark.parametrize("variant", VARIANTS)
def test_cos_sin_views_and_batch_broadcast(variant):
    """cos/sin may be any view with unit last stride: q's a slice of a padded buffer, k's
    one batch entry expanded over B (stride 0)."""
    B, Sq, Sk, H, D = 2, 3, 4, 5, 12
    q, k, q_cos, q_sin, k_cos, k_sin = pair_inputs(Pair(B, Sq, Sk, H, D), seed=4)
    padded = []
    for t in (q_cos, q_sin):
        pad = torch.full((B, H + 2, Sq + 1, D), 99.0, dtype=torch.bfloat16, device=DEVICE)
        pad[:, 1 : H + 1, :Sq, : D // 2] = t
        padded.append(pad[:, 1 : H + 1, :Sq, : D // 2])
    k_cos_b, k_sin_b = (t[:1].expand(B, -1, -1, -1) for t in (k_cos, k_sin))
    assert not padded[0].is_contiguous() and k_cos_b.stride(0) == 0
    check_exact((q, k, *padded, k_cos_b, k_sin_b), variant)


@pytest.mark.parametrize("variant", VARIANTS)
def test_cos_and_sin_read_through_their_own_strides(variant, poison):
    """Each sin in a layout unlike its cos (tests/test_rope.py's padded_token_major), and
    the reverse: a kernel or launcher that reads one through the other's strides reads
    other angles or padding. Separate angles (Sq != Sk, 16 tokens: two a tile), then shared
    ones (the shared mode reads them once, through q's strides)."""
    q, k, q_cos, q_sin, k_cos, k_sin = pair_inputs(Pair(2, 5, 3, 5, 12, HEAD_MAJOR), seed=15)
    odd = padded_token_major
    check_exact((q, k, q_cos, odd(q_sin), k_cos, odd(k_sin)), variant)
    check_exact((q, k, odd(q_cos), q_sin, odd(k_cos), k_sin), variant)
    q, k, cos, sin, _, _ = pair_inputs(Pair(2, 8, 8, 5, 12, HEAD_MAJOR, shared=True), seed=16)
    odd_sin = odd(sin)
    check_exact((q, k, cos, odd_sin, cos, odd_sin), variant)
    assert poison.calls == 6


@pytest.mark.parametrize("variant", TILED_VARIANTS)
def test_separate_mode_spans_several_head_blocks(variant, poison, record_launch):
    """Separate angles with more heads than one program holds (17 heads over 5 tokens:
    split RoPE's blocked tile of 16 heads, two head blocks): q's and k's programs each
    start at their own block's first head. The shared mode's head blocks are SHAPES[5]."""
    recorder = record_launch(rope_pair, "_split_rope_pair_kernel")
    check_exact(pair_inputs(Pair(1, 2, 3, 17, 8, HEAD_MAJOR), seed=20), variant)
    [(grid, meta)] = recorder.launches
    assert meta["MODE"] == SEPARATE and grid[1] == 2  # the premise
    assert poison.calls == 2


@pytest.mark.parametrize("shape", [SHAPES[1], SHAPES[5], WIDE_TILES[0]], ids=label)
@pytest.mark.parametrize("variant", VARIANTS)
def test_stores_stay_inside_the_outputs(variant, shape, guarded):
    """Partial head blocks, half dims under their power of two, the last tile of q and of k
    partial: nothing is stored outside either output (past the last token, only the guard
    band shows a store that a mask let through)."""
    check_exact(pair_inputs(shape, seed=24), variant)
    assert guarded.calls == 2
    guarded.check()


def _rounding_probe(B: int, S: int, H: int, D: int, seed: int) -> torch.Tensor:
    """[B, S, H*D] with x1 = ±(1 + 2**-7), x2 = ±(1 + 2**-6) (one random sign a pair)."""
    gen = torch.Generator().manual_seed(seed)
    sign = torch.randint(0, 2, (B, S, H, 1, D // 2), generator=gen) * 2 - 1
    pair = torch.tensor([1 + 2**-7, 1 + 2**-6]).view(2, 1)
    return (sign * pair).reshape(B, S, H * D).to(DEVICE, torch.bfloat16)


@pytest.mark.parametrize("shared", [False, True], ids=["separate", "shared"])
@pytest.mark.parametrize("variant", VARIANTS)
def test_cos_product_rounded_before_sine_term(variant, shared, poison):
    """tests/test_rope.py's rounding-order check, through the pair's own rotation code:
    with cos = 1 + 2**-7 and sin = 1, out1 = 0 exactly when x1*cos is rounded to bf16
    (both rounding modes drop its 2**-14) before x2*sin is subtracted; a kernel that
    subtracts from the unrounded product (an FMA) returns ±2**-14."""
    B, Sq, H, D = 2, 3, 5, 12
    Sk = Sq if shared else 4
    q, k = _rounding_probe(B, Sq, H, D, seed=17), _rounding_probe(B, Sk, H, D, seed=18)

    def angles(S):
        cos = torch.full((B, H, S, D // 2), 1 + 2**-7, dtype=torch.bfloat16, device=DEVICE)
        return cos, torch.ones_like(cos)

    q_cos, q_sin = angles(Sq)
    k_cos, k_sin = (q_cos, q_sin) if shared else angles(Sk)
    args = (q, k, q_cos, q_sin, k_cos, k_sin)
    for out in reference.split_rope_pair_reference(*args):
        assert (out.reshape(*out.shape[:2], H, 2, D // 2)[..., 0, :] == 0).all()  # the premise
    check_exact(args, variant)
    assert poison.calls == 2


# "row" runs the empty operand's half too, masked off, with S = 1: no division by zero
@pytest.mark.filterwarnings("error:divide by zero:RuntimeWarning")
@pytest.mark.parametrize("Sq, Sk", [(0, 3), (3, 0), (0, 0)])
@pytest.mark.parametrize("variant", VARIANTS)
def test_empty_q_or_k(variant, Sq, Sk, poison, record_launch):
    """An empty operand gets an empty output; the other one is still rotated (one launch,
    none when both are empty)."""
    recorder = record_launch(rope_pair, "_split_rope_pair_kernel")
    args = pair_inputs(Pair(2, Sq, Sk, 3, 8), seed=5)
    check_exact(args, variant)
    assert len(recorder.launches) == (0 if Sq == Sk == 0 else 1)


def test_default_variant_is_tiled_pdl(record_launch):
    recorder = record_launch(rope_pair, "_split_rope_pair_kernel")
    args = pair_inputs(SHAPES[2], seed=0)
    outs = rope_pair.apply_ltx2_split_rotary_emb_pair(*args)
    assert all(map(_equal, outs, reference.split_rope_pair_reference(*args)))
    _assert_launched_as(recorder, "tiled_pdl", SHAPES[2])


# --- shared cos/sin: by identity ----------------------------------------------------------


@pytest.mark.parametrize("variant", VARIANTS)
def test_shared_angles_by_identity(variant, record_launch):
    """The very same cos/sin tensors for q and k launch the shared mode (one read of the
    angles; "row" has its own); equal values in other tensors launch the separate mode,
    and so does sharing only cos. All give the same bits."""
    recorder = record_launch(rope_pair, "_split_rope_pair_kernel")
    shape = SHAPES[6]
    q, k, cos, sin, k_cos, k_sin = pair_inputs(shape, seed=9)
    assert k_cos is cos and k_sin is sin
    calls = {
        "shared": (q, k, cos, sin, cos, sin),
        "equal": (q, k, cos, sin, cos.clone(), sin.clone()),
        "cos only": (q, k, cos, sin, cos, sin.clone()),
    }
    outs = {name: run(args, variant) for name, args in calls.items()}
    want = reference.split_rope_pair_reference(q, k, cos, sin, cos, sin)
    for name, got in outs.items():
        assert all(map(_equal, got, want)), name
    modes = [meta["MODE"] for _, meta in recorder.launches]
    grids = [grid for grid, _ in recorder.launches]
    if variant == "row":
        assert modes == [ROW] * 3
        return
    assert modes == [SHARED, SEPARATE, SEPARATE]
    sms = rope_pair._num_sms(torch.device(DEVICE))
    tokens = shape.B * shape.Sq
    one, two = (rope_pair._tiled(shape.H, shape.D, tokens, tokens, sms, sh) for sh in (1, 0))
    assert grids[0] == (one.q_programs, one.head_blocks) and one.k_programs == 0
    assert grids[1] == (two.q_programs + two.k_programs, two.head_blocks)
    assert rope_pair.shares_angles(cos, sin, cos, sin)
    assert not rope_pair.shares_angles(cos, sin, cos.clone(), sin)


# --- mutation tests: the checks above fail for a wrongly indexed launch ---------------

# The kernel's positional arguments, by name, so that a mutant reads as what it breaks.
ARGS = (
    *("q", "k", "q_cos", "q_sin", "k_cos", "k_sin", "q_out", "k_out"),
    *("Sq", "Sk", "H", "HALF", "q_tokens", "k_tokens", "q_programs"),
    *("qcb", "qch", "qcs", "qsb", "qsh", "qss", "kcb", "kch", "kcs", "ksb", "ksh", "kss"),
)
STRIDES = ARGS[-12:]


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
    # separate -> shared (k rotated by q's angles), shared or row -> separate (k unwritten)
    mode = {SEPARATE: SHARED, SHARED: SEPARATE, ROW: SEPARATE}[kw["MODE"]]
    return grid, args, {**kw, "MODE": mode}


def _k_rotated_by_q_angles(grid, args, kw):
    n = _named(args)
    return grid, _with(args, k_cos=n["q_cos"], k_sin=n["q_sin"]), kw


def _batch_stride_ignored(grid, args, kw):
    return grid, _with(args, qcb=0, qsb=0, kcb=0, ksb=0), kw


def _view_strides_ignored(grid, args, kw):
    # the strides of a contiguous [B, H, S, D/2] used for token-major views
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


def _head_block_dropped(grid, args, kw):
    return (grid[0], grid[1] - 1), args, kw


SAME_LENGTH = Pair(1, 3, 3, 3, 8, HEAD_MAJOR)  # separate cos/sin, Sq == Sk
MUTANTS = {
    # name: (mutate, shape, variants)
    "q_programs_short": (_q_programs_short, Pair(1, 2, 3, 3, 8), TILED_VARIANTS),
    "q_programs_long": (_q_programs_long, Pair(1, 2, 3, 3, 8), TILED_VARIANTS),
    "block_tokens_halved": (_block_tokens_halved, SHAPES[2], TILED_VARIANTS),
    "mode_changed": (_mode_changed, SAME_LENGTH, VARIANTS),
    "shared_mode_changed": (_mode_changed, Pair(1, 3, 3, 3, 8, shared=True), TILED_VARIANTS),
    "k_rotated_by_q_angles": (_k_rotated_by_q_angles, SAME_LENGTH, VARIANTS),
    "batch_stride_ignored": (_batch_stride_ignored, Pair(2, 2, 1, 3, 8), VARIANTS),
    "view_strides_ignored": (_view_strides_ignored, Pair(1, 3, 4, 3, 8), VARIANTS),
    "last_head_missed": (_last_head_missed, Pair(1, 2, 3, 5, 8), VARIANTS),
    "last_q_token_missed": (_last_q_token_missed, Pair(1, 2, 3, 3, 8), VARIANTS),
    "last_k_token_missed": (_last_k_token_missed, Pair(1, 3, 2, 3, 8), VARIANTS),
    "head_block_dropped": (_head_block_dropped, SHAPES[5], TILED_VARIANTS),
}
CHECKS = {"exact": check_exact, "within_rounding": check_within_rounding}
# What the checks say when they fail (not some incidental assertion).
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
    cfg = config(variant, shape, sms)
    if mutant == "head_block_dropped" and cfg.head_blocks == 1:
        pytest.skip("one head block on this device's grid")
    if mutant == "block_tokens_halved" and cfg.block_tokens == 1:
        pytest.skip("one token per program on this device's grid")
    recorder = record_launch(rope_pair, "_split_rope_pair_kernel", mutate=mutate)
    args = pair_inputs(shape, seed=11, exact=check == "exact")
    with pytest.raises(AssertionError, match=CHECK_FAILED):
        CHECKS[check](args, variant)
    assert len(recorder.launches) == 1  # the mutant really ran


# --- validation: errors name the argument -----------------------------------------------

NAMES = ("q", "k", "q_cos", "q_sin", "k_cos", "k_sin")
VALID = Pair(1, 2, 3, 2, 8, HEAD_MAJOR)


def _float32(t):
    return t.float()


def _one_more_dim(t):
    return t.unsqueeze(0)


def _not_contiguous(t):
    # the same values in a [B, H*D, S] buffer, transposed: contiguous only if S == 1
    out = torch.empty((t.shape[0], t.shape[2], t.shape[1]), dtype=t.dtype, device=t.device)
    return out.transpose(1, 2).copy_(t)


def _strided_last_dim(t):
    wide = torch.zeros((*t.shape[:-1], 2 * t.shape[-1]), dtype=t.dtype, device=t.device)
    wide[..., ::2] = t
    return wide[..., ::2]


def _not_a_tensor(t):
    return t.tolist()


def bad_operand_cases(names=NAMES):
    """(argument, bad value maker, error type, message pattern) for each split-RoPE
    operand: q and k [B, S, H*D] contiguous bf16, cos/sin [B, H, S, D/2] bf16 with unit
    last stride."""
    out = []
    for name in names:
        x = name in ("q", "k")
        out += [
            (name, _float32, ValueError, rf"^{name} must be bfloat16, got torch.float32"),
            (name, _one_more_dim, ValueError, rf"^{name} must be {3 if x else 4}-D"),
            (name, _not_a_tensor, TypeError, rf"^{name} must be a torch.Tensor, got list"),
        ]
        if x:
            out.append((name, _not_contiguous, ValueError, rf"^{name} must be contiguous"))
        else:
            out.append((name, _strided_last_dim, ValueError, rf"^{name} must have last-dim"))
    return out


def case_id(case) -> str:
    return f"{case[0]}-{case[1].__name__.strip('_')}"


@pytest.mark.parametrize("case", bad_operand_cases(), ids=case_id)
def test_bad_operand_named(case):
    name, make_bad, error, match = case
    args = dict(zip(NAMES, pair_inputs(VALID, seed=1), strict=True))
    args[name] = make_bad(args[name])
    with pytest.raises(error, match=match):
        rope_pair.apply_ltx2_split_rotary_emb_pair(**args)


def mismatched_k(q_shape, k_shape, *, seed=2):
    """q and its cos/sin of one shape, k and its cos/sin of another."""
    q_args = pair_inputs(q_shape, seed=seed)
    k_args = pair_inputs(k_shape, seed=seed + 1)
    return (q_args[0], k_args[1], *q_args[2:4], *k_args[4:6])


MISMATCHES = {
    # k's shape: (the message, naming the argument)
    "batch": (Pair(2, 2, 3, 2, 8), r"^k\.shape\[0\] \(B\) must equal q\.shape\[0\]=1"),
    "heads": (Pair(1, 2, 3, 4, 4), r"^k's heads and head dim \(H=4, D=4, from k_cos"),
    "head_dim": (Pair(1, 2, 3, 2, 4), r"^k's heads and head dim \(H=2, D=4, from k_cos"),
}


@pytest.mark.parametrize("what", sorted(MISMATCHES))
def test_q_k_mismatch_named(what):
    k_shape, match = MISMATCHES[what]
    with pytest.raises(ValueError, match=match):
        rope_pair.apply_ltx2_split_rotary_emb_pair(*mismatched_k(VALID, k_shape))


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"variant": "nope"}, r"^variant must be one of \['row', 'tiled', 'tiled_pdl'\]"),
        ({"launch": "nope"}, r"^launch must be one of"),
    ],
)
def test_unknown_variant_or_launch(kw, match):
    args = pair_inputs(VALID, seed=1)
    with pytest.raises(ValueError, match=match):
        rope_pair.apply_ltx2_split_rotary_emb_pair(*args, **kw)
    with pytest.raises(ValueError, match=match):  # the op's too
        torch.ops.ltx2k.split_rope_pair(*args, kw.get("variant", "row"), kw.get("launch", "auto"))


@pytest.mark.parametrize("mode", ["grad", "meta"])
def test_bad_operand_through_the_op_named(mode):
    q, k, q_cos, q_sin, k_cos, k_sin = pair_inputs(VALID, seed=1)
    bad = k_sin.float()
    if mode == "grad":
        q.requires_grad_()
    else:
        q, k, q_cos, q_sin, k_cos, bad = (t.to("meta") for t in (q, k, q_cos, q_sin, k_cos, bad))
    with pytest.raises(ValueError, match=r"^k_sin must be bfloat16"):
        rope_pair.apply_ltx2_split_rotary_emb_pair(q, k, q_cos, q_sin, k_cos, bad)


# --- the registered op -----------------------------------------------------------------

OP_SHAPES = [Pair(1, 1, 2, 2, 4), Pair(1, 2, 2, 2, 4, shared=True)]


def leaves(args):
    """Fresh leaves requiring grad, one per distinct input (a shared cos stays shared)."""
    fresh = {id(t): t.detach().clone().requires_grad_() for t in args}
    return [fresh[id(t)] for t in args]


OP_CASES = list(zip(OP_SHAPES, ["row", "tiled_pdl"], strict=True))


@pytest.mark.parametrize("shape, variant", OP_CASES, ids=str)
def test_opcheck(shape, variant):
    args = leaves(pair_inputs(shape, seed=0))
    opcheck(torch.ops.ltx2k.split_rope_pair.default, (*args, variant, "auto"))


GRAD_SHAPES = [Pair(2, 3, 5, 3, 8, HEAD_MAJOR), Pair(1, 4, 4, 5, 6, shared=True)]


@pytest.mark.parametrize("shape", GRAD_SHAPES, ids=label)
def test_grads_of_every_input_match_eager_autograd(shape):
    """``.backward()`` through the public function gives every input (q, k, and each
    cos/sin: a shared one gets the sum of q's and k's terms) eager autograd's gradient
    through the reference, bit for bit."""
    base = pair_inputs(shape, seed=3)
    grads = pair_inputs(shape, seed=4)[:2]
    got_args, want_args = leaves(base), leaves(base)
    out = rope_pair.apply_ltx2_split_rotary_emb_pair(*got_args)
    want = reference.split_rope_pair_reference(*want_args)
    assert all(o.grad_fn is not None for o in out) and all(map(_equal, out, want))
    torch.autograd.backward(out, grads)
    torch.autograd.backward(want, grads)
    assert (got_args[2] is got_args[4]) == shape.shared
    for name, a, b in zip(NAMES, got_args, want_args, strict=True):
        assert a.grad is not None and _equal(a.grad, b.grad), name


def _vmapped(fn, in_dims, n=2, *, shared):
    """fn vmapped over n stacked calls (a None dim takes the first call's tensor; a
    shared call passes the very same cos/sin for k), and each call's arguments."""
    calls = [pair_inputs(Pair(2, 3, 3, 3, 8, shared=shared), seed=20 + i) for i in range(n)]
    stacks = [torch.stack(ts) for ts in zip(*calls, strict=True)]
    if shared:
        stacks[4], stacks[5] = stacks[2], stacks[3]
    args = [
        s.movedim(0, d) if d is not None else s[0] for s, d in zip(stacks, in_dims, strict=True)
    ]
    if shared:
        args[4], args[5] = args[2], args[3]
    one = [
        [s[i] if d is not None else s[0] for s, d in zip(stacks, in_dims, strict=True)]
        for i in range(n)
    ]
    return torch.vmap(fn, in_dims=tuple(in_dims))(*args), one


@pytest.mark.parametrize(
    "in_dims, shared",
    [
        ((0, 0, 0, 0, 0, 0), False),
        ((1, 0, None, None, 0, 0), False),
        ((0, 0, None, None, None, None), True),
        ((0, 1, 0, 0, 0, 0), True),
    ],
)
def test_vmap_folds_into_batch(in_dims, shared, record_launch):
    recorder = record_launch(rope_pair, "_split_rope_pair_kernel")
    (q_out, k_out), calls = _vmapped(
        rope_pair.apply_ltx2_split_rotary_emb_pair, in_dims, shared=shared
    )
    for i, one in enumerate(calls):
        want = reference.split_rope_pair_reference(*one)
        assert _equal(q_out[i], want[0]) and _equal(k_out[i], want[1]), i
    assert len(recorder.launches) == 1  # one launch for the whole batch


# "row" runs the empty operand's half too, masked off, with S = 1: no division by zero
@pytest.mark.filterwarnings("error:divide by zero:RuntimeWarning")
@pytest.mark.parametrize("B, Sq, Sk, n", [(2, 0, 3, 2), (2, 0, 0, 2), (0, 3, 3, 2), (2, 3, 4, 0)])
def test_vmap_of_empty_inputs(B, Sq, Sk, n):
    """Zero tokens or zero samples under vmap give the reference's empty outputs (the rule
    unfolds the batch by its size, which a view of zero elements cannot infer)."""
    one = pair_inputs(Pair(B, Sq, Sk, 3, 8), seed=6)
    got = torch.vmap(rope_pair.apply_ltx2_split_rotary_emb_pair)(
        *[t.expand(n, *t.shape) for t in one]
    )
    # over at least one copy, then cut to n: eager's vmap fallback refuses zero samples
    want = torch.vmap(reference.split_rope_pair_reference)(
        *[t.expand(max(n, 1), *t.shape) for t in one]
    )
    assert all(_equal(a, b[:n]) for a, b in zip(got, want, strict=True))


def test_jvp_matches_the_reference():
    """Tangents of q and k, of the angles, and of both; shared angles too (their tangent
    reaches both outputs)."""
    for shape in (Pair(2, 1, 2, 3, 8), Pair(1, 2, 2, 3, 8, shared=True)):
        primals = pair_inputs(shape, seed=5)
        tangents = pair_inputs(shape, seed=6)
        for given in ((0, 1), (2, 3, 4, 5), (0, 2, 5)):
            if shape.shared:
                given = tuple(i for i in given if i < 4)  # k's angles are q's
            got = _jvp(rope_pair.apply_ltx2_split_rotary_emb_pair, primals, tangents, given)
            want = _jvp(reference.split_rope_pair_reference, primals, tangents, given)
            for a, b in zip(got, want, strict=True):
                assert all(map(_equal, a, b)), (shape.label, given)


def _jvp(fn, primals, tangents, given):
    """torch.func.jvp of fn in the arguments ``given`` (the others held); with shared
    angles, k's cos/sin are q's (the same tensors inside the transform)."""
    shared = primals[2] is primals[4]

    def of(*args):
        full = list(primals)
        for i, a in zip(given, args, strict=True):
            full[i] = a
        if shared:
            full[4], full[5] = full[2], full[3]
        return fn(*full)

    return torch.func.jvp(of, tuple(primals[i] for i in given), tuple(tangents[i] for i in given))


def test_meta_inputs_give_meta_outputs():
    for shape in OP_SHAPES:
        args = [t.to("meta") for t in pair_inputs(shape, seed=0)]
        if shape.shared:
            args[4], args[5] = args[2], args[3]
        q_out, k_out = rope_pair.apply_ltx2_split_rotary_emb_pair(*args)
        assert q_out.is_meta and q_out.shape == args[0].shape and q_out.is_contiguous()
        assert k_out.is_meta and k_out.shape == args[1].shape and k_out.is_contiguous()


def test_plain_inference_stays_off_the_dispatcher(monkeypatch):
    def forbidden(*args, **kwargs):
        raise AssertionError("plain inference went through the registered op")

    monkeypatch.setattr(rope_pair, "_routed", forbidden)
    for shape in OP_SHAPES:
        args = pair_inputs(shape, seed=0)
        outs = rope_pair.apply_ltx2_split_rotary_emb_pair(*args)
        assert all(map(_equal, outs, reference.split_rope_pair_reference(*args)))


# The export of both public functions (and their torch.compile on a GPU) is in
# tests/test_qknorm_rope.py, which calls them together.


# --- on a GPU ------------------------------------------------------------------------

gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
# LTX-2's calls: video self-attention (shared cos/sin), the audio-to-video
# cross-attention, audio self-attention (shared), a decode step.
GPU_SHAPES = [
    Pair(1, 6144, 6144, 32, 128, shared=True),
    Pair(1, 6144, 126, 32, 64),
    Pair(2, 251, 251, 32, 64, shared=True),
    Pair(1, 1, 1, 32, 128),
]
# Every (algorithm, launch path), the native one included ("auto" is the native path).
GPU_CALLS = sorted({pair for (_, launch), pair in rope_pair.CALLS.items() if launch != "auto"})


def native_hits(variant: str, shared: bool) -> int:
    return rope_pair._SITES[variant, shared].stats()[1]


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("shape", GPU_SHAPES, ids=label)
@pytest.mark.parametrize("variant, launch", GPU_CALLS)
def test_gpu_bitexact(variant, launch, shape, poison):
    """Random normal inputs: on a GPU the rounding order itself is under test."""
    args = pair_inputs(shape, seed=3, exact=False, device="cuda")
    want = reference.split_rope_pair_reference(*args)
    hits = native_hits(variant, shape.shared)
    # twice: the native path records on the first call and replays on the second
    for call in (1, 2):
        outs = run(args, variant, launch)
        if launch != "native" or call == 1:  # a replay allocates in C++, past the poison
            assert poison.calls == 2 * call  # the outputs really were poisoned
        for out, ref in zip(outs, want, strict=True):
            assert_bitexact(out, ref)
    if launch == "native":
        assert native_hits(variant, shape.shared) == hits + 1  # the second call replayed


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("shape", [GPU_SHAPES[3], Pair(1, 64, 48, 32, 64)], ids=label)
def test_gpu_opcheck(shape):
    args = leaves(pair_inputs(shape, seed=0, exact=False, device="cuda"))
    opcheck(torch.ops.ltx2k.split_rope_pair.default, (*args, "tiled_pdl", "auto"))
    shared = Pair(shape.B, shape.Sq, shape.Sq, shape.H, shape.D, shared=True)
    args = leaves(pair_inputs(shared, seed=1, exact=False, device="cuda"))
    opcheck(torch.ops.ltx2k.split_rope_pair.default, (*args, "row", "auto"))


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("shape", GPU_SHAPES[1:], ids=label)
def test_gpu_grads_match_eager_autograd(shape):
    base = pair_inputs(shape, seed=3, exact=False, device="cuda")
    grads = pair_inputs(shape, seed=4, exact=False, device="cuda")[:2]
    got_args, want_args = leaves(base), leaves(base)
    out = rope_pair.apply_ltx2_split_rotary_emb_pair(*got_args)
    want = reference.split_rope_pair_reference(*want_args)
    assert all(map(_equal, out, want))
    torch.autograd.backward(out, grads)
    torch.autograd.backward(want, grads)
    for name, a, b in zip(NAMES, got_args, want_args, strict=True):
        assert _equal(a.grad, b.grad), name
