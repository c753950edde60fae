"""The native call path never takes the caller's process down (CPU).

- Python side: vmap, grad, jvp, meta, fake and subclass inputs never reach the C++
  replay (the site's entry point is replaced by a tripwire; the registered op's
  implementation may call it with the plain tensors under a transform's wrappers); the
  call then behaves as the non-native variant does (the same exception type, or an
  equal result).
- C++ side (in a subprocess, so that a regression is a failed test and not a crashed
  run): given those inputs directly, or under a transform or mode, ``call`` misses and
  ``probe`` says no, without touching their data; an injected C++ exception of any kind
  is a miss in ``call``/``probe`` and a RuntimeError elsewhere; a failing ``record``
  turns the native path off with one warning.
- Entries: replaced or cleared while a guard runs Python code, the entry in use stays
  alive; sites added meanwhile do not move it.
- Which binary: the replay holds while Triton's in-memory cache maps the recorded cache
  key to the recorded CompiledKernel under the same launch-time options, and misses as
  soon as Triton would launch something else.
- Triton versions: pyproject.toml declares exactly the verified range, and any other
  version gets one warning for both fast paths and the Python path's result.
"""

from __future__ import annotations

import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch
import triton
from torch._subclasses.fake_tensor import FakeTensorMode

import ltx2k
from ltx2k.kernels import _launch, _native, adaln, rope
from ltx2k.workload import cases, shapes

ROOT = Path(__file__).resolve().parents[1]
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


# --- the Python-side guards ----------------------------------------------------------


class Tripwire:
    """Stands in for a site's C++ entry point: counts calls, answers a miss, and notes
    every call that was not plain tensors outside any transform (the registered op's
    implementation, below a vmap rule or autograd, may call it with plain tensors)."""

    def __init__(self):
        self.calls = 0
        self.odd = []

    def __call__(self, *inputs):
        self.calls += 1
        plain = all(type(t) is torch.Tensor and not t.is_meta for t in inputs)
        if not plain or _native._functorch_level() is not None:
            self.odd.append([type(t).__name__ for t in inputs])
        return None


class Sub(torch.Tensor):
    pass


def _rope_setup():
    x, cos, sin = cases.rope_inputs(shapes.RopeShape(1, 4, 2, 8), DEVICE, seed=0)
    return rope, ltx2k.apply_ltx2_split_rotary_emb, (x, cos, sin), 0


def _ada_setup():
    table, ts = cases.ada_inputs(shapes.AdaShape(1, 3, 16), DEVICE, seed=0)
    return adaln, ltx2k.ltx2_ada_values9, (table, ts), 1


# (setup, native variant, the non-native variant with the same kernel and config)
FUNCTIONS = [
    pytest.param(_rope_setup, "blocked_native", "blocked", id="rope-blocked_native"),
    pytest.param(_ada_setup, "slab_dconst", "slab_grid", id="ada-slab_dconst"),
    pytest.param(_ada_setup, "slab_native", "slab_grid", id="ada-slab_native"),
]


def _total(out):
    outs = out if isinstance(out, tuple) else (out,)
    return sum(o.float().sum() for o in outs)


def _with(args, index, value):
    return tuple(value if i == index else a for i, a in enumerate(args))


def _run(mode: str, fn, args, index):
    """Call ``fn(*args)`` under ``mode``; ``index`` is the argument the transform acts on."""
    arg = args[index]
    if mode == "vmap":
        return torch.vmap(lambda a: fn(*_with(args, index, a)))(torch.stack([arg, arg]))
    if mode == "grad":
        return torch.func.grad(lambda a: _total(fn(*_with(args, index, a))))(arg)
    if mode == "jvp":
        return torch.func.jvp(lambda a: fn(*_with(args, index, a)), (arg,), (torch.ones_like(arg),))
    if mode == "meta":
        return fn(*(a.to("meta") for a in args))
    if mode == "fake":
        with FakeTensorMode() as fake:
            return fn(*(fake.from_tensor(a) for a in args))
    if mode == "subclass":
        return fn(*_with(args, index, arg.as_subclass(Sub)))
    if mode == "plain":
        return fn(*args)
    raise AssertionError(mode)


def _flat(out):
    if isinstance(out, torch.Tensor):
        return [out]
    return [t for o in out for t in _flat(o)]


def _outcome(run):
    try:
        return ("returned", _flat(run()))
    except Exception as e:
        return ("raised", type(e))


def _same_outcome(native, other):
    if native[0] != other[0]:
        return False
    if native[0] == "raised":
        return native[1] is other[1]
    return len(native[1]) == len(other[1]) and all(
        a.shape == b.shape
        and a.dtype == b.dtype
        and (a.is_meta or b.is_meta or type(a) is not torch.Tensor or torch.equal(a, b))
        for a, b in zip(native[1], other[1], strict=True)
    )


@pytest.mark.parametrize("mode", ["vmap", "grad", "jvp", "meta", "fake", "subclass"])
@pytest.mark.parametrize("setup, native, other", FUNCTIONS)
def test_python_guard_keeps_odd_inputs_from_the_replay(setup, native, other, mode, monkeypatch):
    module, fn, args, index = setup()
    tripwire = Tripwire()
    monkeypatch.setattr(module._SITES[module.CALLS[(native, "auto")][0]], "call", tripwire)
    got = _outcome(lambda: _run(mode, lambda *a: fn(*a, variant=native), args, index))
    assert tripwire.odd == [], f"{mode} input reached the C++ replay"
    want = _outcome(lambda: _run(mode, lambda *a: fn(*a, variant=other), args, index))
    assert _same_outcome(got, want), (mode, got, want)


@pytest.mark.parametrize("setup, native, other", FUNCTIONS)
def test_python_guard_lets_plain_tensors_through(setup, native, other, monkeypatch):
    module, fn, args, index = setup()
    tripwire = Tripwire()
    monkeypatch.setattr(module._SITES[module.CALLS[(native, "auto")][0]], "call", tripwire)
    got = _outcome(lambda: _run("plain", lambda *a: fn(*a, variant=native), args, index))
    assert tripwire.calls == 1
    want = _outcome(lambda: _run("plain", lambda *a: fn(*a, variant=other), args, index))
    assert got[0] == "returned" and _same_outcome(got, want)


def test_plain_checks():
    a = torch.zeros(2)
    assert _native.plain2(a, a) and _native.plain3(a, a, a)
    assert not _native.plain3(a, a, a.as_subclass(Sub))
    assert not _native.plain2(a.to("meta"), a.to("meta"))
    assert not _native.plain2([1], a)  # not a tensor: validation raises on the Python path
    seen = []
    torch.vmap(lambda t: seen.append(_native.plain2(a, a)) or t)(torch.zeros(2, 1))
    assert seen == [False]  # even with unwrapped arguments: a transform is active


def test_fake_tensors_never_reach_a_launch(monkeypatch):
    """FakeTensors (inputs, or real inputs under FakeTensorMode) go through the registered
    op's fake implementation: a fake output of the right shape, and no launch (Triton would
    launch on null pointers). The Python launch path itself still refuses them."""

    def no_launch(*args, **kwargs):
        raise AssertionError("a fake call reached the Python launch path")

    for module, setup in ((rope, _rope_setup), (adaln, _ada_setup)):
        _, fn, args, _ = setup()
        want = _flat(fn(*args))
        with monkeypatch.context() as m:
            m.setattr(module, "_launch_python", no_launch)
            for variant in sorted(module.ACCEPTED_VARIANTS):
                with FakeTensorMode() as fake:
                    got = _flat(fn(*(fake.from_tensor(a) for a in args), variant=variant))
                with FakeTensorMode(allow_non_fake_inputs=True):
                    got_real_inputs = _flat(fn(*args, variant=variant))
                for outs in (got, got_real_inputs):
                    assert [type(o).__name__ for o in outs] == ["FakeTensor"] * len(want)
                    assert [(o.shape, o.dtype) for o in outs] == [(w.shape, w.dtype) for w in want]
    _, fn, args, _ = _rope_setup()
    with FakeTensorMode() as fake, pytest.raises(TypeError, match="FakeTensor"):
        rope._launch_python(*(fake.from_tensor(a) for a in args), "blocked", "triton")


# --- the C++ side ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def mod():
    return _native.build()


def _selected(key="toy-key", kernel=None):
    """A ``triton`` tuple for ``record`` whose launch Triton's cache holds (see test_native)."""
    jit = kernel or triton.runtime.jit.JITFunction(_toy)
    compiled = object()
    jit.device_caches = {0: ({key: compiled}, {}, None, None, None)}
    return (jit, 0, key, compiled, False, "")


def _toy(a_ptr, n):
    pass


def _record(mod, site, inputs, out=None, triton_tuple=None):
    out = torch.empty(4) if out is None else out
    args = [(0, i) for i in range(len(inputs))]
    return mod.record(
        site, tuple(inputs), out, 0xF00D, 0, 0, (1, 1, 1), 32, 0, args, triton_tuple or _selected()
    )


CPP_SCRIPT = r"""
import sys, warnings
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._python_dispatch import TorchDispatchMode
from ltx2k.kernels import _native

warnings.simplefilter("ignore")
mod = _native.build()
site = mod.new_site("odd", 1, False)
base = torch.zeros(2, 3)
row = base[0]  # the layout (and alignment) a vmapped or wrapped row has
ok = mod.record(
    site, (row,), torch.empty(3), 0xF00D, 0, 0, (1, 1, 1), 32, 0, [(0, 0)],
    (type("K", (), {"debug": None, "pre_run_hooks": [],
                    "device_caches": {0: ({"k": base}, )}})(), 0, "k", base, False, ""),
)
assert ok and mod.probe(site, row), "the plain row must be a hit"
results = {}


def check(name, t):
    results[name] = (mod.probe(site, t), mod.call(site, t))
    print("LTX2K_CASE", name, results[name], flush=True)


class Passthrough(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


torch.vmap(lambda a: check("vmap-batched", a) or a)(base)
torch.vmap(lambda a: check("vmap-unwrapped", row) or a)(base)
torch.func.grad(lambda a: check("grad", a) or a.sum())(row.clone())
torch.func.jvp(lambda a: check("jvp", a) or a, (row.clone(),), (torch.ones(3),))
escaped = []
torch.vmap(lambda a: escaped.append(a) or a)(base)
check("escaped-wrapper", escaped[0])
check("functional", torch._to_functional_tensor(row.clone()))
check("nested", torch.nested.nested_tensor([torch.zeros(3), torch.zeros(2)]))
check("meta", torch.zeros(3, device="meta"))
check("sparse", torch.zeros(3).to_sparse())
check("neg-view", row._neg_view())
with FakeTensorMode(allow_non_fake_inputs=True):
    check("fake-mode-real-input", row)
with FakeTensorMode() as fake:
    check("fake-tensor", fake.from_tensor(row))
with Passthrough():
    check("dispatch-mode", row)
with torch.device("cpu"):
    check("function-mode", row)
bad = [name for name, (hit, out) in results.items() if hit or out is not None]
print("LTX2K_REFUSED_ALL" if not bad else f"LTX2K_NOT_REFUSED {bad}", flush=True)
assert mod.probe(site, row), "still a hit afterwards"
print("LTX2K_DONE", flush=True)
"""


def test_cpp_refuses_what_it_cannot_read_without_aborting():
    proc = subprocess.run(
        [sys.executable, "-c", CPP_SCRIPT],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr[-3000:]}"
    assert "LTX2K_REFUSED_ALL" in proc.stdout and "LTX2K_DONE" in proc.stdout, proc.stdout


def test_cpp_refuses_autograd_inputs(mod):
    """A grad-requiring input under grad mode, or a forward-AD dual, is a miss: a replayed
    output would have no grad_fn, or would drop the tangent (the public functions then send
    the call to the registered op). Under no_grad the same tensor replays."""
    import torch.autograd.forward_ad as fwad

    site = mod.new_site("autograd", 1, False)
    a = torch.zeros(4)
    assert _record(mod, site, (a,))
    assert mod.probe(site, a)
    a.requires_grad_()
    assert mod.probe(site, a) is False
    with torch.no_grad():
        assert mod.probe(site, a)
    a.requires_grad_(False)
    with fwad.dual_level():
        dual = fwad.make_dual(a, torch.ones(4))
        assert dual.data_ptr() == a.data_ptr()  # the same layout: only the tangent differs
        assert mod.probe(site, dual) is False
        assert mod.probe(site, a)


@pytest.mark.parametrize("kind, what", [(1, "c10::Error"), (2, "runtime_error"), (3, "not a std")])
def test_cpp_exceptions_are_misses_or_python_errors(mod, kind, what):
    site = mod.new_site(f"fault{kind}", 1, False)
    a = torch.zeros(4)
    assert _record(mod, site, (a,))
    assert mod.probe(site, a)
    mod.inject_fault(kind)
    assert mod.call(site, a) is None  # a miss: the Python path decides
    assert what in mod.last_error(site)
    mod.inject_fault(kind)
    assert mod.probe(site, a) is False
    mod.inject_fault(kind)
    with pytest.raises(RuntimeError, match=re.escape("ltx2k native:")):
        _record(mod, site, (a,))
    assert mod.probe(site, a)  # nothing was left broken
    with pytest.raises(ValueError, match="fault kind"):
        mod.inject_fault(9)


def test_failed_record_turns_the_native_path_off_once(mod, monkeypatch):
    """A record that raises (a protocol this code does not know) after the launch: the
    call still returns, one warning, and no site replays for the rest of the process."""
    jit = triton.runtime.jit.JITFunction(_toy3)
    jit.device_caches = {0: ({}, {}, None, None, None)}

    def run(*args, grid, warmup, **kwargs):
        compiled = FakeCompiled(TYPES)
        jit.device_caches[0][0]["key"] = compiled
        return compiled

    jit.run = run
    state = _native._State()
    state.tried, state.module = True, mod
    monkeypatch.setattr(_native, "_STATE", state)
    monkeypatch.setattr(_native, "_ALL_SITES", type(_native._ALL_SITES)())
    monkeypatch.setattr(_native, "_current_device", lambda: 0)
    site = _native.Site("toy", 2, False)
    other = _native.Site("other", 1, False)
    a, b, out = torch.zeros(8), torch.zeros(8), torch.zeros(8)
    mod.inject_fault(2)
    with pytest.warns(RuntimeWarning, match="native call path off.*recording a launch failed"):
        site.launch_and_record(jit, (2,), (a, b), out, (a, b, out), (8, 2**40), (("BLOCK", 32),), 4)
    assert site.call is _native._no_entry and other.call is _native._no_entry
    assert _native.module() is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert site.call(a, b) is None


def _toy3(a_ptr, b_ptr, out_ptr, n, stride, BLOCK: triton.language.constexpr):
    pass


TYPES = ["*fp32", "*fp32", "*fp32", "i32", "i64", "constexpr"]


class FakeCompiled:
    """What arg_spec reads off Triton 3.6's CompiledKernel (as in test_native.py)."""

    def __init__(self, types):
        names = ["a_ptr", "b_ptr", "out_ptr", "n", "stride", "BLOCK"]
        self.src = type("Src", (), {"signature": dict(zip(names, types, strict=True))})()
        self.run = type(
            "Launcher",
            (),
            {
                "global_scratch_size": 0,
                "profile_scratch_size": 0,
                "launch_cooperative_grid": False,
                "launch_pdl": False,
            },
        )()
        self.metadata = type("Meta", (), {"num_ctas": 1, "num_warps": 4, "shared": 0})()
        self.function = 0xF00D


# --- entries stay alive while in use; sites never move --------------------------------


class Reentrant:
    """A kernel whose ``debug`` read (one of the replay's guards) runs Python code: here,
    code that clears the site, records a replacement and adds sites, as another thread
    could whenever a guard's attribute read lets it run."""

    pre_run_hooks: list = []

    def __init__(self, on_read):
        self.on_read = on_read
        self.reads = 0

    @property
    def debug(self):
        self.reads += 1
        self.on_read()
        return None


def test_entry_in_use_survives_replacement_and_new_sites(mod):
    site = mod.new_site("reentrant", 1, False)
    a = torch.zeros(4)
    compiled = object()
    triton_tuple = None

    def meddle():
        mod.clear(site)  # drops the map's reference to the entry being checked
        _record(mod, site, (a,), triton_tuple=_selected("other"))
        for _ in range(3):
            mod.new_site("more", 1, False)

    kernel = Reentrant(meddle)
    kernel.device_caches = {0: ({"k": compiled}, {}, None, None, None)}
    # `kernel.debug or knobs.runtime.debug`, as the Python side records it
    triton_tuple = (kernel, 0, "k", compiled, False, "")
    assert _record(mod, site, (a,), triton_tuple=triton_tuple)
    # the guard ran the meddling code mid-check; the entry it checks is still whole
    assert mod.probe(site, a) is True and kernel.reads == 1
    assert mod.stats(site)[0] == 1  # the replacement
    assert mod.probe(site, a)  # ... whose guards hold


def test_threads_recording_probing_and_clearing(mod):
    import threading

    sites = [mod.new_site(f"threads{i}", 1, False) for i in range(4)]
    tensors = [torch.zeros(n) for n in range(1, 9)]
    errors = []

    def work(seed):
        try:
            for i in range(1500):
                site = sites[(seed + i) % len(sites)]
                t = tensors[(seed * 7 + i) % len(tensors)]
                if i % 5 == 0:
                    mod.clear(site)
                _record(mod, site, (t,))
                mod.probe(site, t)
                mod.call(site, t)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert all(0 <= mod.stats(s)[0] <= len(tensors) for s in sites)


# --- which binary: Triton's own cache key and CompiledKernel --------------------------


def test_replay_follows_the_binary_triton_would_launch(mod, monkeypatch):
    from triton import knobs

    site = mod.new_site("binary", 1, False)
    a = torch.zeros(4)
    triton_tuple = _selected("spec-and-options")
    jit, _, key, compiled, _, _ = triton_tuple
    assert _record(mod, site, (a,), triton_tuple=triton_tuple) and mod.probe(site, a)

    # Triton compiled again under the same key (its cache was refilled after a knob such
    # as default_fp_fusion changed): another binary, so a miss ...
    cache = jit.device_caches[0][0]
    cache[key] = object()
    assert not mod.probe(site, a)
    # ... until the Python path records the launch of the new one
    assert _record(mod, site, (a,), triton_tuple=(jit, 0, key, cache[key], False, ""))
    assert mod.probe(site, a)

    # Triton's cache emptied, or this device's caches gone: nothing to compare with
    saved = dict(cache)
    cache.clear()
    assert not mod.probe(site, a)
    cache.update(saved)
    jit.device_caches = {}
    assert not mod.probe(site, a)
    jit.device_caches = {0: (cache, {}, None, None, None)}
    assert mod.probe(site, a)

    # the launch-time options JITFunction.run folds into its key: another key, a miss
    monkeypatch.setattr(knobs.runtime, "debug", True)
    assert not mod.probe(site, a)
    monkeypatch.setattr(knobs.runtime, "debug", False)
    jit.debug = True
    assert not mod.probe(site, a)
    jit.debug = None
    monkeypatch.setattr(knobs.compilation, "instrumentation_mode", "consan")
    assert not mod.probe(site, a)
    monkeypatch.setattr(knobs.compilation, "instrumentation_mode", "")
    assert mod.probe(site, a)

    # hooks that must see the launch
    jit.pre_run_hooks.append(lambda *args, **kwargs: None)
    assert not mod.probe(site, a)
    jit.pre_run_hooks.clear()
    knobs.runtime.launch_enter_hook.add(print)
    try:
        assert not mod.probe(site, a)
    finally:
        knobs.runtime.launch_enter_hook.remove(print)
    assert mod.probe(site, a)


def test_compile_only_knob_alone_keeps_the_binary_as_kernel_grid_does(mod, monkeypatch):
    """default_fp_fusion (like fp32_default and the ptxas options) is read only by
    compile(); Triton 3.6's kernel[grid] keeps launching the binary its in-memory cache
    holds, so the replay does too. The binary changes when Triton compiles again: that
    replaces the cache entry, and the test above shows the miss."""
    from triton import knobs

    site = mod.new_site("fp-fusion", 1, False)
    a = torch.zeros(4)
    assert _record(mod, site, (a,))
    monkeypatch.setenv("TRITON_DEFAULT_FP_FUSION", "0")
    assert knobs.language.default_fp_fusion is False
    assert mod.probe(site, a)


def test_triton_cache_key_is_found_by_identity():
    jit = triton.runtime.jit.JITFunction(_toy)
    compiled, other = object(), object()
    jit.device_caches = {3: ({"a": other, "b": compiled}, {}, None, None, None)}
    assert _native.triton_cache_key(jit, compiled, 3) == "b"
    assert _native.triton_cache_key(jit, compiled, 0) is None  # another device
    assert _native.triton_cache_key(jit, object(), 3) is None
    assert _native.triton_cache_key(object(), compiled, 3) is None  # not Triton's layout


# --- Triton versions ------------------------------------------------------------------


def _declared_triton() -> str:
    [spec] = re.findall(r'"(triton[^"]*)"', (ROOT / "pyproject.toml").read_text())
    return spec


def test_pyproject_declares_the_verified_triton_range():
    spec = _declared_triton()
    lower = re.search(r">=\s*(\d+)\.(\d+)", spec)
    upper = re.search(r"<\s*(\d+)\.(\d+)", spec)
    assert lower and upper, f"{spec}: needs both bounds"
    lo, hi = (int(lower[1]), int(lower[2])), (int(upper[1]), int(upper[2]))
    minors = {(lo[0], m) for m in range(lo[1], hi[1])} if lo[0] == hi[0] else None
    assert minors == set(_launch.VERIFIED_TRITON), (spec, sorted(_launch.VERIFIED_TRITON))
    assert _launch.triton_version() in _launch.VERIFIED_TRITON, (
        f"the tests run on Triton {triton.__version__}, outside the declared {spec}"
    )


def test_unverified_triton_warns_once_for_both_paths(monkeypatch):
    monkeypatch.setattr(_launch, "_VERSION_WARNING", _launch._VersionWarning())
    monkeypatch.setattr(_launch, "_FAST", _launch._Fast())
    monkeypatch.setattr(_native, "_STATE", _native._State())
    monkeypatch.setattr(_native, "available_reason", lambda: None)
    monkeypatch.setattr(triton, "__version__", "3.9.0")
    monkeypatch.setattr(_native, "build", lambda **kw: pytest.fail("built on an unverified Triton"))
    with pytest.warns(RuntimeWarning, match=r"Triton 3\.9\.0 is not a version .*verified") as w:
        assert _native.Site("a", 1, False).call(torch.zeros(1)) is None
    assert len(w) == 1 and "lean and native launch paths are off" in str(w[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the lean path's own check: no second warning
        assert _launch._build() is False
        assert _native.Site("b", 1, False).call(torch.zeros(1)) is None
    assert "3.9.0" in _native._STATE.off_reason and "3.9.0" in _launch._FAST.off_reason


def test_unverified_triton_still_gives_the_python_paths_result(monkeypatch):
    monkeypatch.setattr(_launch, "_VERSION_WARNING", _launch._VersionWarning())
    monkeypatch.setattr(_launch, "_FAST", _launch._Fast())
    monkeypatch.setattr(_native, "_STATE", _native._State())
    monkeypatch.setattr(triton, "__version__", "3.9.0")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # on a GPU: the one warning above
        for setup, native, other in [(_rope_setup, "blocked_native", "blocked")] + [
            (_ada_setup, v, "slab_grid") for v in ("slab_dconst", "slab_native")
        ]:
            _, fn, args, _ = setup()
            for _ in range(2):
                got = _flat(fn(*args, variant=native))
                want = _flat(fn(*args, variant=other))
                assert all(torch.equal(g, w) for g, w in zip(got, want, strict=True))
