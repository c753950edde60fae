"""Split RoPE kernel vs. the eager reference, in the CPU interpreter (or on a GPU).

The contract is bit-exactness. On the CPU the interpreter rounds fp32->bf16
by truncation where a GPU rounds to nearest even, so the bit-exact tests use
inputs for which no rounding ever happens (ltx2k.workload.cases, ``exact=True``);
one random-input test per variant bounds the error by the rounding-mode
difference instead. The mutation tests at the bottom launch the real kernel
with deliberately wrong indexing and prove that these checks fail for it.
"""

from __future__ import annotations

import pytest
import torch
import triton

from ltx2k import runtime
from ltx2k.kernels import rope
from ltx2k.workload import cases, reference, shapes

DEVICE = runtime.device()


def rope_inputs(B, S, H, D, *, seed, exact=False, transposed=False, device=DEVICE):
    """The inputs the benchmarks and the gate use (ltx2k.workload.cases), for an ad-hoc shape."""
    shape = shapes.RopeShape(B, S, H, D)
    return cases.rope_inputs(shape, device, seed, exact=exact, transposed=transposed)


VARIANTS = sorted(rope.ACCEPTED_VARIANTS)

# (B, S, H, D). Awkward on purpose: non-power-of-two head counts (3, 24),
# a partial second head block for "blocked" (17 = 16 + 1; 33 = 16 + 16 + 1),
# S=1, B>1, a non-power-of-two half dim (D=96 -> 48) and the smallest head (D=2).
SHAPES = [
    (1, 4, 3, 64),
    (2, 3, 24, 128),
    (1, 2, 17, 96),
    (2, 1, 5, 64),
    (3, 2, 33, 16),
    (1, 3, 1, 2),
    # "tiled" with several tokens per program (the interpreter counts as one SM):
    # masked heads (5 of 8), a partial second head block (33 = 32 + 1) with 4 tokens
    # per program, and masked columns (D=96 -> 48 of 64) with 2.
    (2, 8, 5, 64),
    (1, 16, 33, 16),
    (4, 4, 3, 96),
]


def shape_id(shape) -> str:
    return "B{}_S{}_H{}_D{}".format(*shape)


def bf16_ulp(t: torch.Tensor) -> torch.Tensor:
    """Spacing of bf16 numbers at |t|: t = m * 2**e with 0.5 <= |m| < 1, 8 significant bits."""
    _, exponent = torch.frexp(t.float())
    return torch.ldexp(torch.ones_like(exponent, dtype=torch.float32), exponent - 8)


def assert_bitexact(out: torch.Tensor, expected: torch.Tensor) -> None:
    assert out.shape == expected.shape, (out.shape, expected.shape)
    assert out.dtype == expected.dtype, (out.dtype, expected.dtype)
    unwritten = int(out.isnan().sum())
    assert unwritten == 0, f"{unwritten} output elements never written (NaN poison survived)"
    torch.testing.assert_close(out, expected, atol=0, rtol=0)


def check_exact(x, cos, sin, variant: str) -> None:
    """The bit-exactness check every exact-input test (and every mutant) goes through."""
    before = [t.clone() for t in (x, cos, sin)]
    out = rope.apply_ltx2_split_rotary_emb(x, cos, sin, variant=variant)
    assert_bitexact(out, reference.split_rotary_reference(x, cos, sin))
    for t, t0 in zip((x, cos, sin), before, strict=True):
        assert torch.equal(t, t0), "kernel modified an input"


def check_within_rounding(x, cos, sin, variant: str) -> None:
    """Random-input check: kernel and reference may differ only by their rounding modes.

    The chain rounds twice: ``c = bf16(x1 * cos)``, then ``bf16(c - x2 * sin)``.
    Truncation (interpreter) and round-to-nearest-even (reference) can land one
    ulp apart at each point. The first point's ulp is that of ``c``, not of the
    output: when ``c`` and ``x2 * sin`` cancel it is far larger than the
    output's ulp (we saw 8192 output-ulps at B2_S8_H32_D128), so "1 ulp of the
    output" is no bound. We allow one ulp of ``c`` plus one of the output, each
    doubled because the ulp is measured at the reference's value, which may sit
    one binade below the kernel's. On a GPU both round to nearest even, so the
    difference is exactly zero (tests/test_gpu_bitexact.py).
    """
    out = rope.apply_ltx2_split_rotary_emb(x, cos, sin, variant=variant)
    expected = reference.split_rotary_reference(x, cos, sin)
    # The reference with sin = 0 is exactly the first rounding point, bf16(x * cos).
    cos_term = reference.split_rotary_reference(x, cos, torch.zeros_like(sin))
    assert not out.isnan().any(), "output elements never written (NaN poison survived)"
    tol = 2 * (bf16_ulp(cos_term) + bf16_ulp(expected))
    err = (out.float() - expected.float()).abs()
    bad = err > tol
    assert not bad.any(), (
        f"{int(bad.sum())} elements beyond the rounding-mode bound; "
        f"worst error {err.max().item()} at {tuple(bad.nonzero()[0].tolist())}"
    )


# --- the input construction itself ----------------------------------------------


@pytest.mark.parametrize("transposed", [False, True])
def test_exact_inputs_never_round(transposed):
    """The premise of the bit-exact tests: on exact inputs the bf16 chain equals fp64 math.

    x is an integer in [-16, 16] and cos/sin are in {±0.5, ±1, ±2}, so each
    product is k/2 with |k| <= 64 and each output k/2 with |k| <= 128: at most
    8 significant bits, which bf16 holds exactly. No rounding mode can matter.
    """
    B, S, H, D = 2, 3, 5, 16
    x, cos, sin = rope_inputs(B, S, H, D, seed=1, exact=True, transposed=transposed)
    xd = x.double().reshape(B, S, H, 2, D // 2)
    c = cos.double().transpose(1, 2)  # [B, S, H, D/2]
    s = sin.double().transpose(1, 2)
    x1, x2 = xd[..., 0, :], xd[..., 1, :]
    exact = torch.stack([x1 * c - x2 * s, x2 * c + x1 * s], dim=-2).reshape(B, S, H * D)
    assert torch.equal(reference.split_rotary_reference(x, cos, sin).double(), exact)
    # ...and the values are not degenerate: many distinct, mostly nonzero.
    assert x.unique().numel() > 20 and cos.unique().numel() == 6
    assert (x != 0).float().mean() > 0.9


# --- correctness ---------------------------------------------------------------------


@pytest.mark.parametrize("transposed", [False, True], ids=["contig", "transposed"])
@pytest.mark.parametrize("shape", SHAPES, ids=shape_id)
@pytest.mark.parametrize("variant", VARIANTS)
def test_bitexact_on_exact_inputs(variant, shape, transposed, poison):
    x, cos, sin = rope_inputs(*shape, seed=sum(shape), exact=True, transposed=transposed)
    check_exact(x, cos, sin, variant)
    assert poison.calls == 1  # the output really was NaN-poisoned


@pytest.mark.parametrize("shape", [(2, 3, 24, 128), (1, 2, 17, 96)], ids=shape_id)
@pytest.mark.parametrize("variant", VARIANTS)
def test_random_inputs_within_rounding_mode_difference(variant, shape, poison):
    x, cos, sin = rope_inputs(*shape, seed=7, transposed=True)
    check_within_rounding(x, cos, sin, variant)
    assert poison.calls == 1


@pytest.mark.parametrize("variant", VARIANTS)
def test_cos_sin_strides_are_honoured(variant):
    """cos/sin may be any view with unit last stride: here a slice of a wider, padded tensor."""
    B, S, H, D = 2, 3, 5, 16
    x, cos, sin = rope_inputs(B, S, H, D, seed=3, exact=True)
    pad_cos, pad_sin = (torch.full((B, H + 2, S + 1, D), 99.0, device=DEVICE) for _ in range(2))
    pad_cos, pad_sin = pad_cos.to(torch.bfloat16), pad_sin.to(torch.bfloat16)
    pad_cos[:, 1 : H + 1, :S, : D // 2] = cos
    pad_sin[:, 1 : H + 1, :S, : D // 2] = sin
    cos_view = pad_cos[:, 1 : H + 1, :S, : D // 2]
    sin_view = pad_sin[:, 1 : H + 1, :S, : D // 2]
    assert not cos_view.is_contiguous()
    check_exact(x, cos_view, sin_view, variant)


@pytest.mark.parametrize("variant", VARIANTS)
def test_batch_broadcast_cos_sin(variant):
    """A stride-0 batch dim (cos shared across the batch, as expand() gives) is read correctly."""
    B, S, H, D = 3, 2, 4, 16
    x, cos, sin = rope_inputs(B, S, H, D, seed=4, exact=True)
    cos_b, sin_b = cos[:1].expand(B, -1, -1, -1), sin[:1].expand(B, -1, -1, -1)
    assert cos_b.stride(0) == 0
    check_exact(x, cos_b, sin_b, variant)


@pytest.mark.parametrize(
    "shape", [(1, 3, 3, 12), (1, 2, 17, 96), (2, 8, 5, 64), (1, 16, 33, 16)], ids=shape_id
)
@pytest.mark.parametrize("variant", VARIANTS)
def test_stores_stay_inside_the_output(variant, shape, guarded):
    """The masks of a partial head block, of a half dim under its power of two, and of
    several tokens a program: nothing is stored outside the output. A store into the next
    token's rows is rewritten by that token's own program; past the last token only the
    guard band shows it."""
    check_exact(*rope_inputs(*shape, seed=23, exact=True), variant)
    assert guarded.calls == 1
    guarded.check()


def padded_token_major(t: torch.Tensor) -> torch.Tensor:
    """The values of a ``[B, H, S, D/2]`` tensor as a view into a padded ``[B, S+1, H+2, D]``
    buffer (99 in the padding): its batch, head and position strides all differ from a
    contiguous tensor's (for S > 2), so reading it through another tensor's strides reads
    other angles or padding."""
    B, H, S, half = t.shape
    buf = torch.full((B, S + 1, H + 2, 2 * half), 99.0, dtype=t.dtype, device=t.device)
    view = buf.transpose(1, 2)[:, 1 : H + 1, :S, :half]
    view.copy_(t)
    return view


@pytest.mark.parametrize("variant", VARIANTS)
def test_cos_and_sin_read_through_their_own_strides(variant, poison):
    """cos and sin in different layouts. Every other test gives them one layout, where a
    kernel or launcher that reads sin through cos's strides (or the reverse) is right by
    accident. 16 tokens: "tiled" takes two a program (its multi-token branch)."""
    B, S, H, D = 2, 8, 5, 12
    x, cos, sin = rope_inputs(B, S, H, D, seed=14, exact=True)  # head-major, contiguous
    odd_sin = padded_token_major(sin)
    assert all(a != b for a, b in zip(cos.stride()[:3], odd_sin.stride()[:3], strict=True))
    check_exact(x, cos, odd_sin, variant)
    check_exact(x, padded_token_major(cos), sin, variant)
    assert poison.calls == 2


@pytest.mark.parametrize("variant", VARIANTS)
def test_contiguous_x_with_odd_stride_in_size1_dim(variant, poison):
    """x is "contiguous" whatever the stride of a size-1 dim: PyTorch ignores it.

    With S = 1, ``x.stride(1)`` is such a stride (here 1, from a transposed
    [B, H*D, 1] buffer), so it must not be used as the token stride. The
    stride 1 keeps every read in bounds; a transpose(0, 1) of [1, B, H*D] gives
    stride(1) = B*H*D instead, which reads past the buffer.
    """
    B, S, H, D = 2, 1, 3, 8
    x, cos, sin = rope_inputs(B, S, H, D, seed=6, exact=True)
    x_odd = torch.empty((B, H * D, S), dtype=torch.bfloat16, device=DEVICE).transpose(1, 2)
    x_odd.copy_(x)
    assert x_odd.is_contiguous() and x_odd.stride(1) == 1
    check_exact(x_odd, cos, sin, variant)


@pytest.mark.parametrize("B, S", [(2, 0), (0, 3)])
@pytest.mark.parametrize("variant", VARIANTS)
def test_empty_input_returns_empty_output_without_launch(variant, B, S, record_launch):
    recorder = record_launch(rope, "_split_rope_kernel")
    x, cos, sin = rope_inputs(B, S, 3, 8, seed=0)
    out = rope.apply_ltx2_split_rotary_emb(x, cos, sin, variant=variant)
    assert out.shape == (B, S, 24) and out.dtype == torch.bfloat16
    assert recorder.launches == []


def test_default_variant_is_blocked(record_launch):
    recorder = record_launch(rope, "_split_rope_kernel")
    x, cos, sin = rope_inputs(1, 1, 17, 8, seed=0, exact=True)
    rope.apply_ltx2_split_rotary_emb(x, cos, sin)
    [(grid, meta)] = recorder.launches
    assert meta["BLOCK_HEADS"] == 16 and grid == (1, 2)


# --- launch configuration -------------------------------------------------------


# The documented configurations (module docstring), spelled out for a few H.
EXPECTED_CONFIG = {
    # H: (per_head (block_heads, head_blocks, num_warps, block_tokens), blocked (...))
    1: ((1, 1, 1, 1), (1, 1, 1, 1)),
    3: ((1, 3, 1, 1), (4, 1, 4, 1)),
    5: ((1, 5, 1, 1), (8, 1, 8, 1)),
    16: ((1, 16, 1, 1), (16, 1, 8, 1)),
    17: ((1, 17, 1, 1), (16, 2, 8, 1)),
    24: ((1, 24, 1, 1), (16, 2, 8, 1)),
    32: ((1, 32, 1, 1), (16, 2, 8, 1)),
    1024: ((1, 1024, 1, 1), (16, 64, 8, 1)),
}


@pytest.mark.parametrize("H", sorted(EXPECTED_CONFIG))
def test_launch_config_table(H):
    per_head, blocked = EXPECTED_CONFIG[H]
    assert tuple(rope.ALGORITHMS["per_head"](H)) == (*per_head, False)
    assert tuple(rope.ALGORITHMS["blocked"](H)) == (*blocked, False)


# (head_dim, tokens = B*S, num_sms): decode-sized and video-sized grids, odd and
# power-of-two token counts, the smallest and largest head dims.
PROBLEMS = [
    (2, 1, 132),
    (64, 100, 132),
    (64, 6144, 132),
    (128, 16384, 132),
    (128, 13377, 132),
    (512, 8192, 132),
    (64, 24, 1),
    (96, 40, 1),
]


# "tiled" at production problems on a 132-SM GPU: (H, D, tokens) -> (block_heads,
# head_blocks, num_warps, block_tokens). A whole token's 32 heads per program, two
# tokens where one is half a tile (D=64, or 16 heads of 128), one token at D=128;
# blocked's configuration where the grid would leave SMs idle (decode, 1k tokens).
TILED_CONFIG = {
    (32, 64, 6144): (32, 1, 16, 2),
    (32, 64, 1536): (32, 1, 8, 1),
    (32, 64, 6145): (32, 1, 8, 1),
    (32, 128, 16384): (32, 1, 16, 1),
    (16, 128, 4096): (16, 1, 16, 2),
    (32, 128, 1024): (16, 2, 8, 1),
    (32, 64, 100): (16, 2, 8, 1),
    # exactly MIN_PROGRAMS_PER_SM programs per SM: tiled, not the decode fallback
    (32, 128, 1056): (32, 1, 16, 1),
    (32, 256, 8192): (16, 2, 16, 1),
}


@pytest.mark.parametrize("problem", sorted(TILED_CONFIG), ids=str)
def test_tiled_config_table(problem):
    assert tuple(rope.ALGORITHMS["tiled"](*problem, 132)) == (*TILED_CONFIG[problem], False)


@pytest.mark.parametrize("problem", sorted(TILED_CONFIG), ids=str)
def test_tiled_pdl_is_tiled_with_programmatic_dependent_launch(problem):
    tiled = rope.ALGORITHMS["tiled"](*problem, 132)
    assert rope.ALGORITHMS["tiled_pdl"](*problem, 132) == tiled._replace(pdl=True)


def test_tiled_pdl_is_tiled_plus_pdl_only_where_the_device_has_it(record_launch):
    """Where the device has no programmatic dependent launch (the interpreter, an A100),
    "tiled_pdl" is the same launch as "tiled": PDL off in the kernel, no launch_pdl option.
    On a Hopper it is that launch with PDL on in both, and nothing else changed."""
    x, cos, sin = rope_inputs(2, 6, 4, 16, seed=1, exact=True)
    has_pdl = rope._has_pdl(x.device)
    assert not rope._has_pdl(torch.device("cpu"))
    recorder = record_launch(rope, "_split_rope_kernel")
    for variant in ("tiled", "tiled_pdl"):
        out = rope.apply_ltx2_split_rotary_emb(x, cos, sin, variant=variant, launch="triton")
        assert torch.equal(out, reference.split_rotary_reference(x, cos, sin))
    (grid_a, meta_a), (grid_b, meta_b) = recorder.launches
    assert meta_a["PDL"] is False and not meta_a.get("launch_pdl", False)
    assert grid_a == grid_b
    assert meta_b["PDL"] is has_pdl and meta_b.get("launch_pdl", False) is has_pdl
    unpdl = {k: v for k, v in meta_b.items() if k != "launch_pdl"} | {"PDL": False}
    assert unpdl == {k: v for k, v in meta_a.items() if k != "launch_pdl"}


@pytest.mark.parametrize("variant", VARIANTS)
def test_launch_config_covers_every_head_and_token_once(variant):
    for H in range(1, rope.MAX_HEADS + 1):
        for head_dim, tokens, num_sms in PROBLEMS:
            cfg = rope.ALGORITHMS[rope.CALLS[(variant, "auto")][0]](H, head_dim, tokens, num_sms)
            bh, bt = cfg.block_heads, cfg.block_tokens
            where = f"H={H} D={head_dim} tokens={tokens}: {cfg}"
            assert bh & (bh - 1) == 0, f"{where}: BLOCK_HEADS must be a power of two (tl.arange)"
            assert bh * cfg.head_blocks >= H, f"{where} leaves heads uncovered"
            assert bh * (cfg.head_blocks - 1) < H, f"{where} launches an empty head block"
            assert bt & (bt - 1) == 0 and tokens % bt == 0, f"{where}: a partial token block"
            assert 1 <= cfg.num_warps <= rope.MAX_WARPS
            assert cfg.num_warps & (cfg.num_warps - 1) == 0


@pytest.mark.parametrize(
    "shape", [(1, 4, 3, 64), (2, 1, 17, 96), (1, 2, 24, 128), (2, 8, 5, 64)], ids=shape_id
)
@pytest.mark.parametrize("variant", VARIANTS)
def test_kernel_launched_with_variant_config(variant, shape, record_launch):
    B, S, H, D = shape
    recorder = record_launch(rope, "_split_rope_kernel")
    x, cos, sin = rope_inputs(*shape, seed=0)
    rope.apply_ltx2_split_rotary_emb(x, cos, sin, variant=variant)
    # The device's SM count, as the launcher asks (one in the interpreter): the tiled
    # configurations size token blocks by it.
    cfg = rope.ALGORITHMS[rope.CALLS[(variant, "auto")][0]](H, D, B * S, rope._num_sms(x.device))
    [(grid, meta)] = recorder.launches
    assert grid == (B * S // cfg.block_tokens, cfg.head_blocks)
    assert meta["BLOCK_TOKENS"] == cfg.block_tokens
    assert meta["BLOCK_HEADS"] == cfg.block_heads
    assert meta["num_warps"] == cfg.num_warps
    assert meta["BLOCK_HALF"] == triton.next_power_of_2(D // 2)
    if variant == "per_head":
        assert grid == (B * S, H) and meta["num_warps"] == 1


# --- mutation tests: the checks above must fail for a wrongly indexed kernel -------

# Positional arguments of _split_rope_kernel, by name, so a mutant reads as what it breaks.
ARGS = (
    *("x", "cos", "sin", "out", "S", "H", "HALF", "stride_x_tok"),
    *(
        "stride_cos_b",
        "stride_cos_h",
        "stride_cos_s",
        "stride_sin_b",
        "stride_sin_h",
        "stride_sin_s",
    ),
)


def _with(args, **changes):
    named = dict(zip(ARGS, args, strict=True))
    named.update(changes)
    return tuple(named[a] for a in ARGS)


def _swap_cos_sin(grid, args, kw):
    n = dict(zip(ARGS, args, strict=True))
    return grid, _with(args, cos=n["sin"], sin=n["cos"]), kw


def _heads_and_positions_transposed(grid, args, kw):
    # Head offset computed with the position stride and vice versa: heads swap
    # (in bounds because the mutant shape has S == H).
    n = dict(zip(ARGS, args, strict=True))
    return (
        grid,
        _with(
            args,
            stride_cos_h=n["stride_cos_s"],
            stride_cos_s=n["stride_cos_h"],
            stride_sin_h=n["stride_sin_s"],
            stride_sin_s=n["stride_sin_h"],
        ),
        kw,
    )


def _batch_stride_ignored(grid, args, kw):
    return grid, _with(args, stride_cos_b=0, stride_sin_b=0), kw


def _view_strides_ignored(grid, args, kw):
    # Strides of a contiguous [B, H, S, D/2] used for the transposed view.
    n = dict(zip(ARGS, args, strict=True))
    B, H, S, half = n["cos"].shape
    contiguous = {"b": H * S * half, "h": S * half, "s": half}
    changes = {f"stride_{t}_{d}": v for t in ("cos", "sin") for d, v in contiguous.items()}
    return grid, _with(args, **changes), kw


def _last_head_missed(grid, args, kw):
    n = dict(zip(ARGS, args, strict=True))
    return grid, _with(args, H=n["H"] - 1), kw


def _last_token_missed(grid, args, kw):
    return (grid[0] - 1, *grid[1:]), args, kw


MUTANTS = {
    # name: (mutate, shape, transposed cos/sin)
    "cos_sin_swapped": (_swap_cos_sin, (2, 3, 5, 16), False),
    "heads_and_positions_transposed": (_heads_and_positions_transposed, (1, 3, 3, 16), False),
    "batch_stride_ignored": (_batch_stride_ignored, (2, 2, 3, 16), False),
    "view_strides_ignored": (_view_strides_ignored, (1, 3, 4, 16), True),
    "last_head_missed": (_last_head_missed, (1, 2, 17, 16), False),
    "last_token_missed": (_last_token_missed, (2, 2, 3, 16), False),
}
CHECKS = {"exact": check_exact, "within_rounding": check_within_rounding}
# What the checks say when they fail (not some incidental assertion).
CHECK_FAILED = "never written|not equal|beyond the rounding-mode bound"


@pytest.mark.parametrize("check", sorted(CHECKS))
@pytest.mark.parametrize("mutant", sorted(MUTANTS))
@pytest.mark.parametrize("variant", VARIANTS)
def test_checks_catch_mutant_launch(variant, mutant, check, poison, record_launch):
    mutate, shape, transposed = MUTANTS[mutant]
    recorder = record_launch(rope, "_split_rope_kernel", mutate=mutate)
    exact = check == "exact"
    x, cos, sin = rope_inputs(*shape, seed=11, exact=exact, transposed=transposed)
    with pytest.raises(AssertionError, match=CHECK_FAILED):
        CHECKS[check](x, cos, sin, variant)
    assert len(recorder.launches) == 1  # the mutant really ran


def _drop_last_head_block(num_heads: int, *_problem: int) -> rope.LaunchConfig:
    cfg = rope.ALGORITHMS["blocked"](num_heads)
    return cfg._replace(head_blocks=num_heads // cfg.block_heads)


@pytest.mark.parametrize("H", [17, 24, 33])
def test_checks_catch_config_dropping_last_head_block(H, poison, monkeypatch):
    monkeypatch.setitem(rope.ALGORITHMS, "mutant", _drop_last_head_block)
    monkeypatch.setitem(rope.CALLS, ("mutant", "auto"), ("mutant", "triton"))
    x, cos, sin = rope_inputs(1, 2, H, 16, seed=12, exact=True)
    with pytest.raises(AssertionError, match="never written"):
        check_exact(x, cos, sin, "mutant")


def test_fma_style_formula_differs_from_reference():
    """Gives bit-exactness teeth: one rounding instead of the reference's two changes bits.

    A kernel that fused ``x1*cos - x2*sin`` in fp32 (no bf16 rounding of the
    cos product) would be close but not equal; the GPU tests would catch it.
    """
    B, S, H, D = 2, 16, 8, 64
    x, cos, sin = rope_inputs(B, S, H, D, seed=5)
    xs = x.float().reshape(B, S, H, 2, D // 2)
    c, s = cos.float().transpose(1, 2), sin.float().transpose(1, 2)
    x1, x2 = xs[..., 0, :], xs[..., 1, :]
    fused = torch.stack([x1 * c - x2 * s, x2 * c + x1 * s], dim=-2).reshape(B, S, H * D)
    expected = reference.split_rotary_reference(x, cos, sin)
    assert not torch.equal(fused.to(torch.bfloat16), expected)


@pytest.mark.parametrize("variant", VARIANTS)
def test_cos_product_rounded_before_sine_term(variant, poison):
    """The rounding order, checked where both rounding modes agree (so also in the interpreter).

    x1 = cos = 1 + 2**-7: x1*cos = 1 + 2**-6 + 2**-14 drops 2**-14, under half
    an ulp (2**-8), so truncation and nearest-even both give 1 + 2**-6. With
    x2 = 1 + 2**-6 and sin = 1, out1 = 0 exactly. A kernel that skips that
    rounding (an FMA of x1*cos - x2*sin) returns 2**-14. out2's sums are exact
    too. Random signs per pair flip out1/out2 with them, keeping both exact.
    """
    B, S, H, D = 2, 3, 5, 16
    gen = torch.Generator().manual_seed(8)
    sign = torch.randint(0, 2, (B, S, H, 1, D // 2), generator=gen) * 2 - 1
    pair = torch.tensor([1 + 2**-7, 1 + 2**-6]).view(2, 1)  # (x1, x2)
    x = (sign * pair).reshape(B, S, H * D).to(DEVICE, torch.bfloat16)
    cos = torch.full((B, H, S, D // 2), 1 + 2**-7, dtype=torch.bfloat16, device=DEVICE)
    sin = torch.ones_like(cos)
    expected = reference.split_rotary_reference(x, cos, sin)
    out1 = expected.reshape(B, S, H, 2, D // 2)[..., 0, :]
    assert (out1 == 0).all()  # the premise: the rounding cancelled 2**-14
    check_exact(x, cos, sin, variant)
