"""The native call path with several outputs per site (``Site(..., n_outputs=2)``).

A kernel that takes q and k and returns ``(q_out, k_out)`` of different shapes records its
launch with ``out=(q_out, k_out)``; the replay allocates each output separately and returns
them as a tuple.

- CPU: ``Site`` and ``new_site`` refuse ``unbind`` with ``n_outputs > 1`` and counts out of
  range; ``record`` refuses a mismatched output count, output indices out of range and
  outputs that share memory; a recorded two-output launch probes as a hit under the same
  input key as a one-output one, a miss (and any CPU call) returns None, and an injected
  C++ exception is a miss. ``arg_spec`` maps each output pointer to its index by identity,
  and ``launch_and_record`` lands a two-output launch of a real JITFunction (stand-in
  compiled kernel) in the memo, refusing a wrong output count before it launches.
- GPU: a real two-output Triton launch is replayed: both outputs right (bit-exact) on fresh
  inputs written into NaN-filled recycled memory, with their own shapes and storage, and
  the hit counter moves; another layout is recorded, not replayed.
"""

from __future__ import annotations

import re
import weakref

import pytest
import torch
import triton
import triton.language as tl

from ltx2k.kernels import _native

gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

IN, OUT, I32 = _native.ARG_INPUT, _native.ARG_OUTPUT, _native.ARG_I32


@pytest.fixture(scope="module")
def mod():
    """The extension, built (or loaded from its cache) against the installed torch."""
    return _native.build()


def selected(key: str = "pair-key"):
    """The ``triton`` argument of ``record`` for a launch Triton's in-memory cache holds
    (as in test_native.py): ``kernel.device_caches[0][0] == {key: compiled}``."""
    jit = triton.runtime.jit.JITFunction(_pair)
    compiled = object()
    jit.device_caches = {0: ({key: compiled}, {}, None, None, None)}
    return (jit, 0, key, compiled, False, "")


# q, k -> q_out, k_out: the kernel's parameters in the order _pair lists them
PAIR_ARGS = ((IN, 0), (OUT, 0), (IN, 1), (OUT, 1), (I32, 480), (I32, 288))


def _record(mod, site, inputs, out, args=PAIR_ARGS):
    return mod.record(
        site, tuple(inputs), out, 0xF00D, 0, 0, (4, 1, 1), 128, 0, list(args), selected()
    )


def _aligned(*shape: int) -> torch.Tensor:
    """A fresh random fp32 tensor whose data_ptr() % 128 == 0 (the key's alignment class:
    the CPU allocator alone does not fix it)."""
    n = 1
    for d in shape:
        n *= d
    base = torch.randn(n + 32)
    off = ((-base.data_ptr()) % 128) // 4
    return base[off : off + n].view(shape)


def _qk(sq: int = 5, sk: int = 3, hidden: int = 48):
    """CPU stand-ins for q [B, Sq, hidden] and k [B, Sk, hidden], and their outputs."""
    q, k = _aligned(2, sq, hidden), _aligned(2, sk, hidden)
    return (q, k), (torch.empty_like(q), torch.empty_like(k))


# --- the site's output count ----------------------------------------------------------


def test_unbind_and_several_outputs_are_exclusive(mod):
    with pytest.raises(ValueError, match="unbind=True .* cannot be combined with n_outputs=2"):
        _native.Site("pair/unbind", n_inputs=2, unbind=True, n_outputs=2)
    with pytest.raises(ValueError, match="cannot be combined with n_outputs=2"):
        mod.new_site("pair/unbind", 2, True, 2)
    for n in (0, _native.MAX_OUTPUTS + 1):
        with pytest.raises(ValueError, match="n_outputs must be in"):
            _native.Site("pair/count", n_inputs=2, n_outputs=n)
        with pytest.raises(ValueError, match="n_outputs must be in"):
            mod.new_site("pair/count", 2, False, n)
    site = _native.Site("pair/ok", n_inputs=2, n_outputs=2)
    assert (site.n_inputs, site.unbind, site.n_outputs) == (2, False, 2)
    assert _native.Site("single", 1).n_outputs == 1 and not _native.Site("single", 1).unbind


def test_record_refuses_a_mismatched_output_count(mod):
    site = mod.new_site("pair/mismatch", 2, False, 2)
    inputs, (q_out, k_out) = _qk()
    with pytest.raises(ValueError, match="records 2 outputs, got 1"):
        _record(mod, site, inputs, (q_out,))
    with pytest.raises(ValueError, match="records 2 outputs, got 3"):
        _record(mod, site, inputs, (q_out, k_out, torch.empty(3)))
    with pytest.raises(TypeError, match="2 outputs: out must be a tuple of Tensors"):
        _record(mod, site, inputs, q_out)
    with pytest.raises(TypeError, match="out must be a tuple of Tensors"):
        _record(mod, site, inputs, (q_out, 3))
    with pytest.raises(ValueError, match=re.escape("bad argument spec (1, 2)")):
        _record(mod, site, inputs, (q_out, k_out), args=((IN, 0), (OUT, 2)))
    with pytest.raises(ValueError, match=re.escape("bad argument spec (1, -1)")):
        _record(mod, site, inputs, (q_out, k_out), args=((IN, 0), (OUT, -1)))
    assert mod.stats(site) == (0, 0, 0)
    # a one-output site takes one Tensor, and only output 0
    single = mod.new_site("pair/single", 2, False)
    with pytest.raises(TypeError, match="out must be a Tensor"):
        _record(mod, single, inputs, (q_out, k_out))
    with pytest.raises(ValueError, match=re.escape("bad argument spec (1, 1)")):
        _record(mod, single, inputs, q_out, args=((IN, 0), (OUT, 1)))
    assert _record(mod, single, inputs, q_out, args=((IN, 0), (OUT, 0))) is True


def test_outputs_that_share_memory_are_not_recorded(mod):
    """The replay gives each output its own allocation, so a launch whose outputs alias
    (one tensor twice, two views of one buffer) is not one it repeats."""
    site = mod.new_site("pair/alias", 2, False, 2)
    inputs, (q_out, k_out) = _qk()
    assert _record(mod, site, inputs, (q_out, q_out)) is False
    base = torch.empty(q_out.numel() + k_out.numel())
    views = (base[: q_out.numel()].view_as(q_out), base[q_out.numel() :].view_as(k_out))
    assert _record(mod, site, inputs, views) is False
    assert _record(mod, site, inputs, (q_out, k_out.transpose(1, 2))) is False  # not dense
    assert mod.stats(site)[0] == 0
    assert _record(mod, site, inputs, (q_out, k_out)) is True


def test_two_outputs_share_the_input_key_and_miss_to_none(mod):
    site = mod.new_site("pair/key", 2, False, 2)
    (q, k), outs = _qk()
    assert _record(mod, site, (q, k), outs) is True
    assert mod.stats(site) == (1, 0, 0)
    # the key is the inputs' layout: fresh tensors of the same layout are a hit ...
    assert mod.probe(site, _aligned(2, 5, 48), _aligned(2, 3, 48))
    # ... another Sk, a swapped pair or another dtype a miss
    assert not mod.probe(site, q, _aligned(2, 4, 48))
    assert not mod.probe(site, k, q)
    assert not mod.probe(site, q.double(), k)
    # a miss returns None; so does a CPU hit (no launch to replay); both count as misses
    assert mod.call(site, q, _aligned(2, 4, 48)) is None
    assert mod.call(site, q, k) is None
    assert mod.stats(site) == (1, 0, 2)
    assert mod.last_error(site) is None
    mod.clear(site)
    assert mod.stats(site) == (0, 0, 0) and not mod.probe(site, q, k)


@pytest.mark.parametrize("kind, what", [(1, "c10::Error"), (2, "runtime_error"), (3, "not a std")])
def test_cpp_exceptions_on_a_two_output_site_are_misses(mod, kind, what):
    site = mod.new_site(f"pair/fault{kind}", 2, False, 2)
    (q, k), outs = _qk()
    assert _record(mod, site, (q, k), outs)
    assert mod.probe(site, q, k)
    mod.inject_fault(kind)
    assert mod.call(site, q, k) is None  # a miss: the Python path decides
    assert what in mod.last_error(site)
    assert mod.stats(site) == (1, 0, 1)
    mod.inject_fault(kind)
    assert mod.probe(site, q, k) is False
    mod.inject_fault(kind)
    with pytest.raises(RuntimeError, match=re.escape("ltx2k native:")):
        _record(mod, site, (q, k), outs)
    assert mod.probe(site, q, k)  # nothing was left broken
    assert mod.stats(site)[0] == 1


# --- arg_spec and launch_and_record ---------------------------------------------------


def _pair(q_ptr, q_out_ptr, k_ptr, k_out_ptr, n_q, n_k, BLOCK: tl.constexpr):
    pass


PAIR_TYPES = ["*fp32", "*fp32", "*fp32", "*fp32", "i32", "i32", "constexpr"]
CEXPR = (("BLOCK", 128),)


class _Launcher:
    global_scratch_size = 0
    profile_scratch_size = 0
    launch_cooperative_grid = False
    launch_pdl = False


class FakeCompiled:
    """What arg_spec reads off Triton 3.6's CompiledKernel, for ``_pair``."""

    def __init__(self, types=PAIR_TYPES):
        names = ["q_ptr", "q_out_ptr", "k_ptr", "k_out_ptr", "n_q", "n_k", "BLOCK"]
        self.src = type("Src", (), {"signature": dict(zip(names, types, strict=True))})()
        self.run = _Launcher()
        self.metadata = type("Meta", (), {"num_ctas": 1, "num_warps": 4, "shared": 0})()
        self.function = 0xF00D


def test_arg_spec_maps_each_output_pointer_to_its_index():
    jit = triton.runtime.jit.JITFunction(_pair)
    (q, k), (q_out, k_out) = _qk()
    tensors, scalars = (q, q_out, k, k_out), (480, 288)
    spec = _native.arg_spec(jit, FakeCompiled(), (q, k), (q_out, k_out), tensors, scalars, CEXPR)
    assert spec == list(PAIR_ARGS)
    # out's order decides the indices, not the kernel's parameter order
    swapped = _native.arg_spec(jit, FakeCompiled(), (q, k), (k_out, q_out), tensors, scalars, CEXPR)
    assert swapped == [(IN, 0), (OUT, 1), (IN, 1), (OUT, 0), (I32, 480), (I32, 288)]
    # a pointer to neither an input nor an output: not passable
    stray = (q, q_out, k, torch.empty(1))
    assert (
        _native.arg_spec(jit, FakeCompiled(), (q, k), (q_out, k_out), stray, scalars, CEXPR) is None
    )
    # one output, given as a Tensor: index 0, as before
    one = _native.arg_spec(jit, FakeCompiled(), (q, k, k_out), q_out, tensors, scalars, CEXPR)
    assert one == [(IN, 0), (OUT, 0), (IN, 1), (IN, 2), (I32, 480), (I32, 288)]


@pytest.fixture
def pair_jit(mod, monkeypatch):
    """A real JITFunction of ``_pair`` whose dispatcher returns a stand-in compiled kernel
    (compiled into Triton's cache, as JITFunction.run does), with the built module as the
    process's native module: (jit, the dispatcher's calls)."""
    jit = triton.runtime.jit.JITFunction(_pair)
    jit.device_caches = {0: ({}, {}, None, None, None)}
    calls = []

    def run(*args, grid, warmup, **kwargs):
        calls.append((grid, args, kwargs))
        compiled = FakeCompiled()
        jit.device_caches[0][0][f"key-{len(calls)}"] = compiled
        return compiled

    jit.run = run
    state = _native._State()
    state.tried, state.module = True, mod
    monkeypatch.setattr(_native, "_STATE", state)
    monkeypatch.setattr(_native, "_ALL_SITES", weakref.WeakSet())
    monkeypatch.setattr(_native, "_current_device", lambda: 0)
    return jit, calls


def test_launch_and_record_lands_a_two_output_launch_in_the_memo(pair_jit):
    jit, calls = pair_jit
    site = _native.Site("pair/jit", n_inputs=2, n_outputs=2)
    (q, k), (q_out, k_out) = _qk()
    assert site.call(q, k) is None  # binds to a two-output C++ site; nothing recorded yet
    site.launch_and_record(
        jit, (4,), (q, k), (q_out, k_out), (q, q_out, k, k_out), (480, 288), CEXPR, 4
    )
    assert calls == [((4,), (q, q_out, k, k_out, 480, 288), {"BLOCK": 128, "num_warps": 4})]
    assert site.stats() == (1, 0, 1)
    assert site.probe(_aligned(2, 5, 48), _aligned(2, 3, 48))
    assert not site.probe(q, _aligned(2, 4, 48))
    assert site.call(q, k) is None and site.stats() == (1, 0, 2)  # CPU: nothing to launch


def test_launch_and_record_refuses_a_wrong_output_count_before_launching(pair_jit):
    jit, calls = pair_jit
    site = _native.Site("pair/wrong", n_inputs=2, n_outputs=2)
    (q, k), (q_out, k_out) = _qk()
    tensors = (q, q_out, k, k_out)
    with pytest.raises(ValueError, match="records 2 outputs, got 1"):
        site.launch_and_record(jit, (4,), (q, k), (q_out,), tensors, (480, 288), CEXPR, 4)
    with pytest.raises(TypeError, match="2 outputs: out must be a tuple"):
        site.launch_and_record(jit, (4,), (q, k), q_out, tensors, (480, 288), CEXPR, 4)
    single = _native.Site("pair/single", n_inputs=2)
    with pytest.raises(TypeError, match="one output: out must be a Tensor"):
        single.launch_and_record(jit, (4,), (q, k), (q_out, k_out), tensors, (480, 288), CEXPR, 4)
    assert calls == []  # refused before the launch
    assert _native.module() is not None  # a caller's mistake, not a reason to turn off


def test_one_output_sites_bind_as_before(monkeypatch):
    """A one-output site creates its C++ site with the three arguments it always passed; a
    several-output site adds its count."""

    class Module:
        def __init__(self):
            self.new_sites = []

        def new_site(self, *args):
            self.new_sites.append(args)
            return len(self.new_sites) - 1

        def call(self, site, *inputs):
            return None

    module = Module()
    state = _native._State()
    state.tried, state.module = True, module
    monkeypatch.setattr(_native, "_STATE", state)
    monkeypatch.setattr(_native, "_ALL_SITES", weakref.WeakSet())
    x = torch.zeros(1)
    assert _native.Site("one", 3).call(x, x, x) is None
    assert _native.Site("nine", 2, unbind=True).call(x, x) is None
    assert _native.Site("two", 2, n_outputs=2).call(x, x) is None
    assert module.new_sites == [("one", 3, False), ("nine", 2, True), ("two", 2, False, 2)]


# --- on a GPU: a real two-output launch, replayed ------------------------------------

BLOCK = 128


@triton.jit
def _pair_kernel(q_ptr, q_out_ptr, k_ptr, k_out_ptr, n_q, n_k, BLOCK: tl.constexpr):
    # two outputs of different lengths from one grid: each program covers BLOCK elements
    # of both, masked to each tensor's own length
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    q = tl.load(q_ptr + offs, mask=offs < n_q)
    tl.store(q_out_ptr + offs, q * 2.0, mask=offs < n_q)
    k = tl.load(k_ptr + offs, mask=offs < n_k)
    tl.store(k_out_ptr + offs, k + 1.0, mask=offs < n_k)


def _pair_call(site: _native.Site, q: torch.Tensor, k: torch.Tensor):
    """A public function's shape: try the replay, else validate nothing (a test), allocate
    both outputs and launch through the site, recording the launch."""
    if _native.plain2(q, k):
        out = site.call(q, k)
        if out is not None:
            return out
    q_out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    k_out = torch.empty(k.shape, dtype=k.dtype, device=k.device)
    n_q, n_k = q.numel(), k.numel()
    site.launch_and_record(
        _pair_kernel,
        (triton.cdiv(max(n_q, n_k), BLOCK),),
        (q, k),
        (q_out, k_out),
        (q, q_out, k, k_out),
        (n_q, n_k),
        (("BLOCK", BLOCK),),
        4,
    )
    return q_out, k_out


def _gpu_qk(q_shape, k_shape, seed: int):
    g = torch.Generator(device="cuda").manual_seed(seed)
    q = torch.randn(q_shape, generator=g, device="cuda")
    k = torch.randn(k_shape, generator=g, device="cuda")
    return q, k


def _nan_recycled(*numels: int) -> list[int]:
    """Leave NaN-filled free fp32 blocks of these sizes in the caching allocator, taken in
    this order by the next allocations of these sizes (asserted by the caller); return
    their addresses."""
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    blocks = [torch.full((n,), float("nan"), device="cuda") for n in numels]
    ptrs = [b.data_ptr() for b in blocks]
    del blocks
    return ptrs


def _assert_fresh_like(out: torch.Tensor, x: torch.Tensor) -> None:
    """``out`` is a new dense tensor of ``x``'s shape, dtype and device."""
    assert out.shape == x.shape and out.dtype == x.dtype and out.device == x.device
    assert out.is_contiguous() and out.storage_offset() == 0


def _disjoint(a: torch.Tensor, b: torch.Tensor) -> bool:
    a0, b0 = a.data_ptr(), b.data_ptr()
    return a0 + a.numel() * a.element_size() <= b0 or b0 + b.numel() * b.element_size() <= a0


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize(
    "q_shape, k_shape",
    [
        ((2, 5, 48), (2, 3, 48)),  # q and k of different lengths
        ((1, 7, 33), (1, 300, 33)),  # k longer than q; odd sizes
        ((1, 1, 1), (1, 4, 2)),  # n_q == 1: an int specialized to 1, not passed
    ],
    ids=str,
)
def test_gpu_two_output_launch_is_replayed(q_shape, k_shape):
    assert _native.module() is not None, _native._STATE.off_reason
    site = _native.Site(f"pair/gpu/{q_shape}/{k_shape}", n_inputs=2, n_outputs=2)
    q, k = _gpu_qk(q_shape, k_shape, seed=0)
    q_out, k_out = _pair_call(site, q, k)  # the Python path: records
    assert torch.equal(q_out, q * 2) and torch.equal(k_out, k + 1)
    entries, hits, _ = site.stats()
    assert entries == 1 and hits == 0, site.stats()
    del q_out, k_out
    for seed in range(1, 4):
        q, k = _gpu_qk(q_shape, k_shape, seed=seed)  # fresh tensors, same layout
        ptrs = _nan_recycled(q.numel(), k.numel())
        out = _pair_call(site, q, k)
        assert site.stats()[1] == seed, f"this call was not a replay: {site.last_error()}"
        assert type(out) is tuple and len(out) == 2
        q_out, k_out = out
        assert [q_out.data_ptr(), k_out.data_ptr()] == ptrs, "outputs not on the NaN blocks"
        _assert_fresh_like(q_out, q)
        _assert_fresh_like(k_out, k)
        assert torch.equal(q_out, q * 2), f"seed {seed}"
        assert torch.equal(k_out, k + 1), f"seed {seed}"
        # separate allocations: neither storage holds the other's data
        assert q_out.untyped_storage().data_ptr() != k_out.untyped_storage().data_ptr()
        assert _disjoint(q_out, k_out)
        q_out.fill_(0)
        assert torch.equal(k_out, k + 1)
        del out, q_out, k_out
    assert site.last_error() is None


@gpu
@pytest.mark.gpu
def test_gpu_another_layout_is_recorded_not_replayed():
    site = _native.Site("pair/gpu/layouts", n_inputs=2, n_outputs=2)
    q, k = _gpu_qk((2, 5, 48), (2, 3, 48), seed=1)
    for _ in range(2):
        q_out, k_out = _pair_call(site, q, k)
    assert site.stats()[:2] == (1, 1)
    k2 = _gpu_qk((2, 5, 48), (2, 4, 48), seed=2)[1]  # another Sk: another key
    q_out, k_out = _pair_call(site, q, k2)
    assert site.stats()[:2] == (2, 1)
    assert k_out.shape == k2.shape and torch.equal(k_out, k2 + 1) and torch.equal(q_out, q * 2)
    q_out, k_out = _pair_call(site, q, k2)
    assert site.stats()[:2] == (2, 2)
    assert torch.equal(k_out, k2 + 1) and torch.equal(q_out, q * 2)
