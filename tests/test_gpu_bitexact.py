"""GPU contract: every (algorithm, launch path) of both kernels is bit-identical to eager.

Random normal inputs (not the interpreter's exact values): on a GPU the
rounding order itself is under test. Outputs are NaN-poisoned first (the
``poison`` fixture of conftest.py), so an element no program wrote cannot
pass. Skipped without CUDA; run on the H200. The CPU test modules run on the
GPU too; this one adds what only a GPU shows: random data at production
shapes, torch.compile, and the caching allocator's allocation count.
"""

from __future__ import annotations

import pytest
import torch

from ltx2k.kernels import adaln, rope
from ltx2k.workload import cases, reference, shapes

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

ROPE = [
    shapes.RopeShape(1, 1024, 32, 128),
    shapes.RopeShape(1, 4096, 16, 128),
    shapes.RopeShape(4, 1152, 32, 128),
    shapes.RopeShape(4, 25, 32, 64),
    # "tiled" beyond "blocked"'s configuration: two tokens per program (D=64), masked
    # heads (24 of 32) with two tokens, and an odd token count (one token per program).
    shapes.RopeShape(1, 6144, 32, 64),
    shapes.RopeShape(2, 2048, 24, 64),
    shapes.RopeShape(1, 6145, 32, 64),
]
TILED = ROPE[4]
ADA = [
    shapes.AdaShape(1, 1, 4096, "bf16"),
    shapes.AdaShape(1, 1, 4096, "fp32"),
    shapes.AdaShape(2, 3, 2048, "bf16"),
    shapes.AdaShape(2, 3, 2048, "fp32"),
]


def _assert_bitexact(out, ref):
    assert out.shape == ref.shape and out.dtype == ref.dtype, (out.shape, out.dtype)
    assert not out.isnan().any(), "output elements never written (NaN poison survived)"
    torch.testing.assert_close(out, ref, atol=0, rtol=0)


def _pairs(module) -> list[tuple[str, str]]:
    """Every (algorithm, launch path) the module accepts, "auto" being one of them."""
    return sorted({pair for (variant, launch), pair in module.CALLS.items() if launch != "auto"})


@pytest.mark.parametrize("transposed", [True, False], ids=["cs_transposed", "cs_contig"])
@pytest.mark.parametrize("shape", ROPE, ids=lambda s: s.label)
@pytest.mark.parametrize("variant, launch", _pairs(rope))
def test_rope_bitexact(variant, launch, shape, transposed, poison):
    from ltx2k import apply_ltx2_split_rotary_emb

    x, cos, sin = cases.rope_inputs(shape, "cuda", seed=3, transposed=transposed)
    ref = reference.split_rotary_reference(x, cos, sin)
    # twice: the native path records on the first call and replays after it
    for call in (1, 2):
        out = apply_ltx2_split_rotary_emb(x, cos, sin, variant=variant, launch=launch)
        if launch != "native" or call == 1:  # a replay allocates in C++, past the poison
            assert poison.calls == call  # the output really was poisoned
        _assert_bitexact(out, ref)


@pytest.mark.parametrize("shape", ADA, ids=lambda s: s.label)
@pytest.mark.parametrize("variant, launch", _pairs(adaln))
def test_ada_bitexact(variant, launch, shape, poison):
    from ltx2k import ltx2_ada_values9

    table, ts = cases.ada_inputs(shape, "cuda", seed=5)
    refs = reference.ada_values9_reference(table, ts)
    for _ in range(2):  # record, then replay
        outs = ltx2_ada_values9(table, ts, variant=variant, launch=launch)
        assert len(outs) == 9
        for o, r in zip(outs, refs, strict=True):
            assert o.is_contiguous() and o.shape == (shape.B, shape.S, shape.D)
            _assert_bitexact(o, r)
    if launch != "native":
        assert poison.calls == 2 * (9 if variant == "separate" else 1)


def test_rope_fma_would_differ():
    """The bit-exact tests have teeth: skipping the cos rounding changes bits."""
    x, cos, sin = cases.rope_inputs(ROPE[0], "cuda", seed=3)
    ref = reference.split_rotary_reference(x, cos, sin)
    b, s, _ = x.shape
    h, half = cos.shape[1], cos.shape[3]
    xh = x.view(b, s, h, 2, half).float()
    c = cos.transpose(1, 2).float()
    sn = sin.transpose(1, 2).float()
    fused = torch.stack(
        [xh[..., 0, :] * c - xh[..., 1, :] * sn, xh[..., 1, :] * c + xh[..., 0, :] * sn], dim=3
    )
    assert not torch.equal(fused.to(torch.bfloat16).view_as(ref), ref)


def test_tiled_takes_its_own_configurations_on_this_gpu():
    """The shapes above reach every branch of "tiled" here, so the tests are not vacuous."""
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    cfgs = [rope.ALGORITHMS["tiled"](s.H, s.D, s.B * s.S, sms) for s in ROPE[4:]]
    assert [c.block_tokens for c in cfgs] == [2, 2, 1]
    assert cfgs[0] != rope.ALGORITHMS["blocked"](32)
    assert rope.ALGORITHMS["tiled"](32, 64, 100, sms) == rope.ALGORITHMS["blocked"](32)


# None: the default variant (the native launch path, which must step aside for dynamo).
@pytest.mark.parametrize("shape", [ROPE[3], TILED], ids=lambda s: s.label)
@pytest.mark.parametrize("variant", [None, "blocked"], ids=str)
def test_compile_fullgraph_rope(variant, shape):
    from ltx2k import apply_ltx2_split_rotary_emb

    kw = {} if variant is None else {"variant": variant}
    x, cos, sin = cases.rope_inputs(shape, "cuda", seed=1)
    rope_c = torch.compile(apply_ltx2_split_rotary_emb, fullgraph=True, dynamic=False)
    _assert_bitexact(rope_c(x, cos, sin, **kw), reference.split_rotary_reference(x, cos, sin))


@pytest.mark.parametrize("launch", ["native", "lean", "triton"])
@pytest.mark.parametrize("variant", ["tiled", "tiled_pdl"])
def test_tiled_cuda_graph_replay_with_new_inputs(variant, launch):
    """The default under CUDA graphs at a shape where it runs its own tile: the replay reads
    the captured addresses' new values."""
    x, cos, sin = cases.rope_inputs(TILED, "cuda", seed=3)
    fn = cases.variant_fn("split_rope", variant, launch)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn(x, cos, sin)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn(x, cos, sin)
    for t in (x, cos, sin):
        t.copy_(t.flip(-1))
    graph.replay()
    torch.cuda.synchronize()
    _assert_bitexact(out, reference.split_rotary_reference(x, cos, sin))


def _pdl_binaries() -> list:
    """The split RoPE binaries in Triton's in-memory cache compiled with launch_pdl."""
    caches = rope._split_rope_kernel.device_caches.get(torch.cuda.current_device())
    found = list(caches[0].values()) if caches else []
    return [c for c in found if getattr(c.metadata, "launch_pdl", False)]


def test_tiled_pdl_launches_with_griddepcontrol_where_the_gpu_has_it():
    """On compute capability 9.0 and up the default's binary waits on the grid before it
    (griddepcontrol.wait) and is launched with the PDL attribute; below, none is."""
    has = torch.cuda.get_device_capability() >= (9, 0)
    assert rope._has_pdl(torch.device("cuda")) == has
    x, cos, sin = cases.rope_inputs(TILED, "cuda", seed=4)
    for launch in ("triton", "lean", "native"):
        rope.apply_ltx2_split_rotary_emb(x, cos, sin, variant="tiled_pdl", launch=launch)
    binaries = _pdl_binaries()
    if not has:
        assert binaries == []
        return
    assert binaries
    for b in binaries:
        assert "griddepcontrol.wait" in b.asm["ptx"]
        assert "griddepcontrol.launch_dependents" in b.asm["ptx"]


@pytest.mark.parametrize("launch", ["native", "lean", "triton"])
@pytest.mark.parametrize("shape", [ROPE[1], TILED, ROPE[3]], ids=lambda s: s.label)
def test_tiled_pdl_back_to_back_launches_read_the_one_before(shape, launch):
    """The hazard PDL adds: a launch that starts while the one before drains. Each call here
    rotates the output of the call before (read after write) and the call after it
    overwrites what it read (write after read, through a torch op in between); 24 in a row,
    eagerly and replayed from a CUDA graph, bit-exact against the chained reference. The
    native path replays from its second call on (its hit counter)."""
    x, cos, sin = cases.rope_inputs(shape, "cuda", seed=6)
    fn = cases.variant_fn("split_rope", "tiled_pdl", launch)

    def chain(step):
        y = x
        for i in range(24):
            y = step(y, cos, sin)
            if i % 6 == 5:
                y = y.neg()  # a kernel without PDL between two with it
        return y

    expected = chain(reference.split_rotary_reference)
    _assert_bitexact(chain(fn), expected)
    if launch == "native" and rope._has_pdl(x.device):
        assert rope._SITES["tiled_pdl"].stats()[1] >= 23
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        chain(fn)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = chain(fn)
    for _ in range(3):
        graph.replay()
    torch.cuda.synchronize()
    _assert_bitexact(out, expected)


@pytest.mark.parametrize("variant", [None, "slab"], ids=str)
@pytest.mark.parametrize("shape", [ADA[0], ADA[3]], ids=lambda s: s.label)
def test_compile_fullgraph_ada(shape, variant):
    from ltx2k import ltx2_ada_values9

    kw = {} if variant is None else {"variant": variant}
    table, ts = cases.ada_inputs(shape, "cuda", seed=2)
    outs = torch.compile(ltx2_ada_values9, fullgraph=True, dynamic=False)(table, ts, **kw)
    for o, r in zip(outs, reference.ada_values9_reference(table, ts), strict=True):
        _assert_bitexact(o, r)
    # still one slab: 9 views of one storage, in order
    base = outs[0].untyped_storage().data_ptr()
    assert all(o.untyped_storage().data_ptr() == base for o in outs)
    n = shape.B * shape.S * shape.D
    assert [o.storage_offset() for o in outs] == [i * n for i in range(9)]


@pytest.mark.parametrize(
    "variant,expected",
    [
        ("separate", 9),
        ("slab", 1),
        ("slab_grid", 1),
        ("slab_lean", 1),  # an older name of slab_grid with launch="lean"
        ("slab_native", 1),
        ("slab_dconst", 1),
    ],
)
def test_allocations(variant, expected):
    from ltx2k.measure.allocations import allocations_per_call

    table, ts = cases.ada_inputs(ADA[0], "cuda", seed=0)
    fn = cases.variant_fn("ada_values9", variant)
    assert allocations_per_call(lambda: fn(table, ts), on_gpu=True) == expected
