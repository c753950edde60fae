"""The launch paths called from many threads at once: no exception, no wrong result.

A serving process with a thread per request stream makes its first calls, and so the
first compiles of new layouts, concurrently. Every lazily set field of the lean and
native paths is published under ``_launch.LOCK`` with its flag set last.

- CPU: the same Python logic with Triton's runtime stood in for (a slow resolution
  widens the window in which a reader could see a half-set state): the lean path's
  first build, and the native module's build and each site's binding.
- GPU (a fresh process, so that the first compiles do race): 8 threads, new layouts,
  each called twice (record, then replay), every variant and launch path, checked bit
  for bit against the eager reference.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
import types
from pathlib import Path

import pytest
import torch
import triton

from ltx2k.kernels import _launch, _native

ROOT = Path(__file__).resolve().parents[1]
THREADS = 8


def _in_threads(fn, n=THREADS):
    """Run ``fn(thread_index)`` in n threads released together; the exceptions raised."""
    barrier = threading.Barrier(n)
    errors = []

    def run(i):
        barrier.wait()
        try:
            fn(i)
        except Exception as e:  # collected: the assertion shows them all
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def _toy(a_ptr, n, BLOCK: triton.language.constexpr):
    pass


class _Launcher:
    global_scratch_size = profile_scratch_size = 0
    launch_cooperative_grid = launch_pdl = False

    def __init__(self):
        self.calls = []

    def launch(self, *args):
        self.calls.append(args)


def test_lean_path_first_calls_from_threads(monkeypatch):
    """8 threads x 200 first calls (new scalars each) on a fresh lean path: every call
    launches exactly once, through the normal or the fast path, and none raises
    (``'NoneType' object has no attribute 'runtime'`` where ``built`` was published first)."""
    from triton import knobs

    monkeypatch.setattr(_launch, "_FAST", _launch._Fast())
    monkeypatch.setattr(_launch, "_CACHES", {})
    slow_version = _launch.unsupported_triton

    def slow():
        time.sleep(0.05)  # the window another thread could read through
        return slow_version()

    monkeypatch.setattr(_launch, "unsupported_triton", slow)
    active = types.SimpleNamespace(
        get_current_device=lambda: -1, get_current_stream=lambda device: 77
    )
    # sys.modules: the package attribute triton.runtime.driver is the DriverConfig object
    driver_module = sys.modules["triton.runtime.driver"]
    monkeypatch.setattr(driver_module, "driver", types.SimpleNamespace(active=active))
    jit = triton.runtime.jit.JITFunction(_toy)
    launcher = _Launcher()
    normal = []

    def run(*args, grid, warmup, **kwargs):
        normal.append(args)
        return types.SimpleNamespace(run=launcher, function=1, packed_metadata=(1, 1, 0))

    jit.run = run
    a = torch.ones(8, dtype=torch.bfloat16)
    calls = 200

    def work(i):
        for k in range(calls):
            n = 1000 * i + k // 2  # each layout twice: a first call, then a cached one
            _launch.launch(jit, (1,), (a,), (n,), (("BLOCK", 16),), 1)

    errors = _in_threads(work)
    assert errors == [], errors[:3]
    assert _launch._FAST.off_reason is None and _launch._FAST.knobs is knobs
    assert len(normal) + len(launcher.calls) == THREADS * calls
    assert len(launcher.calls) == THREADS * calls // 2  # every second call replayed


class _Module:
    """Stands in for the built native module: counts its sites, misses every call."""

    def __init__(self):
        self.sites = 0
        self.lock = threading.Lock()

    def driver_error(self):
        return ""

    def new_site(self, name, n_inputs, unbind):
        with self.lock:
            self.sites += 1
            return self.sites - 1

    def call(self, site, *inputs):
        return None


def test_native_build_and_binding_from_threads(monkeypatch):
    """8 threads make a site's first call while the module builds: one build, one C++ site,
    and every site ends bound to the module (not unbound for good because a thread saw
    ``tried`` before ``module`` was set)."""
    mod = _Module()
    builds = []

    def build(verbose=False):
        builds.append(1)
        time.sleep(0.05)
        return mod

    monkeypatch.setattr(_native, "_STATE", _native._State())
    monkeypatch.setattr(_native, "available_reason", lambda: None)
    monkeypatch.setattr(_launch, "unsupported_triton", lambda: None)
    monkeypatch.setattr(_native, "build", build)
    sites = [_native.Site(f"threads/{i}", 1, False) for i in range(4)]
    x = torch.zeros(1)
    errors = _in_threads(lambda i: [site.call(x) for site in sites for _ in range(50)])
    assert errors == [], errors[:3]
    assert len(builds) == 1 and _native._STATE.module is mod
    assert mod.sites == len(sites) and sorted(s.id for s in sites) == list(range(len(sites)))
    for site in sites:
        assert getattr(site.call, "func", None) == mod.call, site.call


def test_triton_cache_key_survives_concurrent_inserts():
    """The lookup of the recorded binary's key snapshots Triton's cache dict: a compile in
    another thread inserting into it must not make the lookup raise mid-iteration."""
    compiled = object()
    cache = {i: object() for i in range(20000)}
    cache["mine"] = compiled
    kernel = types.SimpleNamespace(device_caches={0: (cache, None)})
    stop = threading.Event()

    def insert():
        i = 0
        while not stop.is_set():
            cache[("new", i)] = None
            i += 1

    inserter = threading.Thread(target=insert)
    inserter.start()
    try:
        for _ in range(50):
            assert _native.triton_cache_key(kernel, compiled, 0) == "mine"
    finally:
        stop.set()
        inserter.join()


# --- on a GPU ---------------------------------------------------------------------------

_GPU_SCRIPT = r"""
import threading
import torch
import ltx2k
from ltx2k.workload import cases, reference, shapes
from ltx2k.kernels import adaln, rope

THREADS, LAYOUTS = 8, 12
ROPE_CALLS = [(v, p) for (v, p) in rope.CALLS if v in rope.ALGORITHMS and p != "auto"]
ADA_CALLS = [(v, p) for (v, p) in adaln.CALLS if v in adaln.ALGORITHMS and p != "auto"]
barrier = threading.Barrier(THREADS)
errors, wrong, calls = [], [], [0]
lock = threading.Lock()


def work(t):
    barrier.wait()
    for k in range(LAYOUTS):
        # New layouts in every thread: head counts, head dims and hidden sizes that
        # compile new specializations, and a per-thread sequence length.
        B = 1 + k % 2
        rs = shapes.RopeShape(B, 1 + 7 * t + k, (1, 3, 8, 17, 32)[k % 5], (16, 64, 128)[k % 3])
        ads = shapes.AdaShape(B, 1 + 5 * t + k, (8, 40, 128, 2048)[k % 4], ("bf16", "fp32")[k % 2])
        x, cos, sin = cases.rope_inputs(rs, "cuda", seed=t * 100 + k)
        table, ts = cases.ada_inputs(ads, "cuda", seed=t * 100 + k)
        want_r = reference.split_rotary_reference(x, cos, sin)
        want_a = reference.ada_values9_reference(table, ts)
        for rep in range(2):  # record, then replay
            for variant, launch in ROPE_CALLS:
                try:
                    out = ltx2k.apply_ltx2_split_rotary_emb(
                        x, cos, sin, variant=variant, launch=launch
                    )
                    if not torch.equal(out, want_r):
                        wrong.append(("rope", variant, launch, rs.label, rep))
                except Exception as e:
                    errors.append(repr(e))
                with lock:
                    calls[0] += 1
            for variant, launch in ADA_CALLS:
                try:
                    outs = ltx2k.ltx2_ada_values9(table, ts, variant=variant, launch=launch)
                    if not all(torch.equal(a, b) for a, b in zip(outs, want_a)):
                        wrong.append(("ada", variant, launch, ads.label, rep))
                except Exception as e:
                    errors.append(repr(e))
                with lock:
                    calls[0] += 1


threads = [threading.Thread(target=work, args=(t,)) for t in range(THREADS)]
for th in threads:
    th.start()
for th in threads:
    th.join()
torch.cuda.synchronize()
hits = sum(s.stats()[1] for m in (rope, adaln) for s in m._SITES.values())
print(f"calls={calls[0]} exceptions={len(errors)} wrong={len(wrong)} native_hits={hits}")
for line in (errors + [str(w) for w in wrong])[:10]:
    print(line)
"""


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_gpu_threads_every_launch_path_new_layouts():
    done = subprocess.run(
        [sys.executable, "-c", _GPU_SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stderr[-4000:]
    summary = done.stdout.splitlines()[0]
    fields = dict(kv.split("=") for kv in summary.split())
    assert int(fields["calls"]) >= 1600, summary
    assert fields["exceptions"] == "0" and fields["wrong"] == "0", done.stdout[-4000:]
    assert int(fields["native_hits"]) > 0, summary  # the replays did run
