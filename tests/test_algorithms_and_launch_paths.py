"""The variants after sglang's originals: blocked_wide (RoPE), slab_grid (AdaLN), the launch
paths of both (ltx2k.kernels._launch).

- Bit-exactness on exact inputs (the CPU interpreter truncates where a GPU
  rounds to nearest even, so only inputs that never round are bit-comparable
  there), NaN-poisoned outputs, awkward shapes, strided views.
- The slab variants' layout: 9 contiguous, disjoint views of one allocation, in order.
- Mutation tests: the grid kernel launched with wrong indexing must fail the checks.
- The lean path's logic against a stand-in compiled kernel (its key, its
  fallbacks, its warn-once), and the Triton launcher protocol it mirrors,
  pinned against the installed Triton's own source.
- Offline sm_90 compiles (no GPU needed): the PTX facts the predictions in
  docs/kernels/*.md rest on (access widths, registers, serialized rounds).
- On a GPU: random inputs, repeated calls through the fast path, misaligned
  views, CUDA graph capture, torch.compile(fullgraph=True).
"""

from __future__ import annotations

import inspect
import math
import os
import re
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest
import torch
import triton
import triton.language as tl

from ltx2k import runtime
from ltx2k.kernels import _launch, adaln, rope
from ltx2k.workload import cases, reference, shapes, variants

DEVICE = runtime.device()
ON_GPU = DEVICE == "cuda"
ROOT = Path(__file__).resolve().parent.parent

# The native variants (the native call path, tests/test_native.py) run every check here too.
NEW_ROPE = ("blocked_lean", "blocked_wide", "blocked_native")
NEW_ADA = ("slab_grid", "slab_lean", "slab_native", "slab_dconst")
gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def rope_inputs(B, S, H, D, *, seed, exact=True, transposed=True):
    return cases.rope_inputs(
        shapes.RopeShape(B, S, H, D), DEVICE, seed, exact=exact, transposed=transposed
    )


def ada_inputs(B, S, D, table_dtype="bf16", *, seed, exact=True):
    return cases.ada_inputs(shapes.AdaShape(B, S, D, table_dtype), DEVICE, seed, exact=exact)


def assert_bitexact(out: torch.Tensor, expected: torch.Tensor, what: str = "output") -> None:
    assert out.shape == expected.shape and out.dtype == expected.dtype, (out.shape, out.dtype)
    unwritten = int(out.isnan().sum())
    assert unwritten == 0, f"{what}: {unwritten} elements never written (NaN poison survived)"
    torch.testing.assert_close(out, expected, atol=0, rtol=0, msg=lambda m: f"{what}: {m}")


def assert_slab_layout(outs, B: int, S: int, D: int) -> None:
    """9 contiguous [B, S, D] bf16 views of one (9, B, S, D) allocation, value i at i*B*S*D."""
    assert isinstance(outs, tuple) and len(outs) == 9
    n = B * S * D
    for o in outs:
        assert o.shape == (B, S, D) and o.dtype == torch.bfloat16 and o.is_contiguous()
    storages = {o.untyped_storage().data_ptr() for o in outs}
    assert len(storages) == 1, f"slab outputs must share one storage, got {len(storages)}"
    assert outs[0].untyped_storage().nbytes() == 9 * n * 2
    assert [o.storage_offset() for o in outs] == [i * n for i in range(9)], "slab out of order"


def check_rope(x, cos, sin, variant: str) -> None:
    before = [t.clone() for t in (x, cos, sin)]
    out = rope.apply_ltx2_split_rotary_emb(x, cos, sin, variant=variant)
    assert_bitexact(out, reference.split_rotary_reference(x, cos, sin))
    assert all(torch.equal(t, t0) for t, t0 in zip((x, cos, sin), before, strict=True)), (
        "input modified"
    )


def check_ada(table, timestep, variant: str) -> None:
    before = (table.clone(), timestep.clone())
    outs = adaln.ltx2_ada_values9(table, timestep, variant=variant)
    B, S, _ = timestep.shape
    assert_slab_layout(outs, B, S, table.shape[1])
    refs = reference.ada_values9_reference(table, timestep)
    for i, (o, r) in enumerate(zip(outs, refs, strict=True)):
        assert_bitexact(o, r, f"value {i}")
    assert torch.equal(table, before[0]) and torch.equal(timestep, before[1]), "input modified"


# --- registration ------------------------------------------------------------------


def test_new_variants_are_registered_and_appended():
    """Reachable through the kernels and the harness; the benchmarks' variants are the
    device algorithms, appended after the old names; older pair names still call."""
    assert set(NEW_ROPE) <= set(rope.ACCEPTED_VARIANTS) and set(NEW_ADA) <= set(
        adaln.ACCEPTED_VARIANTS
    )
    assert variants.TIMED_VARIANTS["split_rope"][:4] == ("per_head", "blocked", "eager", "compiled")
    assert variants.TIMED_VARIANTS["ada_values9"][:4] == ("separate", "slab", "eager", "compiled")
    assert set(variants.TIMED_VARIANTS["split_rope"]) - set(cases.PEERS) == set(rope.ALGORITHMS)
    assert set(variants.TIMED_VARIANTS["ada_values9"]) - set(cases.PEERS) == set(adaln.ALGORITHMS)
    for kernel, names in (("split_rope", NEW_ROPE), ("ada_values9", NEW_ADA)):
        for v in names:
            assert cases.variant_fn(kernel, v).keywords == {"variant": v}


def test_defaults_are_the_measured_winners():
    """The tiled kernel with programmatic dependent launch and, for AdaLN, the grid kernel
    with D compiled in, each through the native call path (host latency below eager's;
    docs/kernels/*.md)."""
    rope_params = inspect.signature(rope.apply_ltx2_split_rotary_emb).parameters
    ada_params = inspect.signature(adaln.ltx2_ada_values9).parameters
    assert rope_params["variant"].default == "tiled_pdl"
    assert rope_params["launch"].default == "auto"
    assert rope.CALLS[("tiled_pdl", "auto")] == ("tiled_pdl", "native")
    assert ada_params["variant"].default == "slab_dconst" and ada_params["launch"].default == "auto"
    assert rope.CALLS[("blocked", "auto")] == ("blocked", "native")
    assert adaln.CALLS[("slab_dconst", "auto")] == ("slab_dconst", "native")
    assert adaln.CALLS[("slab", "auto")] == ("slab", "triton")  # the row kernel has one path


@pytest.mark.parametrize(
    "call, message",
    [
        (dict(variant="nope"), r"variant must be one of \[.*'blocked'.*\], got 'nope'"),
        (dict(launch="fast"), r"launch must be one of \['auto', 'triton', 'lean', 'native'\]"),
        (dict(variant="blocked_lean", launch="native"), r"launch='native' is not available"),
    ],
)
def test_rope_rejects_an_unknown_variant_or_launch(call, message):
    x, cos, sin = rope_inputs(1, 2, 3, 64, seed=0)
    with pytest.raises(ValueError, match=message):
        rope.apply_ltx2_split_rotary_emb(x, cos, sin, **call)


def test_ada_row_kernel_takes_no_fast_launch_path():
    table, ts = ada_inputs(1, 1, 64, seed=0)
    with pytest.raises(ValueError, match=r"variant='separate'; it takes \['auto', 'triton'\]"):
        adaln.ltx2_ada_values9(table, ts, variant="separate", launch="native")


@pytest.mark.parametrize("launch", ["triton", "lean", "native"])
@pytest.mark.parametrize("variant", ["per_head", "blocked", "blocked_wide"])
def test_rope_every_algorithm_launch_pair_is_bitexact(variant, launch, poison):
    x, cos, sin = rope_inputs(2, 3, 17, 96, seed=5)
    for _ in range(2):  # the native path records, then replays
        out = rope.apply_ltx2_split_rotary_emb(x, cos, sin, variant=variant, launch=launch)
        assert cases.outputs_equal(out, reference.split_rotary_reference(x, cos, sin))


@pytest.mark.parametrize("launch", ["triton", "lean", "native"])
@pytest.mark.parametrize("variant", ["slab_grid", "slab_dconst"])
def test_ada_every_grid_algorithm_launch_pair_is_bitexact(variant, launch, poison):
    table, ts = ada_inputs(2, 3, 100, "fp32", seed=5)
    for _ in range(2):
        outs = adaln.ltx2_ada_values9(table, ts, variant=variant, launch=launch)
        assert cases.outputs_equal(outs, reference.ada_values9_reference(table, ts))


# --- RoPE: bit-exact on exact inputs --------------------------------------------------

# Awkward on purpose: H=3 (one partial block), 33 = 32 + 1 (a partial second
# block for "blocked_wide"), 17 (for "blocked"), S=1, B>1, D=96 (half 48, not a
# power of two), the smallest head D=2.
ROPE_SHAPES = [(1, 4, 3, 64), (2, 3, 33, 128), (1, 2, 17, 96), (2, 1, 5, 64), (1, 3, 1, 2)]


@pytest.mark.parametrize("transposed", [True, False], ids=["cs_transposed", "cs_contig"])
@pytest.mark.parametrize("shape", ROPE_SHAPES, ids=lambda s: "B{}_S{}_H{}_D{}".format(*s))
@pytest.mark.parametrize("variant", NEW_ROPE)
def test_rope_bitexact(variant, shape, transposed, poison):
    check_rope(*rope_inputs(*shape, seed=sum(shape), transposed=transposed), variant)
    assert poison.calls == 1


@pytest.mark.parametrize("variant", NEW_ROPE)
def test_rope_padded_and_broadcast_views(variant, poison):
    """cos/sin as slices of wider padded tensors, and a stride-0 batch (expand)."""
    B, S, H, D = 2, 3, 5, 16
    x, cos, sin = rope_inputs(B, S, H, D, seed=3, transposed=False)
    pads = [
        torch.full((B, H + 2, S + 1, D), 99.0, device=DEVICE).to(torch.bfloat16) for _ in range(2)
    ]
    for pad, t in zip(pads, (cos, sin), strict=True):
        pad[:, 1 : H + 1, :S, : D // 2] = t
    views = [p[:, 1 : H + 1, :S, : D // 2] for p in pads]
    check_rope(x, *views, variant)
    check_rope(x, cos[:1].expand(B, -1, -1, -1), sin[:1].expand(B, -1, -1, -1), variant)


# The documented wide configs, spelled out: (block_heads, head_blocks, num_warps).
WIDE_CONFIG = {  # H: (block_heads, head_blocks, num_warps, block_tokens)
    1: (1, 1, 1, 1),
    3: (4, 1, 1, 1),
    8: (8, 1, 2, 1),
    16: (16, 1, 4, 1),
    17: (32, 1, 8, 1),
    32: (32, 1, 8, 1),
    33: (32, 2, 8, 1),
    1024: (32, 32, 8, 1),
}


@pytest.mark.parametrize("H", sorted(WIDE_CONFIG))
def test_wide_config_table(H):
    assert tuple(rope.ALGORITHMS["blocked_wide"](H)) == (*WIDE_CONFIG[H], False)
    assert rope.CALLS[("blocked_lean", "auto")] == ("blocked", "lean")


@pytest.mark.parametrize("shape", [(1, 4, 3, 64), (2, 1, 33, 128)], ids=str)
def test_wide_launch_grid(shape, record_launch):
    B, S, H, D = shape
    recorder = record_launch(rope, "_split_rope_kernel")
    rope.apply_ltx2_split_rotary_emb(*rope_inputs(*shape, seed=0), variant="blocked_wide")
    [(grid, meta)] = recorder.launches
    cfg = rope.ALGORITHMS["blocked_wide"](H)
    assert grid == (B * S, cfg.head_blocks)
    assert (meta["BLOCK_HEADS"], meta["num_warps"]) == (cfg.block_heads, cfg.num_warps)


# --- AdaLN: bit-exact on exact inputs, layout -------------------------------------------

# D = 1, 100, 1023/1025 (around one column block), 2048, 3000 (a partial third
# block), the largest supported D; S = 1; B > 1.
ADA_SHAPES = [
    (1, 1, 1),
    (2, 1, 100),
    (1, 2, 1023),
    (1, 1, 1025),
    (2, 3, 2048),
    (1, 2, 3000),
    (1, 1, adaln.MAX_D),
]


@pytest.mark.parametrize("table_dtype", ["bf16", "fp32"])
@pytest.mark.parametrize("shape", ADA_SHAPES, ids=lambda s: "B{}_S{}_D{}".format(*s))
@pytest.mark.parametrize("variant", NEW_ADA)
def test_ada_bitexact(variant, shape, table_dtype, poison):
    check_ada(*ada_inputs(*shape, table_dtype, seed=sum(shape)), variant)
    assert poison.calls == 1  # one allocation, and it was NaN-poisoned


@pytest.mark.parametrize("variant", NEW_ADA)
def test_ada_table_row_stride_and_fp32_rounding(variant, poison):
    """A row-strided table view; and an fp32 table rounded to bf16 before the add.

    table = ±(1 + 2**-7 + 2**-12) rounds to ±(1 + 2**-7) under truncation and
    nearest-even alike; adding -(1 + 2**-7) gives exactly 0, where an add of
    the unrounded fp32 value gives ±2**-12.
    """
    B, S, D = 2, 2, 40
    table, ts = ada_inputs(B, S, D, "fp32", seed=3)
    wide = torch.full((9, 2 * D), 99.0, device=DEVICE)
    wide[:, :D] = table
    check_ada(wide[:, :D], ts, variant)
    gen = torch.Generator().manual_seed(9)
    sign = (torch.randint(0, 2, (9, D), generator=gen) * 2 - 1).float()
    table = (sign * (1 + 2**-7 + 2**-12)).to(DEVICE)
    ts = (-sign * (1 + 2**-7)).repeat(B, S, 1, 1).reshape(B, S, 9 * D).to(DEVICE, torch.bfloat16)
    assert all((v == 0).all() for v in reference.ada_values9_reference(table, ts))
    check_ada(table, ts, variant)


@pytest.mark.parametrize("B, S", [(2, 0), (0, 3)])
@pytest.mark.parametrize("variant", NEW_ADA)
def test_ada_empty_input_without_launch(variant, B, S, record_launch):
    recorder = record_launch(adaln, "_ada_values9_grid_kernel")
    outs = adaln.ltx2_ada_values9(*ada_inputs(B, S, 16, seed=0), variant=variant)
    assert len(outs) == 9 and all(o.shape == (B, S, 16) for o in outs)
    assert recorder.launches == []


@pytest.mark.parametrize("D", [1, 100, 256, 1000, 1024, 1025, 4096, adaln.MAX_D])
def test_grid_config(D):
    block_d, num_warps = adaln._grid_config(D)
    assert block_d & (block_d - 1) == 0 and block_d >= min(D, 1024)
    assert block_d <= max(1024, triton.next_power_of_2(D)) and block_d <= 1024
    # 8 bf16 (16 bytes) per thread once the block fills a warp
    assert num_warps == max(1, block_d // 256) and 1 <= num_warps <= 4


@pytest.mark.parametrize("shape", [(1, 1, 4096), (2, 3, 100), (1, 2, 3000)], ids=str)
@pytest.mark.parametrize("variant", NEW_ADA)
def test_grid_launch(variant, shape, record_launch):
    B, S, D = shape
    recorder = record_launch(adaln, "_ada_values9_grid_kernel")
    record_row = record_launch(adaln, "_ada_values9_kernel")
    table, ts = ada_inputs(*shape, seed=0)
    adaln.ltx2_ada_values9(table, ts, variant=variant)
    block_d, num_warps = adaln._grid_config(D)
    [(grid, meta)] = recorder.launches
    assert grid == (B * S * 9 * math.ceil(D / block_d),)
    d_const = D if adaln.CALLS[(variant, "auto")][0] == "slab_dconst" else 0
    assert meta == {"BLOCK_D": block_d, "D_CONST": d_const, "num_warps": num_warps}
    assert record_row.launches == []


def test_grid_decode_shape_uses_many_programs(record_launch):
    """The point of the variant: B1_S1_D4096 runs 36 programs (36 SMs), the row kernel 1."""
    grid_rec = record_launch(adaln, "_ada_values9_grid_kernel")
    row_rec = record_launch(adaln, "_ada_values9_kernel")
    table, ts = ada_inputs(1, 1, 4096, seed=0)
    adaln.ltx2_ada_values9(table, ts, variant="slab")
    adaln.ltx2_ada_values9(table, ts, variant="slab_grid")
    assert row_rec.launches[0][0] == (1,) and grid_rec.launches[0][0] == (36,)


def test_grid_program_limit_raises(monkeypatch):
    monkeypatch.setattr(adaln, "MAX_PROGRAMS", 9 * 2 * 3 - 1)
    table, ts = ada_inputs(2, 3, 16, seed=0)
    with pytest.raises(ValueError, match=r"54 programs .*\(2, 3, 144\).*variant='slab'"):
        adaln.ltx2_ada_values9(table, ts, variant="slab_grid")


@pytest.mark.parametrize("variant", sorted(adaln.ROW_ALGORITHMS))
def test_row_program_limit_raises(variant, monkeypatch, record_launch):
    """The row kernel launches a program per row: more rows than CUDA's grid takes are
    refused by name before anything launches."""
    recorder = record_launch(adaln, "_ada_values9_kernel")
    monkeypatch.setattr(adaln, "MAX_PROGRAMS", 2 * 3 - 1)
    table, ts = ada_inputs(2, 3, 16, seed=0)
    with pytest.raises(ValueError, match=rf"'{variant}' .* B\*S = 6 rows .*\(2, 3, 144\)"):
        adaln.ltx2_ada_values9(table, ts, variant=variant)
    assert recorder.launches == []


# --- mutation tests: the checks above fail for a wrongly indexed grid kernel ----------
# Positional arguments of _ada_values9_grid_kernel: table, timestep, out, D, stride_table,
# stride_value.


def _args(args, **changes):
    names = ("table", "ts", "out", "D", "stride_table", "stride_value")
    named = dict(zip(names, args, strict=True)) | changes
    return tuple(named[n] for n in names)


GRID_MUTANTS = {
    "value_stride_short": lambda g, a, k: (g, _args(a, stride_value=a[5] - a[3]), k),
    "table_stride_zero": lambda g, a, k: (g, _args(a, stride_table=0), k),
    # slab_dconst reads D from D_CONST: the mutant shortens whichever the kernel uses
    "D_off_by_one": lambda g, a, k: (
        g,
        _args(a, D=a[3] - 1),
        k | ({"D_CONST": k["D_CONST"] - 1} if k.get("D_CONST") else {}),
    ),
    "last_program_missed": lambda g, a, k: ((g[0] - 1,), a, k),
    "block_halved": lambda g, a, k: (g, a, k | {"BLOCK_D": k["BLOCK_D"] // 2}),
}


@pytest.mark.parametrize("mutant", sorted(GRID_MUTANTS))
@pytest.mark.parametrize("variant", NEW_ADA)
def test_checks_catch_grid_mutants(variant, mutant, poison, record_launch):
    recorder = record_launch(adaln, "_ada_values9_grid_kernel", mutate=GRID_MUTANTS[mutant])
    table, ts = ada_inputs(2, 2, 48, "fp32", seed=11)
    with pytest.raises(AssertionError, match="never written|not equal"):
        check_ada(table, ts, variant)
    assert len(recorder.launches) == 1  # the mutant really ran


# --- the lean launch path, against a stand-in compiled kernel --------------------------


def _toy(a_ptr, b_ptr, n, stride, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    pass


class FakeLauncher:
    """Stands in for Triton 3.6's CudaLauncher: records what its C ``launch`` receives."""

    def __init__(self, scratch: int = 0, fail: Exception | None = None):
        self.calls: list[tuple] = []
        self.global_scratch_size = scratch
        self.profile_scratch_size = 0
        self.launch_cooperative_grid = False
        self.launch_pdl = True
        self.fail = fail

    def launch(self, *args):
        if self.fail is not None:
            raise self.fail
        self.calls.append(args)


class FakeCompiled:
    def __init__(self, launcher: FakeLauncher):
        self.run = launcher
        self.function = 0xF00D
        self.packed_metadata = (4, 1, 0)


class ToyKernel:
    """A real JITFunction whose dispatcher (``run``) is replaced by a recording stand-in."""

    def __init__(self, fn=_toy, **launcher_kw):
        self.jit = triton.runtime.jit.JITFunction(fn)
        self.launcher = FakeLauncher(**launcher_kw)
        self.normal_calls: list[tuple] = []

        def run(*args, grid, warmup, **kwargs):
            self.normal_calls.append((grid, args, kwargs))
            return FakeCompiled(self.launcher)

        self.jit.run = run  # an instance attribute: kernel[grid] calls it


@pytest.fixture
def fast(monkeypatch):
    """The lean path as on a GPU, with device -1 (CPU tensors report -1) and stream 77."""
    from triton import knobs

    state = _launch._Fast()
    state.built, state.knobs = True, knobs
    state.get_device, state.get_stream = (lambda: -1), (lambda device: 77)
    monkeypatch.setattr(_launch, "_FAST", state)
    monkeypatch.setattr(_launch, "_CACHES", {})
    return state


# Allocated once: the key holds each tensor's address modulo ALIGN_KEY, and two
# fresh CPU allocations need not agree on it (the CPU allocator aligns to 64 bytes).
TOY_A = torch.ones(64, dtype=torch.bfloat16)
TOY_B = torch.ones(64, dtype=torch.bfloat16)


def _toy_args(a=TOY_A, b=TOY_B, n=64, stride=16, block=32, even=True, warps=4):
    return (a, b), (n, stride), (("BLOCK", block), ("EVEN", even)), warps


def test_lean_first_call_normal_then_fast(fast):
    toy = ToyKernel()
    tensors, scalars, cx, warps = _toy_args()
    for _ in range(3):
        _launch.launch(toy.jit, (5, 2), tensors, scalars, cx, warps)
    [(grid, args, kwargs)] = toy.normal_calls  # only the first call took the normal path
    assert grid == (5, 2) and args == (*tensors, *scalars)
    assert kwargs == {"BLOCK": 32, "EVEN": True, "num_warps": 4}
    assert len(toy.launcher.calls) == 2
    expected = (
        5,
        2,
        1,
        77,
        0xF00D,
        False,
        True,
        None,
        None,
        (4, 1, 0),
        None,
        None,
        None,
        tensors[0].data_ptr(),
        tensors[1].data_ptr(),
        64,
        16,
        32,
        True,
    )
    assert toy.launcher.calls[0] == expected


def _at_residue(like: torch.Tensor, delta_bytes: int) -> torch.Tensor:
    """A new bf16 tensor whose address is ``like``'s plus delta_bytes, modulo ALIGN_KEY."""
    buf = torch.ones(64 + 2 * _launch.ALIGN_KEY, dtype=torch.bfloat16)
    want = (like.data_ptr() + delta_bytes) % _launch.ALIGN_KEY
    skip = (want - buf.data_ptr()) % _launch.ALIGN_KEY // 2  # both addresses are even
    return buf[skip : skip + 64]


KEY_CHANGES = {
    "scalar_value": lambda: _toy_args(n=65),
    "scalar_one": lambda: _toy_args(stride=1),  # Triton makes an int == 1 a constexpr
    "int64_scalar": lambda: _toy_args(n=2**40),
    # one bf16 element off the 16-byte alignment Triton specializes pointers on
    "misaligned_tensor": lambda: _toy_args(b=_at_residue(TOY_B, 2)),
    "dtype": lambda: _toy_args(a=torch.ones(64, dtype=torch.float32)),
    "constexpr": lambda: _toy_args(block=64),
    "num_warps": lambda: _toy_args(warps=8),
}


@pytest.mark.parametrize("change", sorted(KEY_CHANGES))
def test_lean_key_separates_specializations(fast, change):
    """Anything Triton specializes on must miss the cache and go through the normal path."""
    toy = ToyKernel()
    changed = KEY_CHANGES[change]()
    _launch.launch(toy.jit, (1,), *_toy_args())
    _launch.launch(toy.jit, (1,), *changed)
    assert len(toy.normal_calls) == 2 and toy.launcher.calls == []
    _launch.launch(toy.jit, (1,), *changed)  # ...and is then cached itself
    assert len(toy.normal_calls) == 2 and len(toy.launcher.calls) == 1


def test_lean_key_ignores_addresses_of_same_alignment(fast):
    toy = ToyKernel()
    _launch.launch(toy.jit, (1,), *_toy_args())
    fresh = _at_residue(TOY_A, 0)  # another storage, same address modulo ALIGN_KEY
    assert fresh.data_ptr() != TOY_A.data_ptr()
    _launch.launch(toy.jit, (1,), *_toy_args(a=fresh))
    assert len(toy.normal_calls) == 1
    assert toy.launcher.calls[-1][13] == fresh.data_ptr()  # the new address is what launches


def test_lean_under_torch_compile_takes_normal_path(fast, monkeypatch):
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    toy = ToyKernel()
    for _ in range(2):
        _launch.launch(toy.jit, (1,), *_toy_args())
    assert len(toy.normal_calls) == 2 and toy.launcher.calls == []


@pytest.mark.parametrize("which", ["launch_enter_hook", "launch_exit_hook"])
@pytest.mark.parametrize("as_chain", [True, False], ids=["hook_chain", "plain_function"])
def test_lean_with_launch_hook_takes_normal_path(fast, monkeypatch, which, as_chain):
    """A profiler's hook must see every launch. Triton 3.6 keeps an (empty) HookChain in
    these knobs; a chain with a call in it, or a plain function, counts as installed."""
    hook = lambda metadata: None  # noqa: E731
    if as_chain:
        chain = fast.knobs.HookChain()
        chain.add(hook)
        hook = chain
    monkeypatch.setattr(fast.knobs.runtime, which, hook)
    toy = ToyKernel()
    for _ in range(2):
        _launch.launch(toy.jit, (1,), *_toy_args())
    assert len(toy.normal_calls) == 2 and toy.launcher.calls == []


def test_lean_empty_hook_chains_do_not_count_as_hooks():
    from triton import knobs

    assert not _launch._hooked(knobs.HookChain()) and not _launch._hooked(None)


def test_lean_tensor_on_other_device_takes_normal_path(fast):
    fast.get_device = lambda: 0  # current device 0; the CPU tensors report -1
    toy = ToyKernel()
    for _ in range(2):
        _launch.launch(toy.jit, (1,), *_toy_args())
    assert len(toy.normal_calls) == 2 and toy.launcher.calls == []


def test_lean_non_int_scalar_not_cached(fast):
    toy = ToyKernel()
    tensors, _, cx, warps = _toy_args()
    for _ in range(2):
        _launch.launch(toy.jit, (1,), tensors, (True, 16), cx, warps)
    assert len(toy.normal_calls) == 2 and toy.launcher.calls == []


def test_lean_scratch_kernel_stays_on_normal_path(fast):
    toy = ToyKernel(scratch=128)
    for _ in range(3):
        _launch.launch(toy.jit, (1,), *_toy_args())
    assert len(toy.normal_calls) == 3 and toy.launcher.calls == []


def test_lean_not_a_jit_function_takes_normal_path_silently(fast, record_launch):
    """The interpreter's kernels and the tests' launch recorders are not JITFunctions."""
    recorder = record_launch(rope, "_split_rope_kernel")
    assert not _launch.is_jit_function(recorder)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rope.apply_ltx2_split_rotary_emb(*rope_inputs(1, 2, 3, 8, seed=0), variant="blocked_lean")
    assert len(recorder.launches) == 1 and fast.off_reason is None


def test_lean_protocol_error_warns_once_and_falls_back(fast):
    toy = ToyKernel(fail=TypeError("function takes at least 14 arguments"))
    args = _toy_args()
    _launch.launch(toy.jit, (1,), *args)
    with pytest.warns(RuntimeWarning, match="rejected the call.*14 arguments"):
        _launch.launch(toy.jit, (1,), *args)
    assert len(toy.normal_calls) == 2  # the failed fast launch was redone normally
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no second warning
        _launch.launch(toy.jit, (1,), *args)
    assert len(toy.normal_calls) == 3 and "rejected" in fast.off_reason


def test_lean_parameter_layout_mismatch_turns_off(fast):
    toy = ToyKernel()
    tensors, scalars, _, warps = _toy_args()
    with pytest.warns(RuntimeWarning, match="parameters are not"):
        _launch.launch(toy.jit, (1,), tensors, scalars, (("EVEN", True), ("BLOCK", 32)), warps)
    _launch.launch(toy.jit, (1,), tensors, scalars, (("EVEN", True), ("BLOCK", 32)), warps)
    assert len(toy.normal_calls) == 2 and toy.launcher.calls == []


def test_lean_unverified_triton_warns_once_and_stays_off(monkeypatch):
    monkeypatch.setattr(_launch, "_FAST", _launch._Fast())
    monkeypatch.setattr(_launch, "_CACHES", {})
    monkeypatch.setattr(_launch, "VERIFIED_TRITON", frozenset({(0, 1)}))
    toy = ToyKernel()
    with pytest.warns(RuntimeWarning, match=r"Triton .* not a version .*verified"):
        _launch.launch(toy.jit, (1,), *_toy_args())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _launch.launch(toy.jit, (1,), *_toy_args())
    assert len(toy.normal_calls) == 2 and toy.launcher.calls == []


def test_lean_cache_is_bounded(fast, monkeypatch):
    monkeypatch.setattr(_launch, "MAX_ENTRIES", 3)
    toy = ToyKernel()
    for n in range(10):
        _launch.launch(toy.jit, (1,), *_toy_args(n=n + 2))
    [(_, cache)] = _launch._CACHES.values()
    assert 1 <= len(cache) <= 3


# --- the Triton protocol the fast path mirrors, pinned against the installed source ------


@pytest.mark.skipif(
    tuple(int(p) for p in triton.__version__.split(".")[:2]) not in _launch.VERIFIED_TRITON,
    reason="the fast path is off on unverified Triton versions",
)
def test_triton_launch_protocol_is_as_mirrored():
    """If a Triton upgrade changes any of these, re-read them before extending VERIFIED_TRITON."""
    from triton.backends.nvidia import driver as nv
    from triton.backends.nvidia.driver import CudaLauncher
    from triton.compiler.compiler import CompiledKernel
    from triton.runtime.jit import JITFunction

    def flat(obj) -> str:
        return re.sub(r"\s+", "", inspect.getsource(obj))

    run = flat(JITFunction.run)
    assert (
        "kernel.run(grid_0,grid_1,grid_2,stream,kernel.function,kernel.packed_metadata,"
        "launch_metadata,knobs.runtime.launch_enter_hook,knobs.runtime.launch_exit_hook,"
        "*bound_args.values())" in run
    )
    # the options JITFunction.run adds to the key: we key on the same two knobs
    assert 'kwargs["debug"]=kwargs.get("debug",self.debug)orknobs.runtime.debug' in run
    assert 'kwargs["instrumentation_mode"]=knobs.compilation.instrumentation_mode' in run
    call = flat(CudaLauncher.__call__)
    assert (
        "self.launch(gridX,gridY,gridZ,stream,function,self.launch_cooperative_grid,"
        "self.launch_pdl,global_scratch,profile_scratch,*args)" in call
    )
    assert nv._BASE_ARGS_FORMAT == "iiiKKppOOOOOO"
    getpointer = inspect.getsource(nv.make_launcher)
    assert "getPointer(_arg" in getpointer
    assert "PyLong_Check(obj)" in inspect.getsource(nv)  # raw int pointers are accepted
    assert callable(getattr(CompiledKernel, "run", None).fget)
    from triton.backends.compiler import BaseBackend

    # pointer specialization: 16-byte alignment, which ALIGN_KEY refines
    assert "arg.data_ptr()%16==0" in flat(BaseBackend.get_tensor_specialization)
    assert _launch.ALIGN_KEY % 16 == 0


# --- offline sm_90 compiles: the facts the predictions rest on -----------------------

_OFFLINE = textwrap.dedent(
    """
    import json, os, re, subprocess, sys, tempfile
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from ltx2k.kernels import adaln, rope

    BIN = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")

    def build(kernel, types, constexprs, warps):
        sig = dict(zip(kernel.arg_names, types + ["constexpr"] * len(constexprs)))
        # every pointer 16-byte aligned and every int divisible by 16, as at the production shapes
        attrs = {(i,): [["tt.divisibility", 16]] for i in range(len(types))}
        ck = triton.compile(ASTSource(kernel, sig, constexprs=constexprs, attrs=attrs),
                            target=GPUTarget("cuda", 90, 32), options={"num_warps": warps})
        with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
            f.write(ck.asm["cubin"])
        usage = subprocess.run([os.path.join(BIN, "cuobjdump"), "--dump-resource-usage", f.name],
                               capture_output=True, text=True, check=True).stdout
        sass = subprocess.run([os.path.join(BIN, "cuobjdump"), "-sass", f.name],
                              capture_output=True, text=True, check=True).stdout
        ptx = ck.asm["ptx"]
        instrs = [l.split("*/", 1)[1].strip() for l in sass.splitlines()
                  if re.match(r"\\s*/\\*[0-9a-f]{4}\\*/", l)]
        first_load = next(i for i, l in enumerate(instrs) if "LDG" in l)
        return {
            "before_first_load": first_load,
            "runtime_division": any("MUFU.RCP" in l for l in instrs),
            "regs": int(re.search(r"REG:(\\d+)", usage).group(1)),
            "v4": len(re.findall(r"(?:ld|st)\\.global(?:\\.\\w+)*\\.v4", ptx)),
            "v2": len(re.findall(r"(?:ld|st)\\.global(?:\\.\\w+)*\\.v2", ptx)),
            "order": "".join("L" if "LDG" in l else "S" for l in sass.splitlines()
                             if "LDG" in l or "STG" in l),
            "bf16_fma": len(re.findall(r"\\bfma\\.rn(?:\\.\\w+)*\\.bf16", ptx)),
            "bf16_mul": len(re.findall(r"\\bmul(?:\\.\\w+)*\\.bf16", ptx)),
            "f32_mul": len(re.findall(r"\\bmul(?:\\.rn)?\\.f32", ptx)),
        }

    rope_types = ["*bf16"] * 4 + ["i32"] * 10
    out = {}
    def rope_build(name, head_dim, tokens):
        cfg = rope.ALGORITHMS[name](32, head_dim, tokens, 132)
        meta = {"BLOCK_HEADS": cfg.block_heads, "BLOCK_HALF": head_dim // 2,
                "BLOCK_TOKENS": cfg.block_tokens}
        return build(rope._split_rope_kernel, rope_types, meta, cfg.num_warps)

    for name in ("blocked", "blocked_wide", "tiled"):
        out[name] = rope_build(name, 128, 16384)
    out["blocked_d64"] = rope_build("blocked", 64, 6144)
    out["tiled_d64"] = rope_build("tiled", 64, 6144)
    out["slab"] = build(adaln._ada_values9_kernel, ["*bf16"] * 11 + ["i32"] * 2,
                        {"BLOCK_D": 4096}, 8)
    block_d, warps = adaln._grid_config(4096)
    out["slab_grid"] = build(adaln._ada_values9_grid_kernel, ["*bf16"] * 3 + ["i32"] * 3,
                             {"BLOCK_D": block_d, "D_CONST": 0}, warps)
    out["slab_dconst"] = build(adaln._ada_values9_grid_kernel, ["*bf16"] * 3 + ["i32"] * 3,
                               {"BLOCK_D": block_d, "D_CONST": 4096}, warps)
    from ltx2k.kernels import rope_backward
    out["rope_backward"] = build(rope_backward._split_rope_backward_kernel,
                                 ["*bf16"] * 4 + ["i32"] * 10,
                                 {"BLOCK_HEADS": 16, "BLOCK_HALF": 64}, 4)
    print(json.dumps(out))
    """
)


def _has_nvidia_tools() -> bool:
    bin_dir = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"
    return (bin_dir / "ptxas").exists() and (bin_dir / "cuobjdump").exists()


@pytest.fixture(scope="module")
def offline(tmp_path_factory):
    import json

    if not _has_nvidia_tools():
        pytest.skip("Triton's bundled ptxas/cuobjdump are not installed")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}  # real JIT kernels
    env["TRITON_CACHE_DIR"] = str(tmp_path_factory.mktemp("triton-sm90"))
    proc = subprocess.run(
        [sys.executable, "-c", _OFFLINE],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_offline_wide_uses_16_byte_accesses_and_fits_one_wave(offline):
    """blocked: 8-byte (v2) accesses; blocked_wide: 16-byte (v4), at <= 32 registers per thread,
    so 8 CTAs of 256 threads fit an SM and B1_S1024_H32's 1024 programs are one wave on 132 SMs."""
    assert offline["blocked"]["v2"] > 0 and offline["blocked"]["v4"] == 0
    assert offline["blocked_wide"]["v4"] > 0 and offline["blocked_wide"]["v2"] == 0
    assert offline["blocked_wide"]["regs"] <= 32  # 65536 registers / (8 x 256 threads)


@pytest.mark.slow
def test_offline_tiled_widens_head_dim_64_accesses_at_full_occupancy(offline):
    """tiled's premise (docs/kernels/split_rope.md): at D=64, blocked's 16 heads x 32 columns
    over 256 threads leave each thread 2 bf16 (4-byte accesses); two tokens of 32 heads over
    512 threads give each 4 (8-byte accesses). At <= 32 registers, four 512-thread CTAs fill
    an SM's 2048 threads (65536 registers)."""
    assert offline["blocked_d64"]["v2"] == 0 and offline["blocked_d64"]["v4"] == 0
    assert offline["tiled_d64"]["v2"] > 0
    for name in ("tiled", "tiled_d64"):
        assert offline[name]["regs"] <= 32, offline[name]


@pytest.mark.slow
def test_offline_rope_backward_rounds_every_product_in_fp32(offline):
    """Written as ``(g * c).to(bf16).to(fp32)`` the backward compiled to one ``mul.bf16``
    and one ``fma.rn.bf16`` per output, so the second product was never rounded and the
    x gradient was one bf16 ulp off eager autograd on the H200. Its products must be
    fp32 multiplies (4 per pair of outputs), none fused into a bf16 fma."""
    bwd = offline["rope_backward"]
    assert bwd["bf16_fma"] == 0 and bwd["bf16_mul"] == 0, bwd
    assert bwd["f32_mul"] > 0 and bwd["f32_mul"] % 4 == 0, bwd


@pytest.mark.slow
def test_offline_row_kernel_serializes_nine_rounds_grid_kernel_one(offline):
    """The decode-shape diagnosis: the row kernel's 9 (load, load, store) rounds run in
    sequence (a load is not hoisted above the previous value's store, which may alias);
    a grid program does one round."""
    assert offline["slab"]["order"] == "LLLLSS" * 9
    assert re.fullmatch(r"L+S+", offline["slab_grid"]["order"])
    assert offline["slab_grid"]["v4"] >= 3  # ts load, table load, store: 16 bytes each


@pytest.mark.slow
def test_offline_dconst_has_no_runtime_division_before_its_loads(offline):
    """slab_dconst's premise (docs/kernels/ada_values9.md): with D compiled in, the program-id
    decode needs no integer division, and far fewer instructions precede the first load."""
    assert offline["slab_grid"]["runtime_division"]
    assert not offline["slab_dconst"]["runtime_division"]
    assert (
        offline["slab_dconst"]["before_first_load"] < offline["slab_grid"]["before_first_load"] / 2
    )
    assert offline["slab_dconst"]["v4"] >= 3  # still 16-byte accesses


# --- on a GPU: random inputs, the fast path itself, graphs, torch.compile ---------------

GPU_ADA = [
    shapes.AdaShape(1, 1, 4096, "bf16"),
    shapes.AdaShape(2, 3, 2048, "bf16"),
    shapes.AdaShape(1, 1024, 4096, "bf16"),
    shapes.AdaShape(1, 1, 4096, "fp32"),
]


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("shape", GPU_ADA, ids=lambda s: s.label)
@pytest.mark.parametrize("variant", NEW_ADA)
def test_gpu_ada_random_bitexact(variant, shape, poison):
    table, ts = cases.ada_inputs(shape, "cuda", seed=5)
    check_ada(table, ts, variant)
    assert poison.calls == 1


class CountingRun:
    """Wraps a real kernel's dispatcher (``JITFunction.run``) to count the normal-path calls."""

    def __init__(self, kernel):
        self.original, self.calls = kernel.run, 0

    def __call__(self, *args, **kwargs):
        self.calls += 1
        return self.original(*args, **kwargs)


@gpu
@pytest.mark.gpu
def test_gpu_lean_repeated_calls_bitexact_through_fast_path(poison, monkeypatch):
    """After the first call per specialization, calls skip JITFunction.run; each must still be
    exact on fresh inputs and fresh (poisoned) outputs. A misaligned cos view must miss."""
    runs = {}
    for kernel in (rope._split_rope_kernel, adaln._ada_values9_grid_kernel):
        runs[kernel] = CountingRun(kernel)
        monkeypatch.setattr(kernel, "run", runs[kernel])  # kernel[grid] calls self.run
    monkeypatch.setattr(_launch, "_CACHES", {})
    shape = shapes.RopeShape(1, 256, 32, 128)
    for seed in range(4):
        x, cos, sin = cases.rope_inputs(shape, "cuda", seed=seed)
        check_rope(x, cos, sin, "blocked_lean")
        table, ts = cases.ada_inputs(shapes.AdaShape(2, 3, 2048), "cuda", seed=seed)
        check_ada(table, ts, "slab_lean")
    assert _launch._FAST.off_reason is None
    # fresh allocations keep the same specialization, so only the first call was a miss
    assert runs[rope._split_rope_kernel].calls == 1
    assert runs[adaln._ada_values9_grid_kernel].calls == 1
    # contiguous cos/sin: other strides, one more miss; then a hit
    x, cos, sin = cases.rope_inputs(shape, "cuda", seed=9, transposed=False)
    for _ in range(2):
        check_rope(x, cos, sin, "blocked_lean")
    assert runs[rope._split_rope_kernel].calls == 2
    # the same layout 1 element off 16-byte alignment must not reuse the aligned kernel
    pad = torch.empty(cos.numel() + 1, dtype=cos.dtype, device="cuda")
    cos_odd = pad[1:].view_as(cos).copy_(cos)
    assert cos_odd.data_ptr() % 16 != 0 and cos_odd.stride() == cos.stride()
    check_rope(x, cos_odd, sin, "blocked_lean")
    assert runs[rope._split_rope_kernel].calls == 3


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("variant", [*NEW_ROPE, *NEW_ADA])
def test_gpu_cuda_graph_capture(variant):
    """The device-time harness captures calls into a CUDA graph; replays must stay exact."""
    if variant in NEW_ROPE:
        args = cases.rope_inputs(shapes.RopeShape(1, 1024, 32, 128), "cuda", seed=1)
        fn, ref = cases.variant_fn("split_rope", variant), reference.split_rotary_reference
    else:
        args = cases.ada_inputs(shapes.AdaShape(1, 1, 4096), "cuda", seed=1)
        fn, ref = cases.variant_fn("ada_values9", variant), reference.ada_values9_reference
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn(*args)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn(*args)
    for t in args:
        t.copy_(t.flip(-1))  # new input values, same addresses
    graph.replay()
    torch.cuda.synchronize()
    assert cases.outputs_equal(out, ref(*args))


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("variant", NEW_ROPE)
def test_gpu_compile_fullgraph_rope(variant):
    x, cos, sin = cases.rope_inputs(shapes.RopeShape(4, 25, 32, 64), "cuda", seed=1)
    fn = torch.compile(
        lambda x, c, s: rope.apply_ltx2_split_rotary_emb(x, c, s, variant=variant),
        fullgraph=True,
        dynamic=False,
    )
    for _ in range(2):  # the second call runs the compiled graph
        assert_bitexact(fn(x, cos, sin), reference.split_rotary_reference(x, cos, sin))


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("variant", NEW_ADA)
@pytest.mark.parametrize("shape", GPU_ADA[::3], ids=lambda s: s.label)
def test_gpu_compile_fullgraph_ada(variant, shape):
    table, ts = cases.ada_inputs(shape, "cuda", seed=2)
    fn = torch.compile(
        lambda t, s: adaln.ltx2_ada_values9(t, s, variant=variant), fullgraph=True, dynamic=False
    )
    for _ in range(2):
        outs = fn(table, ts)
        refs = reference.ada_values9_reference(table, ts)
        for i, (o, r) in enumerate(zip(outs, refs, strict=True)):
            assert_bitexact(o, r, f"value {i}")
    assert_slab_layout(outs, shape.B, shape.S, shape.D)  # still one slab, in order


def test_a_launch_for_another_gpu_makes_that_gpu_current(monkeypatch):
    """Triton launches on the current device: inputs on cuda:1 while cuda:0 is current are
    launched under ``torch.cuda.device(1)``, on every host path (simulated: no GPU here)."""
    from ltx2k.kernels import _launch

    class OnGpu1:
        device = torch.device("cuda", 1)

    entered, launched = [], []

    class Guard:
        def __init__(self, index):
            self.index = index

        def __enter__(self):
            entered.append(self.index)

        def __exit__(self, *exc):
            entered.append("exit")

    monkeypatch.setattr(_launch, "_current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "device", Guard)
    monkeypatch.setattr(_launch, "_normal", lambda *a: launched.append(("triton", entered[:])))
    monkeypatch.setattr(_launch, "launch", lambda *a: launched.append(("lean", entered[:])))
    for path in ("triton", "lean"):
        entered.clear()
        _launch.launch_by(path, None, (1,), (OnGpu1(),), (), (), 4)
        assert launched[-1] == (path, [1]) and entered == [1, "exit"]
    assert _launch.other_device((OnGpu1(),)) == 1
    monkeypatch.setattr(_launch, "_current_device", lambda: 1)
    assert _launch.other_device((OnGpu1(),)) is None
    assert _launch.other_device((torch.empty(1),)) is None  # CPU (the interpreter): as is


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA GPUs")
def test_gpu_inputs_on_another_gpu_give_the_reference(monkeypatch):
    from ltx2k.workload import cases

    for kernel, spec in sorted(cases.KERNELS.items()):
        args = spec.make_inputs(spec.gpu_shapes[0], "cuda:1", seed=1, exact=True)
        want = spec.reference(*args)
        with torch.cuda.device(0):
            for launch in ("triton", "lean", "native", "native"):
                got = cases.variant_fn(kernel, variants.DEFAULT_VARIANT[kernel], launch)(*args)
                torch.cuda.synchronize(1)
                got, want = (x if isinstance(x, (tuple, list)) else (x,) for x in (got, want))
                for g, w in zip(got, want, strict=True):
                    assert g.device == w.device and torch.equal(g, w), (kernel, launch)
