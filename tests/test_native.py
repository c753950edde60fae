"""The native call path (ltx2k/kernels/_native.py + _native.cpp) and its variants.

- CPU: the extension builds against the installed torch; its memo key separates
  every layout the Python path decides on (sizes, strides, dtype, device,
  alignment) and nothing else; it refuses what it cannot replay (tensor
  subclasses, negative views); ``record`` checks its arguments; the memo is
  bounded. ``arg_spec`` turns a compiled signature into the launch parameters
  (ints specialized to 1 dropped, pointers matched by identity) and refuses
  scratch, PDL, clusters and scalar types it does not pass. A recorded launch of
  a real JITFunction (stand-in compiled kernel) lands in the memo.
- In the interpreter the native variants run the Python path: their bit-exact,
  poison, mutation and launch-grid checks are in test_algorithms_and_launch_paths.py (NEW_ROPE,
  NEW_ADA include them).
- GPU: replays (not the Python path) are bit-exact on fresh inputs written into
  NaN-filled recycled memory, at shapes whose ints specialize to 1; a launch
  hook, another layout or a misaligned view sends the call back to Python;
  validation still raises; graphs and torch.compile are in test_algorithms_and_launch_paths.py.
"""

from __future__ import annotations

import importlib
import warnings
from pathlib import Path

import pytest
import torch
import triton
import triton.language as tl

from ltx2k.kernels import _native, adaln, rope
from ltx2k.workload import cases, reference, shapes

gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


# --- the extension itself, on the CPU ---------------------------------------------------


@pytest.fixture(scope="module")
def mod():
    """The extension, built (or loaded from its cache) against the installed torch."""
    return _native.build()


def test_a_built_extension_loads_without_the_build_tools(mod, monkeypatch):
    """Every benchmark process that takes the native path loads the module: that must not
    run ninja and the compiler checks (cpp_extension.load) again once it is built."""
    from torch.utils import cpp_extension

    def no_build(**kw):
        raise AssertionError("cpp_extension.load called for a module already built")

    monkeypatch.setattr(cpp_extension, "load", no_build)
    again = _native.build()
    assert again.__name__ == mod.__name__ and again.__file__ == mod.__file__


def test_loading_a_built_extension_does_not_import_the_build_tools(mod):
    """Importing cpp_extension imports setuptools: a cost every benchmark process that takes
    the native path would pay. A fresh interpreter, so nothing imported it before."""
    import subprocess
    import sys

    code = (
        "import sys; from ltx2k.kernels import _native; m = _native.build(); "
        "print(m.__file__, 'torch.utils.cpp_extension' in sys.modules, 'setuptools' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == [mod.__file__, "False", "False"], out.stdout


def selected(key: str = "toy-key"):
    """The ``triton`` argument of ``record`` for a launch Triton's in-memory cache holds:
    (a real JITFunction, device 0, its cache key, the CompiledKernel stand-in, debug,
    instrumentation_mode), with ``kernel.device_caches[0][0] == {key: compiled}``."""
    jit = _toy_jit()
    compiled = object()
    jit.device_caches = {0: ({key: compiled}, {}, None, None, None)}
    return (jit, 0, key, compiled, False, "")


def _record(mod, site, inputs, out, args=((0, 0), (1, 0), (2, 7)), triton=None):
    return mod.record(
        site,
        tuple(inputs),
        out,
        0xF00D,
        0,
        0,
        (3, 1, 1),
        128,
        0,
        list(args),
        triton or selected(),
    )


def _at_residue(shape, dtype=torch.float32, residue=0, transpose=False):
    """A fresh tensor view whose data_ptr() % 128 == residue (the key's alignment class)."""
    n = 1
    for d in shape:
        n *= d
    item = torch.empty(0, dtype=dtype).element_size()
    base = torch.zeros(n + 256 // item, dtype=dtype)
    off = ((residue - base.data_ptr()) % 128) // item
    flat = base[off : off + n]
    t = flat.view(*shape[::-1]).t() if transpose else flat.view(*shape)
    assert t.data_ptr() % 128 == residue
    return t


def test_build_name_tracks_source_and_abi(monkeypatch):
    name = _native.build_name()
    assert name.startswith("ltx2k_native_") and len(name) == len("ltx2k_native_") + 16
    monkeypatch.setattr(torch, "__version__", torch.__version__ + "+other")
    assert _native.build_name() != name  # another torch ABI: another build


def test_key_separates_every_layout_decision(mod):
    site = mod.new_site("key", 2, False)
    a = _at_residue((4, 8))
    b = _at_residue((3,), torch.bfloat16)
    assert _record(mod, site, (a, b), torch.empty(5)) is True
    # same layout, same alignment class: a hit, whatever the values or addresses
    assert mod.probe(site, _at_residue((4, 8)).fill_(3), _at_residue((3,), torch.bfloat16))
    misses = {
        "size": (_at_residue((4, 9)), b),
        "rank": (_at_residue((32,)), b),
        "stride": (_at_residue((4, 8), transpose=True), b),
        "dtype": (_at_residue((4, 8), torch.float64), b),
        "alignment": (_at_residue((4, 8), residue=4), b),
        "alignment 64": (_at_residue((4, 8), residue=64), b),
        "second input": (a, _at_residue((4,), torch.bfloat16)),
        "inputs swapped": (b, a),
    }
    for what, inputs in misses.items():
        assert not mod.probe(site, *inputs), what
    assert mod.stats(site) == (1, 0, 0)


def test_refuses_what_it_cannot_replay(mod):
    site = mod.new_site("refuse", 1, False)
    a = torch.zeros(4)
    _record(mod, site, (a,), torch.empty(4), args=((0, 0),))

    class Sub(torch.Tensor):
        pass

    assert mod.probe(site, a)
    assert not mod.probe(site, a.as_subclass(Sub))  # __torch_function__ could change anything
    assert not mod.probe(site, a._neg_view())  # lazily negated: Triton would read raw bits
    assert not mod.probe(site, torch.zeros(4).to_sparse())
    assert not mod.probe(site, a, a)  # wrong arity
    # CPU tensors have no launches to replay: a hit on the key still returns None
    assert mod.call(site, a) is None
    assert mod.stats(site)[2] == 1
    # out must be a dense output the replay can re-create
    assert _record(mod, site, (a,), torch.empty(4, 2).t(), args=((0, 0),)) is False


def test_a_parameter_replays_as_a_plain_tensor(mod):
    """A block's nn.Parameter (the AdaLN table, say) is replayed under no_grad and
    inference_mode like a plain tensor of its layout, trainable or frozen; under grad mode a
    trainable one is declined (autograd needs the registered op), and a subclass of
    Parameter is declined like any other subclass."""
    site = mod.new_site("parameter", 1, False)
    _record(mod, site, (_at_residue((4, 8)),), torch.empty(4, 8), args=((0, 0),))

    class MyParameter(torch.nn.Parameter):
        pass

    trainable = torch.nn.Parameter(_at_residue((4, 8)))
    frozen = torch.nn.Parameter(_at_residue((4, 8)), requires_grad=False)
    assert mod.probe(site, frozen)
    assert not mod.probe(site, trainable)  # grad mode: its output would need a grad_fn
    with torch.no_grad():
        assert mod.probe(site, trainable) and mod.probe(site, frozen)
    with torch.inference_mode():
        assert mod.probe(site, trainable) and mod.probe(site, frozen)
        assert mod.probe(site, _at_residue((4, 8)))  # an inference tensor
        assert not mod.probe(site, MyParameter(_at_residue((4, 8))))
    wider = torch.nn.Parameter(_at_residue((4, 9)), requires_grad=False)
    assert not mod.probe(site, wider)  # a Parameter's layout is keyed as a tensor's


def test_the_python_side_lets_parameters_try_the_replay():
    """plain2/plain3 pass Parameters to the C++ side (which decides on autograd) and
    decline every other subclass; routed() sends a trainable Parameter under grad mode to
    the registered op, and none under no_grad or inference_mode."""
    from ltx2k.kernels import ops

    t = torch.zeros(2, 3)
    p = torch.nn.Parameter(torch.zeros(2, 3))

    class Sub(torch.Tensor):
        pass

    assert _native.plain2(p, t) and _native.plain3(t, p, p)
    assert not _native.plain2(t, t.as_subclass(Sub))
    assert not _native.plain3(p, t, t.as_subclass(Sub))
    assert ops.routed(p, t)
    with torch.no_grad():
        assert not ops.routed(p, t)
    with torch.inference_mode():
        assert not ops.routed(p, t)


def test_record_checks_its_arguments(mod):
    site = mod.new_site("args", 2, True)
    a, b = torch.zeros(2), torch.zeros(3)
    with pytest.raises(ValueError, match="bad argument spec"):
        _record(mod, site, (a, b), torch.empty(2), args=((0, 2),))  # input index 2 of 2
    with pytest.raises(ValueError, match="bad argument spec"):
        _record(mod, site, (a, b), torch.empty(2), args=((9, 0),))
    with pytest.raises(ValueError, match="records 2 inputs, got 1"):
        _record(mod, site, (a,), torch.empty(2))
    with pytest.raises(ValueError, match="site must be an id"):
        mod.stats(10_000)
    with pytest.raises(TypeError, match="takes 2 inputs, got 1"):
        mod.call(site, a)
    with pytest.raises(ValueError, match="n_inputs must be in"):
        mod.new_site("none", 0, False)


def test_memo_is_bounded(mod):
    site = mod.new_site("bound", 1, False)
    for n in range(1, 4098):
        _record(mod, site, (torch.zeros(n),), torch.empty(1), args=((0, 0),))
    entries, _, _ = mod.stats(site)
    assert 1 <= entries <= 4096
    mod.clear(site)
    assert mod.stats(site) == (0, 0, 0)


# --- arg_spec: a compiled signature to launch parameters --------------------------------


def _toy(a_ptr, b_ptr, out_ptr, n, stride, BLOCK: tl.constexpr):
    pass


def _toy_jit():
    return triton.runtime.jit.JITFunction(_toy)


class _Meta:
    num_ctas = 1
    num_warps = 4
    shared = 0


class _Launcher:
    global_scratch_size = 0
    profile_scratch_size = 0
    launch_cooperative_grid = False
    launch_pdl = False


class _Src:
    def __init__(self, signature):
        self.signature = signature


class FakeCompiled:
    """What arg_spec reads off Triton 3.6's CompiledKernel."""

    def __init__(self, types, launcher=None, meta=None):
        names = ["a_ptr", "b_ptr", "out_ptr", "n", "stride", "BLOCK"]
        self.src = _Src(dict(zip(names, types, strict=True)))
        self.run = launcher or _Launcher()
        self.metadata = meta or _Meta()
        self.function = 0xF00D


A, B, OUT = torch.zeros(4), torch.zeros(4), torch.zeros(4)
TYPES = ["*fp32", "*fp32", "*fp32", "i32", "i64", "constexpr"]
CEXPR = (("BLOCK", 32),)


def _spec(compiled, tensors=(A, B, OUT), scalars=(100, 2**40), inputs=(B, A)):
    return _native.arg_spec(_toy_jit(), compiled, inputs, OUT, tensors, scalars, CEXPR)


def test_arg_spec_maps_pointers_by_identity_and_scalars_by_type():
    # inputs are (B, A): the kernel's first pointer is input 1
    assert _spec(FakeCompiled(TYPES)) == [(0, 1), (0, 0), (1, 0), (2, 100), (3, 2**40)]


def test_arg_spec_drops_ints_specialized_to_one():
    types = ["*fp32", "*fp32", "*fp32", "constexpr", "i32", "constexpr"]  # n == 1
    assert _spec(FakeCompiled(types), scalars=(1, 5)) == [(0, 1), (0, 0), (1, 0), (2, 5)]


@pytest.mark.parametrize(
    "what, compiled, kw",
    [
        (
            "pointer to a tensor that is neither input nor output",
            FakeCompiled(TYPES),
            {"tensors": (A, torch.zeros(1), OUT)},
        ),
        ("float scalar", FakeCompiled(["*fp32", "*fp32", "*fp32", "fp32", "i64", "constexpr"]), {}),
        ("bool passed for an int", FakeCompiled(TYPES), {"scalars": (True, 2**40)}),
        (
            "global scratch",
            FakeCompiled(TYPES, launcher=type("L", (_Launcher,), {"global_scratch_size": 64})()),
            {},
        ),
        (
            "cooperative grid",
            FakeCompiled(
                TYPES, launcher=type("L", (_Launcher,), {"launch_cooperative_grid": True})()
            ),
            {},
        ),
        ("clusters", FakeCompiled(TYPES, meta=type("M", (_Meta,), {"num_ctas": 2})()), {}),
        ("fewer runtime arguments than parameters", FakeCompiled(TYPES), {"scalars": (100,)}),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_arg_spec_refuses_what_the_replay_cannot_pass(what, compiled, kw):
    assert _spec(compiled, **kw) is None, what


def test_arg_spec_passes_a_programmatic_dependent_launch():
    """PDL is a launch attribute, not a parameter: the replay passes the same arguments
    (and launches with the attribute, ``Entry::pdl``)."""
    pdl = FakeCompiled(TYPES, launcher=type("L", (_Launcher,), {"launch_pdl": True})())
    assert _spec(pdl) == _spec(FakeCompiled(TYPES))


def _toy_site(mod, monkeypatch, name, launcher=None):
    """A real JITFunction whose dispatcher returns a stand-in compiled kernel (with
    *launcher*), and a bound site: (site, the dispatcher's calls)."""
    jit = _toy_jit()
    jit.device_caches = {0: ({}, {}, None, None, None)}
    calls = []

    def run(*args, grid, warmup, **kwargs):  # compiles into Triton's cache, as JITFunction.run
        calls.append((grid, args, kwargs))
        compiled = FakeCompiled(TYPES, **({} if launcher is None else {"launcher": launcher()}))
        jit.device_caches[0][0][f"key-{len(calls)}"] = compiled
        return compiled

    jit.run = run
    monkeypatch.setattr(_native._STATE, "module", mod)
    monkeypatch.setattr(_native, "_current_device", lambda: 0)
    site = _native.Site(name, 2, False)
    site._bind = lambda: setattr(site, "id", mod.new_site(name, 2, False)) or True
    return site, jit, calls


def test_a_pdl_launch_is_recorded_only_where_the_driver_can_replay_it(mod, monkeypatch):
    """Replayed without its attribute the launch would differ from the Python path's, so
    without cuLaunchKernelEx (on a CPU machine: no CUDA driver loaded at all) it is not
    recorded, and the call still launched (through the normal path, with launch_pdl). With
    a driver (CUDA 12 and later have cuLaunchKernelEx) it is recorded."""
    pdl_launcher = type("L", (_Launcher,), {"launch_pdl": True})
    site, jit, calls = _toy_site(mod, monkeypatch, "toy_pdl", pdl_launcher)
    a, b, out = torch.zeros(8), torch.zeros(8), torch.zeros(8)
    site.launch_and_record(
        jit, (2,), (a, b), out, (a, b, out), (8, 2**40), CEXPR, 4, launch_pdl=True
    )
    assert [kw for _, _, kw in calls] == [{"BLOCK": 32, "num_warps": 4, "launch_pdl": True}]
    driver = not mod.driver_error()
    assert site.probe(a, b) == driver and site.stats()[0] == int(driver)


def test_launch_and_record_lands_a_jit_launch_in_the_memo(mod, monkeypatch):
    """The Python side end to end on the CPU: a real JITFunction whose dispatcher returns a
    stand-in compiled kernel; the launch is recorded and the same layout then probes as a hit."""
    site, jit, calls = _toy_site(mod, monkeypatch, "toy")
    a, b, out = torch.zeros(8), torch.zeros(8), torch.zeros(8)
    site.launch_and_record(jit, (2,), (a, b), out, (a, b, out), (8, 2**40), CEXPR, 4)
    assert calls == [((2,), (a, b, out, 8, 2**40), {"BLOCK": 32, "num_warps": 4})]
    assert site.probe(a, b) and not site.probe(a, torch.zeros(9))
    assert site.stats()[0] == 1


def test_interpreter_never_builds(monkeypatch):
    """In the CPU interpreter a native variant runs the Python path; nothing is compiled."""
    if not _native._checks.INTERPRET:
        pytest.skip("the interpreter's behaviour")
    monkeypatch.setattr(_native, "build", lambda **kw: pytest.fail("built in the interpreter"))
    monkeypatch.setattr(_native, "_STATE", _native._State())
    site = _native.Site("interp", 1, False)
    assert site.call(torch.zeros(1)) is None and site.call is _native._no_entry


def test_failed_build_warns_once_and_leaves_the_python_path(monkeypatch):
    """No compiler (or any build failure) on a GPU machine: one RuntimeWarning naming the
    cause, then every site answers None (its caller takes the lean Python path)."""
    monkeypatch.setattr(_native, "_STATE", _native._State())
    monkeypatch.setattr(_native, "available_reason", lambda: None)
    monkeypatch.setattr(_native._checks, "INTERPRET", False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    # whatever Triton is installed: this is about the build, not the version check
    monkeypatch.setattr(_native._launch, "unsupported_triton", lambda: None)

    def no_compiler(**kw):
        raise RuntimeError("Ninja is required to load C++ extensions")

    monkeypatch.setattr(_native, "build", no_compiler)
    with pytest.warns(RuntimeWarning, match=r"native call path off .*_native.cpp failed.*Ninja"):
        assert _native.Site("a", 1, False).call(torch.zeros(1)) is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a second site: no second warning
        assert _native.Site("b", 1, False).call(torch.zeros(1)) is None
    assert _native.module() is None and "Ninja" in _native._STATE.off_reason


# --- on a GPU: the replay itself -------------------------------------------------------

ROPE_CASES = [
    shapes.RopeShape(1, 1024, 32, 128),
    shapes.RopeShape(4, 25, 32, 64),
    shapes.RopeShape(2, 1, 5, 64),  # S == 1: an int specialized to 1, not passed
    shapes.RopeShape(1, 3, 1, 2),  # H == 1 and HALF == 1
]
ADA_CASES = [
    shapes.AdaShape(1, 1, 4096, "bf16"),
    shapes.AdaShape(2, 3, 2048, "bf16"),
    shapes.AdaShape(1, 1, 4096, "fp32"),
    shapes.AdaShape(1, 1, 1, "bf16"),  # D == 1: both strides are 1, both specialized away
]


def _call(kernel: str, variant: str, args):
    return cases.variant_fn(kernel, variant)(*args)


def _reference(kernel: str, args):
    return (
        reference.split_rotary_reference(*args)
        if kernel == "split_rope"
        else reference.ada_values9_reference(*args)
    )


def _nan_recycled(nbytes: int) -> int:
    """Leave one NaN-filled free block of ``nbytes`` in the caching allocator, the block
    the next allocation of that size takes (asserted by the caller); return its address."""
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    block = torch.full((nbytes // 2,), float("nan"), dtype=torch.bfloat16, device="cuda")
    ptr = block.data_ptr()
    del block
    return ptr


def _first(out):
    return out[0] if isinstance(out, tuple) else out


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize(
    "kernel, variant, shape",
    [("split_rope", "blocked_native", s) for s in ROPE_CASES]
    + [("ada_values9", v, s) for v in ("slab_native", "slab_dconst") for s in ADA_CASES],
    ids=lambda v: getattr(v, "label", v),
)
def test_gpu_replays_are_bitexact_into_recycled_nan_memory(kernel, variant, shape):
    module = rope if kernel == "split_rope" else adaln
    site = module._SITES[module.CALLS[(variant, "auto")][0]]
    make = cases.rope_inputs if kernel == "split_rope" else cases.ada_inputs
    first = make(shape, "cuda", seed=0)
    out = _call(kernel, variant, first)  # the Python path: records
    assert cases.outputs_equal(out, _reference(kernel, first))
    nbytes = _first(out).untyped_storage().nbytes()
    entries, hits, _ = site.stats()
    assert entries == 1 and hits == 0
    for seed in range(1, 4):
        args = make(shape, "cuda", seed=seed)  # fresh tensors, same layout
        ptr = _nan_recycled(nbytes)
        out = _call(kernel, variant, args)
        assert _first(out).data_ptr() == ptr, "the replay's output did not land on the NaN block"
        assert site.stats()[1] == seed, "this call was not a replay"
        assert cases.outputs_equal(out, _reference(kernel, args)), f"seed {seed}"
        if kernel == "ada_values9":
            n = shape.B * shape.S * shape.D
            assert [o.storage_offset() for o in out] == [i * n for i in range(9)]
            assert all(o.is_contiguous() and o.shape == (shape.B, shape.S, shape.D) for o in out)


@gpu
@pytest.mark.gpu
def test_gpu_other_layouts_and_alignment_go_back_to_python():
    shape = shapes.RopeShape(1, 256, 32, 128)
    x, cos, sin = cases.rope_inputs(shape, "cuda", seed=1)
    for _ in range(2):
        _call("split_rope", "blocked_native", (x, cos, sin))
    assert rope._SITES["blocked"].stats()[:2] == (1, 1)
    x2, cos2, sin2 = cases.rope_inputs(shape, "cuda", seed=2, transposed=False)
    out = _call("split_rope", "blocked_native", (x2, cos2, sin2))
    assert cases.outputs_equal(out, reference.split_rotary_reference(x2, cos2, sin2))
    assert rope._SITES["blocked"].stats()[:2] == (2, 1)  # new layout: recorded, not replayed
    pad = torch.empty(cos.numel() + 1, dtype=cos.dtype, device="cuda")
    cos_odd = pad[1:].view_as(cos).copy_(cos)
    for _ in range(2):
        out = _call("split_rope", "blocked_native", (x, cos_odd, sin))
        assert cases.outputs_equal(out, reference.split_rotary_reference(x, cos_odd, sin))
    assert rope._SITES["blocked"].stats()[:2] == (
        3,
        2,
    )  # misaligned: its own entry, then a replay


@gpu
@pytest.mark.gpu
def test_gpu_launch_hook_sends_calls_to_the_python_path():
    from triton import knobs

    table, ts = cases.ada_inputs(shapes.AdaShape(1, 1, 4096), "cuda", seed=1)
    for _ in range(2):
        _call("ada_values9", "slab_native", (table, ts))
    assert adaln._SITES["slab_grid"].stats()[1] == 1
    seen = []
    hook = seen.append
    knobs.runtime.launch_enter_hook.add(hook)
    try:
        outs = _call("ada_values9", "slab_native", (table, ts))
    finally:
        knobs.runtime.launch_enter_hook.remove(hook)
    assert len(seen) == 1, "a profiler's hook must see the launch"
    assert adaln._SITES["slab_grid"].stats()[1] == 1
    assert cases.outputs_equal(outs, reference.ada_values9_reference(table, ts))
    _call("ada_values9", "slab_native", (table, ts))
    assert adaln._SITES["slab_grid"].stats()[1] == 2  # hook removed: replays again


@gpu
@pytest.mark.gpu
def test_gpu_validation_still_raises_after_replays():
    x, cos, sin = cases.rope_inputs(shapes.RopeShape(1, 8, 4, 64), "cuda", seed=1)
    for _ in range(2):
        _call("split_rope", "blocked_native", (x, cos, sin))
    with pytest.raises(ValueError, match="x must be bfloat16"):
        _call("split_rope", "blocked_native", (x.float(), cos, sin))
    with pytest.raises(ValueError, match="sin.shape must equal cos.shape"):
        _call("split_rope", "blocked_native", (x, cos, sin[:, :2]))
    table, ts = cases.ada_inputs(shapes.AdaShape(1, 1, 64), "cuda", seed=1)
    for _ in range(2):
        _call("ada_values9", "slab_native", (table, ts))
    with pytest.raises(ValueError, match="timestep must be contiguous"):
        _call("ada_values9", "slab_native", (table, ts.expand(2, -1, -1)))


@gpu
@pytest.mark.gpu
def test_gpu_side_stream_and_native_module_is_on():
    assert _native.module() is not None, _native._STATE.off_reason
    x, cos, sin = cases.rope_inputs(shapes.RopeShape(1, 64, 8, 128), "cuda", seed=3)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        outs = [_call("split_rope", "blocked_native", (x, cos, sin)) for _ in range(3)]
    stream.synchronize()
    for out in outs:
        assert cases.outputs_equal(out, reference.split_rotary_reference(x, cos, sin))
    assert rope._SITES["blocked"].stats()[1] == 2


# Each context a serving process calls the kernels in, and the path it takes on the GPU:
# "replay" (the native path), "python" (the Python launch), "op" (the registered op).
_CONTEXT_PATHS = {
    "plain": "replay",
    "Parameter, trainable, no_grad": "replay",
    "Parameter, trainable, inference_mode": "replay",
    "Parameter, frozen, grad mode on": "replay",
    "inference tensors, inference_mode": "replay",
    "non-default stream": "replay",
    # a TorchFunctionMode: the C++ side declines every mode; the Python launch allocates on
    # the inputs' device, so the result is the same
    "torch.device('cuda') context": "python",
    "autocast bf16": "replay",  # no op of the call is on autocast's lists
    "Parameter, trainable, grad mode on (autograd)": "op",
}


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("kernel", ["split_rope", "ada_values9"])
def test_gpu_every_call_context_takes_its_path_and_gives_the_plain_bits(kernel):
    """The contexts of tools/call_context_latency.py, through the public function: the
    model's nn.Parameter under no_grad or inference_mode replays as a plain tensor does,
    autograd goes to the registered op, and every context gives the plain call's bits,
    under torch.cuda.graph capture too."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tools import call_context_latency as ccl

    spec = cases.KERNELS[kernel]
    fn = getattr(importlib.import_module(spec.triton_module), spec.public_fn)
    shape = spec.gpu_shapes[0] if kernel == "ada_values9" else shapes.RopeShape(4, 25, 32, 64)
    args = spec.make_inputs(shape, "cuda", seed=5)
    expect = fn(*args)
    fn(*args)  # recorded: the next call with this layout replays
    seen = {}
    for name, ctx_args, enter in ccl.contexts(args, (0,)):
        seen[name] = ccl._path(fn, ctx_args, enter)
        with enter():
            assert ccl._same(fn(*ctx_args), expect), name
    assert seen == _CONTEXT_PATHS
    path, same = ccl.graph_capture(fn, args)
    assert same and path == "replay"
