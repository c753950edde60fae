"""AdaLN values9 kernel vs. the eager reference, and the output layout of each variant.

As in test_rope.py: bit-exact on inputs where nothing rounds (the CPU
interpreter truncates where a GPU rounds to nearest even), a rounding-mode
bound on random inputs, and mutation tests proving the checks have teeth.
"""

from __future__ import annotations

import pytest
import torch
import triton

from ltx2k import runtime
from ltx2k.kernels import adaln
from ltx2k.workload import cases, reference, shapes

DEVICE = runtime.device()


def ada_inputs(B, S, D, table_dtype, *, seed, exact=False, device=DEVICE):
    """The inputs the benchmarks and the gate use (ltx2k.workload.cases); table_dtype is
    "bf16" or "fp32"."""
    return cases.ada_inputs(shapes.AdaShape(B, S, D, table_dtype), device, seed, exact=exact)


VARIANTS = sorted(adaln.ACCEPTED_VARIANTS)
# The mutants below rewrite the row kernel's launch; the grid kernel's are in
# test_algorithms_and_launch_paths.py.
ROW_KERNEL_VARIANTS = sorted(adaln.ROW_ALGORITHMS)
TABLE_DTYPES = ("bf16", "fp32")

# (B, S, D): non-power-of-two D (100, 513), D=1, the production 2048 at small
# B*S, B>1 and S=1, and the largest supported D.
SHAPES = [(1, 1, 100), (2, 3, 2048), (2, 1, 1), (1, 2, 513), (1, 1, adaln.MAX_D)]


def shape_id(shape) -> str:
    return "B{}_S{}_D{}".format(*shape)


def bf16_ulp(t: torch.Tensor) -> torch.Tensor:
    """Spacing of bf16 numbers at |t|: t = m * 2**e with 0.5 <= |m| < 1, 8 significant bits."""
    _, exponent = torch.frexp(t.float())
    return torch.ldexp(torch.ones_like(exponent, dtype=torch.float32), exponent - 8)


def assert_layout(outs, B: int, S: int, D: int, variant: str) -> None:
    """9 contiguous, disjoint [B, S, D] bf16 tensors; one slab in order, or 9 storages."""
    assert isinstance(outs, tuple) and len(outs) == 9
    n = B * S * D
    for o in outs:
        assert o.shape == (B, S, D) and o.dtype == torch.bfloat16 and o.is_contiguous()
    spans = sorted((o.data_ptr(), o.data_ptr() + o.nbytes) for o in outs)
    assert all(end <= start for (_, end), (start, _) in zip(spans, spans[1:], strict=False)), (
        "outputs overlap"
    )
    storages = [o.untyped_storage() for o in outs]
    if variant != "separate":  # every other variant returns views of one slab
        assert len({s.data_ptr() for s in storages}) == 1, "slab outputs must share one storage"
        assert storages[0].nbytes() == 9 * n * 2
        assert [o.storage_offset() for o in outs] == [i * n for i in range(9)], "slab out of order"
    else:
        assert len({s.data_ptr() for s in storages}) == 9, "separate outputs must not share storage"
        assert all(s.nbytes() == n * 2 for s in storages)


def check_exact(table, timestep, variant: str) -> None:
    """The bit-exactness check every exact-input test (and every mutant) goes through."""
    before = (table.clone(), timestep.clone())
    outs = adaln.ltx2_ada_values9(table, timestep, variant=variant)
    B, S, _ = timestep.shape
    assert_layout(outs, B, S, table.shape[1], variant)
    for i, (out, expected) in enumerate(
        zip(outs, reference.ada_values9_reference(table, timestep), strict=True)
    ):
        unwritten = int(out.isnan().sum())
        assert unwritten == 0, (
            f"value {i}: {unwritten} elements never written (NaN poison survived)"
        )
        torch.testing.assert_close(
            out, expected, atol=0, rtol=0, msg=lambda m, i=i: f"value {i}: {m}"
        )
    assert torch.equal(table, before[0]) and torch.equal(timestep, before[1]), "input modified"


def check_within_rounding(table, timestep, variant: str) -> None:
    """Random-input check: only the rounding mode may differ (truncation vs. nearest-even).

    One rounding point (the add) for a bf16 table; an fp32 table is first
    rounded to bf16, a second point whose ulp is that of bf16(table). Each
    allowance is doubled because the ulp is taken at the reference's value,
    which may sit one binade below the kernel's.
    """
    outs = adaln.ltx2_ada_values9(table, timestep, variant=variant)
    if table.dtype == torch.bfloat16:
        table_ulp = torch.zeros(table.shape, device=table.device)
    else:
        table_ulp = bf16_ulp(table.to(torch.bfloat16))
    for i, (out, expected) in enumerate(
        zip(outs, reference.ada_values9_reference(table, timestep), strict=True)
    ):
        assert not out.isnan().any(), f"value {i}: elements never written (NaN poison survived)"
        tol = 2 * (bf16_ulp(expected) + table_ulp[i])
        err = (out.float() - expected.float()).abs()
        assert (err <= tol).all(), f"value {i}: worst error {err.max().item()} beyond the bound"


def test_exact_inputs_never_round():
    """The premise of the bit-exact tests: on exact inputs the bf16 sums equal fp64 math.

    Table values are k/2 in [-8, 8] and timesteps integers in [-16, 16], so
    every sum is k/2 with |k| <= 48: 6 significant bits, exact in bf16.
    """
    B, S, D = 2, 3, 40
    for table_dtype in TABLE_DTYPES:
        table, ts = ada_inputs(B, S, D, table_dtype, seed=1, exact=True)
        exact = table.double().view(1, 1, 9, D) + ts.double().view(B, S, 9, D)
        for i, out in enumerate(reference.ada_values9_reference(table, ts)):
            assert torch.equal(out.double(), exact[:, :, i])
        assert table.unique().numel() > 20 and ts.unique().numel() > 20


@pytest.mark.parametrize("table_dtype", TABLE_DTYPES)
@pytest.mark.parametrize("shape", SHAPES, ids=shape_id)
@pytest.mark.parametrize("variant", VARIANTS)
def test_bitexact_on_exact_inputs(variant, shape, table_dtype, poison):
    table, ts = ada_inputs(*shape, table_dtype, seed=sum(shape), exact=True)
    check_exact(table, ts, variant)
    assert poison.calls == (9 if variant == "separate" else 1)  # every output was NaN-poisoned


@pytest.mark.parametrize("table_dtype", TABLE_DTYPES)
@pytest.mark.parametrize("variant", VARIANTS)
def test_random_inputs_within_rounding_mode_difference(variant, table_dtype, poison):
    table, ts = ada_inputs(2, 3, 2048, table_dtype, seed=7)
    check_within_rounding(table, ts, variant)


@pytest.mark.parametrize("variant", VARIANTS)
def test_fp32_table_rounded_before_add(variant, poison):
    """The rounding order, checked where both rounding modes agree (so also in the interpreter).

    table = ±(1 + 2**-7 + 2**-12) in fp32 rounds to ±(1 + 2**-7) under truncation
    and nearest-even alike (2**-12 is under half an ulp, 2**-8); adding
    timestep = -table's bf16 value gives exactly 0. A kernel that adds the
    unrounded fp32 table returns ±2**-12 instead.
    """
    B, S, D = 2, 3, 24
    gen = torch.Generator().manual_seed(9)
    sign = (torch.randint(0, 2, (9, D), generator=gen) * 2 - 1).float()
    table = (sign * (1 + 2**-7 + 2**-12)).to(DEVICE)
    ts = (-sign * (1 + 2**-7)).repeat(B, S, 1, 1).reshape(B, S, 9 * D)
    ts = ts.to(DEVICE, torch.bfloat16)
    assert all((v == 0).all() for v in reference.ada_values9_reference(table, ts))  # the premise
    check_exact(table, ts, variant)


@pytest.mark.parametrize("variant", VARIANTS)
def test_table_row_stride_is_honoured(variant):
    """The table may be a row-strided view (a slice of a wider table)."""
    B, S, D = 2, 2, 24
    table, ts = ada_inputs(B, S, D, "fp32", seed=3, exact=True)
    wide = torch.full((9, 2 * D), 99.0, device=DEVICE)
    wide[:, :D] = table
    view = wide[:, :D]
    assert view.stride() == (2 * D, 1)
    check_exact(view, ts, variant)


@pytest.mark.parametrize("shape", [(1, 2, 100), (2, 1, 1025)], ids=shape_id)
@pytest.mark.parametrize("variant", VARIANTS)
def test_stores_stay_inside_the_outputs(variant, shape, guarded):
    """D under its power of two (the row kernel's one block, the grid kernel's last column
    block): nothing is stored outside the outputs. The values only: the guard bands move
    the views' offsets, which check_exact's layout check would refuse."""
    table, ts = ada_inputs(*shape, "bf16", seed=25, exact=True)
    outs = adaln.ltx2_ada_values9(table, ts, variant=variant)
    for i, (out, want) in enumerate(
        zip(outs, reference.ada_values9_reference(table, ts), strict=True)
    ):
        assert torch.equal(out, want), f"value {i}: not equal"
    assert guarded.calls == (9 if variant == "separate" else 1)
    guarded.check()


@pytest.mark.parametrize("B, S", [(2, 0), (0, 3)])
@pytest.mark.parametrize("variant", VARIANTS)
def test_empty_input_returns_empty_outputs_without_launch(variant, B, S, record_launch):
    recorder = record_launch(adaln, "_ada_values9_kernel")
    table, ts = ada_inputs(B, S, 16, "bf16", seed=0)
    outs = adaln.ltx2_ada_values9(table, ts, variant=variant)
    assert len(outs) == 9 and all(o.shape == (B, S, 16) for o in outs)
    assert recorder.launches == []


def test_default_variant_is_slab(poison):
    table, ts = ada_inputs(1, 2, 8, "bf16", seed=0, exact=True)
    outs = adaln.ltx2_ada_values9(table, ts)
    assert poison.calls == 1
    assert_layout(outs, 1, 2, 8, "slab")


@pytest.mark.parametrize("shape", [(1, 1, 100), (2, 3, 2048), (1, 1, 1)], ids=shape_id)
def test_kernel_launched_one_program_per_row(shape, record_launch):
    B, S, D = shape
    recorder = record_launch(adaln, "_ada_values9_kernel")
    adaln.ltx2_ada_values9(*ada_inputs(*shape, "bf16", seed=0), variant="slab")
    [(grid, meta)] = recorder.launches
    assert grid == (B * S,)
    assert meta["BLOCK_D"] == triton.next_power_of_2(D) >= D
    assert 1 <= meta["num_warps"] <= 8


# --- mutation tests: the checks above must fail for a wrongly indexed kernel --------


def _swap_outputs_3_4(grid, args, kw):
    # args: table, timestep, o0..o8, D, stride_table
    a = list(args)
    a[5], a[6] = a[6], a[5]
    return grid, tuple(a), kw


def _table_row_stride_zero(grid, args, kw):
    return grid, (*args[:-1], 0), kw


def _d_off_by_one(grid, args, kw):
    return grid, (*args[:-2], args[-2] - 1, args[-1]), kw


def _last_row_missed(grid, args, kw):
    return (grid[0] - 1,), args, kw


MUTANT_LAUNCHES = {
    "outputs_3_4_swapped": _swap_outputs_3_4,
    "table_row_stride_zero": _table_row_stride_zero,
    "D_off_by_one": _d_off_by_one,
    "last_row_missed": _last_row_missed,
}
CHECKS = {"exact": check_exact, "within_rounding": check_within_rounding}
# What the checks say when they fail (not some incidental assertion).
CHECK_FAILED = "never written|not equal|beyond the bound"


@pytest.mark.parametrize("check", sorted(CHECKS))
@pytest.mark.parametrize("mutant", sorted(MUTANT_LAUNCHES))
@pytest.mark.parametrize("variant", ROW_KERNEL_VARIANTS)
def test_checks_catch_mutant_launch(variant, mutant, check, poison, record_launch):
    recorder = record_launch(adaln, "_ada_values9_kernel", mutate=MUTANT_LAUNCHES[mutant])
    table, ts = ada_inputs(2, 2, 48, "fp32", seed=11, exact=check == "exact")
    with pytest.raises(AssertionError, match=CHECK_FAILED):
        CHECKS[check](table, ts, variant)
    assert len(recorder.launches) == 1  # the mutant really ran


def _slab_reversed(B, S, D, device):
    # Values still land in the right tensors, but the slab is out of order.
    return adaln._alloc_slab(B, S, D, device)[::-1]


def _slab_overlapping(B, S, D, device):
    one = torch.empty((B, S, D), dtype=torch.bfloat16, device=device)
    return (one,) * 9


def _separate_sharing_storage(B, S, D, device):
    # 9 disjoint views of one buffer, but claimed as "separate" allocations.
    return adaln._alloc_slab(B, S, D, device)


@pytest.mark.parametrize(
    "variant, alloc, failure",
    [
        ("slab", _slab_reversed, "slab out of order"),
        ("slab", _slab_overlapping, "overlap"),
        ("separate", _slab_overlapping, "overlap"),
        ("separate", _separate_sharing_storage, "must not share storage"),
    ],
    ids=["slab_reversed", "slab_overlapping", "separate_overlapping", "separate_one_storage"],
)
def test_checks_catch_mutant_allocation(variant, alloc, failure, monkeypatch):
    monkeypatch.setitem(adaln.ROW_ALGORITHMS, variant, alloc)
    table, ts = ada_inputs(1, 2, 16, "bf16", seed=13, exact=True)
    with pytest.raises(AssertionError, match=failure):
        check_exact(table, ts, variant)
