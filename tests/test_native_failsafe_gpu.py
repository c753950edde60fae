"""On a GPU: the default (native) variants under functorch transforms and fake/meta
tensors, each in a fresh process, so that an abort is a failed test, not a crashed run.

Each case runs SCRIPT twice in fresh subprocesses: once with the default algorithm on
the native launch path (after two plain calls, so that the C++ replay is live for that
layout) and once with the same algorithm launched by ``kernel[grid]``. Both must exit 0,
and the native path must end as the Triton one does: the same Python exception type,
or an equal result. The markers the script prints (``LTX2K_...``) say how far it got.

Run: python -m pytest -q -p no:cacheprovider --benchmark-disable -m gpu \
         tests/test_native_failsafe_gpu.py
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from ltx2k.workload import variants

ROOT = Path(__file__).resolve().parents[1]
gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

MODES = ["vmap", "grad", "jvp", "fake", "meta"]
# (public function, its default algorithm): each is run natively and through kernel[grid]
DEFAULTS = [(f, variants.DEFAULT_VARIANT[f]) for f in ("split_rope", "ada_values9")]

# argv: function algorithm launch mode out_path
SCRIPT = r"""
import sys
import torch

FUNCTION, VARIANT, LAUNCH, MODE, OUT = sys.argv[1:6]
print("LTX2K_START", FUNCTION, VARIANT, LAUNCH, MODE, flush=True)
import ltx2k
from ltx2k.kernels import _native, adaln, rope

torch.manual_seed(0)
if FUNCTION == "split_rope":
    B, S, H, D = 2, 16, 4, 64
    stacked = torch.randn(2, B, S, H * D, device="cuda").to(torch.bfloat16)
    cos = torch.randn(B, H, S, D // 2, device="cuda").to(torch.bfloat16)
    sin = torch.randn(B, H, S, D // 2, device="cuda").to(torch.bfloat16)
    # stacked[0] has the layout (and alignment) the vmapped argument shows the kernel
    args, index = (stacked[0], cos, sin), 0
    sites = rope._SITES

    def call(*a):
        return ltx2k.apply_ltx2_split_rotary_emb(*a, variant=VARIANT, launch=LAUNCH)

else:
    D = 256
    table = torch.randn(9, D, device="cuda").to(torch.bfloat16)
    stacked = torch.randn(2, 1, 3, 9 * D, device="cuda").to(torch.bfloat16)
    args, index = (table, stacked[0]), 1
    sites = adaln._SITES

    def call(*a):
        return ltx2k.ltx2_ada_values9(*a, variant=VARIANT, launch=LAUNCH)


def with_arg(a):
    return tuple(a if i == index else t for i, t in enumerate(args))


def flat(out):
    if isinstance(out, torch.Tensor):
        return [out]
    return [t for o in out for t in flat(o)]


def total(out):
    return sum(t.float().sum() for t in flat(out))


site = sites[VARIANT] if LAUNCH == "native" else None
if site is not None:
    call(*args)
    call(*args)  # recorded, then replayed: the C++ path is live for this layout
    on = _native.module() is not None
    print("LTX2K_NATIVE", "on" if on else "off", "stats", site.stats(), flush=True)


def run():
    arg = args[index]
    if MODE == "vmap":
        return torch.vmap(lambda a: call(*with_arg(a)))(stacked)
    if MODE == "grad":
        return torch.func.grad(lambda a: total(call(*with_arg(a))))(arg)
    if MODE == "jvp":
        return torch.func.jvp(lambda a: call(*with_arg(a)), (arg,), (torch.ones_like(arg),))
    if MODE == "fake":
        from torch._subclasses.fake_tensor import FakeTensorMode

        with FakeTensorMode() as mode:
            return call(*(mode.from_tensor(t) for t in args))
    if MODE == "meta":
        return call(*(t.to("meta") for t in args))
    raise SystemExit(f"unknown mode {MODE}")


try:
    out = run()
    torch.cuda.synchronize()
except Exception as e:
    print("LTX2K_OUTCOME exception", type(e).__name__, flush=True)
    print("LTX2K_MESSAGE", (str(e).splitlines() or [""])[0][:300], flush=True)
else:
    kept = [
        t.detach().cpu()
        if type(t) is torch.Tensor and not t.is_meta
        else (type(t).__name__, tuple(t.shape), str(t.dtype), str(t.device))
        for t in flat(out)
    ]
    torch.save(kept, OUT)
    print("LTX2K_OUTCOME result", len(kept), flush=True)

# the process is still healthy: a plain call works (and, for the default, replays)
call(*args)
torch.cuda.synchronize()
print("LTX2K_AFTER ok", site.stats() if site is not None else "", flush=True)
print("LTX2K_DONE", flush=True)
"""

# An unverified Triton: one warning, and every public function's default variant still
# returns the non-native variant's result.
VERSION_SCRIPT = r"""
import warnings
import torch
import triton

triton.__version__ = "3.99.0"  # before ltx2k decides anything
import ltx2k

print("LTX2K_START version", flush=True)
torch.manual_seed(0)
x = torch.randn(1, 64, 8 * 128, device="cuda").to(torch.bfloat16)
cos = torch.randn(1, 8, 64, 64, device="cuda").to(torch.bfloat16)
sin = torch.randn(1, 8, 64, 64, device="cuda").to(torch.bfloat16)
table = torch.randn(9, 512, device="cuda").to(torch.bfloat16)
ts = torch.randn(1, 4, 9 * 512, device="cuda").to(torch.bfloat16)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    for _ in range(3):
        got = ltx2k.apply_ltx2_split_rotary_emb(x, cos, sin)
        got9 = ltx2k.ltx2_ada_values9(table, ts)
want = ltx2k.apply_ltx2_split_rotary_emb(x, cos, sin, launch="triton")
want9 = ltx2k.ltx2_ada_values9(table, ts, launch="triton")
ours = [w for w in caught if "ltx2k" in str(w.message)]
print("LTX2K_WARNINGS", len(ours), flush=True)
for w in ours:
    print("LTX2K_WARNING", str(w.message)[:300], flush=True)
same = torch.equal(got, want) and all(torch.equal(a, b) for a, b in zip(got9, want9))
print("LTX2K_EQUAL", same, flush=True)
print("LTX2K_DONE", flush=True)
"""


def _run(script: str, *argv: str) -> tuple[subprocess.CompletedProcess, dict[str, str]]:
    proc = subprocess.run(
        [sys.executable, "-c", script, *argv],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    markers = {}
    for line in proc.stdout.splitlines():
        if line.startswith("LTX2K_"):
            name, _, rest = line.partition(" ")
            markers[name] = rest
    return proc, markers


def _explain(proc) -> str:
    return f"exit {proc.returncode}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr[-4000:]}"


def _load(path: Path):
    return torch.load(path, weights_only=False)


def _equal(a, b) -> bool:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.shape == b.shape and a.dtype == b.dtype and torch.equal(a, b)
    return a == b


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("function, algorithm", DEFAULTS, ids=[d[0] for d in DEFAULTS])
def test_gpu_default_variant_never_kills_the_process(function, algorithm, mode, tmp_path):
    got_proc, got = _run(SCRIPT, function, algorithm, "native", mode, str(tmp_path / "native.pt"))
    assert got_proc.returncode == 0 and "LTX2K_DONE" in got, _explain(got_proc)
    assert got.get("LTX2K_NATIVE", "").startswith("on"), _explain(got_proc)
    assert "LTX2K_AFTER" in got, _explain(got_proc)
    want_proc, want = _run(SCRIPT, function, algorithm, "triton", mode, str(tmp_path / "other.pt"))
    assert want_proc.returncode == 0 and "LTX2K_DONE" in want, _explain(want_proc)
    assert got["LTX2K_OUTCOME"].split()[:2] == want["LTX2K_OUTCOME"].split()[:2], (
        f"native: {got['LTX2K_OUTCOME']} ({got.get('LTX2K_MESSAGE', '')}); "
        f"triton: {want['LTX2K_OUTCOME']} ({want.get('LTX2K_MESSAGE', '')})"
    )
    if got["LTX2K_OUTCOME"].startswith("result"):
        a, b = _load(tmp_path / "native.pt"), _load(tmp_path / "other.pt")
        assert len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))


@gpu
@pytest.mark.gpu
def test_gpu_unverified_triton_warns_once_and_stays_correct():
    proc, markers = _run(VERSION_SCRIPT)
    assert proc.returncode == 0 and "LTX2K_DONE" in markers, _explain(proc)
    assert markers["LTX2K_WARNINGS"] == "1", _explain(proc)
    assert markers["LTX2K_EQUAL"] == "True", _explain(proc)


def test_scripts_compile():
    """Runs everywhere: the subprocess scripts are at least valid Python."""
    compile(SCRIPT, "<failsafe script>", "exec")
    compile(textwrap.dedent(VERSION_SCRIPT), "<version script>", "exec")
