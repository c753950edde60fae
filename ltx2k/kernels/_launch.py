"""A lean launch path for ``@triton.jit`` kernels: after the first call, skip the JIT dispatcher.

``kernel[grid](*args)`` costs ~14 us of host time per call on the H200 host
even for an empty kernel. Most of it is Python in ``JITFunction.run`` that
redoes, on every call, work whose answer only changes when the arguments'
specialization does: binding arguments to parameters, specializing each one
(dtype, 16-byte alignment, int == 1 / divisible by 16 / i32 or i64), hashing
that into a cache key, reading runtime knobs and building launch metadata;
then the C launcher calls ``cuPointerGetAttribute`` once per tensor.

:func:`launch` makes the first call of each specialization through that
normal path, keeps the ``CompiledKernel`` it returns, and sends later calls
with the same key straight to the compiled kernel's C launcher, passing raw
device pointers (the launcher accepts ints as pointers and then skips the
``cuPointerGetAttribute`` check; the launchers validated the tensors already).

The key is exact by construction, not by copying Triton's rules:

- scalars by value (every int specialization is a function of the value);
- tensors by dtype and ``data_ptr() % 128`` (Triton 3.6 specializes pointers
  on 16-byte alignment; a finer key never reuses a kernel compiled for another);
- constexprs by name and value, ``num_warps``, the device, and the two knobs
  that enter Triton's own options (``debug``, ``instrumentation_mode``).

The normal ``kernel[grid]`` path is taken, every time, under ``torch.compile``
(dynamo must see ``kernel[grid]`` to trace a user Triton kernel), for anything
that is not a ``JITFunction`` (the CPU interpreter's ``InterpretedFunction``, a
test's launch recorder), with launch hooks (a profiler's) or pre-run hooks installed,
for tensors on a device other than the current one, and for non-int scalars.
The fast path is built only for Triton versions whose launch protocol was read
and checked (``VERIFIED_TRITON``: triton/runtime/jit.py ``JITFunction.run``,
backends/nvidia/driver.py ``CudaLauncher`` and ``make_launcher``); on any other
version, or if building or using it fails with a protocol error, it warns once
and stays off for the process, so it can be slower but never wrong.

Not checked on the fast path (the normal path checks it every call): that the
kernel's referenced globals have not changed since compilation. Our kernels
reference none.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Iterable, Mapping
from typing import Any

import torch
import triton

try:
    from triton.runtime.jit import JITFunction
except ImportError:  # a Triton without it: every launch takes the normal path
    JITFunction = None

# Triton (major, minor) versions whose JITFunction.run / CudaLauncher protocol this module
# and the native call path mirror, and the tests pass on. pyproject.toml declares the same
# range (tests/test_native_failsafe.py checks that they agree).
VERIFIED_TRITON = frozenset({(3, 6)})
# Finer than Triton's 16-byte pointer specialization; see the module docstring.
ALIGN_KEY = 128
# Keys hold exact scalar values, so a process sweeping many shapes adds one entry
# per shape; past this many the cache of that kernel starts over (a miss costs one
# normal launch, never a recompile: Triton's own cache still holds the binary).
MAX_ENTRIES = 4096


class _Fast:
    """What the fast path needs from Triton, resolved once; ``None`` fields until built."""

    off_reason: str | None = None  # set: the fast path is off for this process
    built = False
    knobs: Any = None
    get_device: Any = None
    get_stream: Any = None


_FAST = _Fast()
# Serialises every lazily set field of this module and of ltx2k.kernels._native (the
# fast path's Triton pieces, the off switches and their warnings, the native build):
# a serving process calls from a thread per request stream, and a reader must never
# see a state half set (``built`` true with ``knobs`` still None). Readers on the hot
# path take no lock: each field they read is written once, before the flag that
# publishes it.
LOCK = threading.RLock()
# id(kernel) -> (kernel, {key: launch entry, or None for "always the normal path"}).
# By id: JITFunction.__hash__ goes through a property each call. Holding the
# kernel keeps its id from being reused.
_CACHES: dict[int, tuple[Any, dict[tuple, tuple | None]]] = {}


def warn_off(state, path: str, fallback: str, reason: str, stacklevel: int) -> None:
    """Turn a launch path off for this process (``state.off_reason``), warning once:
    slower from here on, never wrong, and the user is told why."""
    with LOCK:
        if state.off_reason is not None:
            return
        state.off_reason = reason
    warnings.warn(
        f"ltx2k {path} off for this process, using {fallback}: {reason}",
        RuntimeWarning,
        stacklevel=stacklevel + 1,
    )


def _turn_off(reason: str) -> None:
    warn_off(_FAST, "lean launch path", "kernel[grid]", reason, stacklevel=2)


def triton_version() -> tuple[int, int] | None:
    """(major, minor) of the installed Triton; None if its version string does not parse."""
    try:
        return tuple(int(p) for p in triton.__version__.split(".")[:2])
    except ValueError:
        return None


class _VersionWarning:
    warned = False


_VERSION_WARNING = _VersionWarning()


def unsupported_triton() -> str | None:
    """Why this Triton may not take the lean or native launch paths (None: it may).

    Both paths ask; the first to ask on an unverified Triton warns, once per process, for
    both: the kernels still run, through ``kernel[grid]``, with more host time per call."""
    if triton_version() in VERIFIED_TRITON:
        return None
    tested = ", ".join(f"{major}.{minor}" for major, minor in sorted(VERIFIED_TRITON))
    reason = (
        f"Triton {triton.__version__} is not a version whose launch protocol was verified "
        f"(tested: {tested})"
    )
    with LOCK:
        first = not _VERSION_WARNING.warned
        _VERSION_WARNING.warned = True
    if first:
        warnings.warn(
            f"ltx2k: {reason}; the lean and native launch paths are off for this process and "
            "every kernel launches through kernel[grid] (correct results, slower host path)",
            RuntimeWarning,
            stacklevel=3,
        )
    return reason


def _build() -> bool:
    """Resolve Triton's runtime pieces once; False (and a warning) if they are not as verified.

    Under :data:`LOCK`, and ``built`` is set last: a thread that sees it set (and no
    ``off_reason``) sees every field it publishes."""
    with LOCK:
        if not _FAST.built:
            _build_locked()
            _FAST.built = True
        return _FAST.off_reason is None


def _build_locked() -> None:
    unsupported = unsupported_triton()
    if unsupported is not None:
        _FAST.off_reason = unsupported  # unsupported_triton warned, once for both paths
        return
    try:
        from triton import knobs
        from triton.runtime.driver import driver

        _FAST.get_device = driver.active.get_current_device
        _FAST.get_stream = driver.active.get_current_stream
        _FAST.knobs = knobs
    except (ImportError, AttributeError, RuntimeError) as e:
        _turn_off(f"Triton's runtime is not laid out as in {triton.__version__} ({e!r})")


def is_jit_function(kernel: object) -> bool:
    """True for a real ``@triton.jit`` kernel (not the interpreter's, not a wrapper)."""
    return JITFunction is not None and type(kernel) is JITFunction


def _hooked(hook) -> bool:
    """A launch hook is installed (a profiler's). Triton 3.6 keeps an empty HookChain there
    otherwise (and the normal path builds launch metadata and calls it twice per launch)."""
    if hook is None:
        return False
    calls = getattr(hook, "calls", None)
    return calls is None or len(calls) > 0


def _params_match(kernel, n_runtime: int, constexprs: tuple[tuple[str, Any], ...]) -> bool:
    # The fast path passes (tensors, scalars, constexpr values) positionally in
    # signature order, as JITFunction.run passes bound_args.values(); that is
    # only right if the kernel's parameters are laid out exactly so.
    params = kernel.params
    return (
        len(params) == n_runtime + len(constexprs)
        and not any(p.is_constexpr for p in params[:n_runtime])
        and all(p.is_constexpr for p in params[n_runtime:])
        and [p.name for p in params[n_runtime:]] == [name for name, _ in constexprs]
    )


def _entry(compiled, constexprs) -> tuple | None:
    """(C launch, function, packed metadata, cooperative, pdl, constexpr values), or None."""
    if hasattr(compiled, "result"):  # async compile mode hands back a future
        compiled = compiled.result()
    launcher = compiled.run  # CudaLauncher; loads the module if not loaded yet
    if launcher.global_scratch_size or launcher.profile_scratch_size:
        return None  # needs per-launch scratch allocation: leave it to the normal path
    return (
        launcher.launch,
        compiled.function,
        compiled.packed_metadata,
        launcher.launch_cooperative_grid,
        launcher.launch_pdl,
        tuple(value for _, value in constexprs),
    )


def _normal(kernel, grid, tensors, scalars, constexprs, num_warps, launch_pdl=False):
    if launch_pdl:  # a launch option: part of the binary's key in Triton's cache
        return kernel[grid](
            *tensors, *scalars, **dict(constexprs), num_warps=num_warps, launch_pdl=True
        )
    return kernel[grid](*tensors, *scalars, **dict(constexprs), num_warps=num_warps)


def launch(
    kernel,
    grid: tuple[int, ...],
    tensors: tuple[torch.Tensor, ...],
    scalars: tuple[int, ...],
    constexprs: tuple[tuple[str, Any], ...],
    num_warps: int,
    launch_pdl: bool = False,
) -> None:
    """``kernel[grid](*tensors, *scalars, **dict(constexprs), num_warps=num_warps)``, leanly
    (with ``launch_pdl=True``: launched with programmatic dependent launch).

    The kernel's parameters must be the tensors, then the scalars, then the
    constexprs, named and ordered as in ``constexprs`` (``(name, value)``
    pairs: a tuple, so the key needs no per-call conversion). ``grid`` has 1 to
    3 positive sizes. All tensors must be on one device (the callers'
    validation guarantees it; only the first is compared with the current one).
    """
    # built before off_reason: built is published last, so once it reads true the
    # off switch and the fields below it are all set (see LOCK).
    if (
        torch.compiler.is_compiling()
        or not is_jit_function(kernel)
        or (not _FAST.built and not _build())
        or _FAST.off_reason is not None
    ):
        _normal(kernel, grid, tensors, scalars, constexprs, num_warps, launch_pdl)
        return
    knobs = _FAST.knobs
    rt = knobs.runtime
    device = _FAST.get_device()
    if (
        _hooked(rt.launch_enter_hook)
        or _hooked(rt.launch_exit_hook)
        or kernel.pre_run_hooks
        or tensors[0].get_device() != device
    ):
        _normal(kernel, grid, tensors, scalars, constexprs, num_warps, launch_pdl)
        return
    # One pass over the tensors: generator expressions per field cost ~3x more
    # on the host (measured), and this is the whole per-call overhead budget.
    ptrs = []
    key = [
        device,
        scalars,
        constexprs,
        num_warps,
        launch_pdl,
        rt.debug,
        knobs.compilation.instrumentation_mode,
    ]
    for t in tensors:
        ptr = t.data_ptr()
        ptrs.append(ptr)
        key.append(t.dtype)
        key.append(ptr % ALIGN_KEY)
    key = tuple(key)
    held = _CACHES.get(id(kernel))
    if held is None:  # setdefault: two threads' first calls share one cache
        held = _CACHES.setdefault(id(kernel), (kernel, {}))
    cache = held[1]
    entry = cache.get(key, False)
    if entry is False:  # first call with this key: the normal path compiles or finds it
        compiled = _normal(kernel, grid, tensors, scalars, constexprs, num_warps, launch_pdl)
        if len(cache) >= MAX_ENTRIES:
            cache.clear()
        if not all(type(s) is int for s in scalars):
            return  # not cached: a bool/float key could equal an int's
        if not _params_match(kernel, len(tensors) + len(scalars), constexprs):
            _turn_off(f"{kernel} parameters are not (tensors, scalars, constexprs) as called")
            return
        try:
            cache[key] = _entry(compiled, constexprs)
        except AttributeError as e:
            _turn_off(f"the compiled kernel does not expose the verified launcher ({e!r})")
        return
    if entry is None:
        _normal(kernel, grid, tensors, scalars, constexprs, num_warps, launch_pdl)
        return
    c_launch, function, packed_metadata, cooperative, pdl, constexpr_values = entry
    try:
        # The argument order of CudaLauncher.__call__ -> mod.launch in Triton 3.6:
        # grid, stream, function, cooperative, pdl, global/profile scratch,
        # packed metadata, launch metadata, enter/exit hooks, then every
        # parameter (constexprs too; the launcher parses and ignores them).
        c_launch(
            grid[0],
            grid[1] if len(grid) > 1 else 1,
            grid[2] if len(grid) > 2 else 1,
            _FAST.get_stream(device),
            function,
            cooperative,
            pdl,
            None,
            None,
            packed_metadata,
            None,
            None,
            None,
            *ptrs,
            *scalars,
            *constexpr_values,
        )
    except (TypeError, SystemError) as e:
        # Argument parsing fails before the launch, so nothing ran twice.
        _turn_off(f"the compiled kernel's launcher rejected the call ({e!r})")
        _normal(kernel, grid, tensors, scalars, constexprs, num_warps, launch_pdl)


# --- which host path a call takes (the public functions' ``launch=``) -------------------

# "triton": kernel[grid]; "lean": launch() above; "native": the whole call replayed by
# one C function (ltx2k.kernels._native); "auto": the fastest path the variant has.
LAUNCHES = ("auto", "triton", "lean", "native")


def call_table(
    algorithms: Iterable[str], fast: Iterable[str], legacy: Mapping[str, tuple[str, str]]
) -> dict[tuple[str, str], tuple[str, str]]:
    """Every accepted ``(variant, launch)`` -> ``(algorithm, launch path)``.

    *fast* are the algorithms the lean and native paths can launch; the others
    launch through ``kernel[grid]`` only. *legacy* maps names that once named
    an (algorithm, launch path) pair in one string, so old call sites keep
    working. Built once per kernel module: a call pays one dict lookup.
    """
    fast = set(fast)
    table: dict[tuple[str, str], tuple[str, str]] = {}
    for algo in algorithms:
        paths = ("triton", "lean", "native") if algo in fast else ("triton",)
        table[(algo, "auto")] = (algo, paths[-1])
        for path in paths:
            table[(algo, path)] = (algo, path)
    for name, pair in legacy.items():
        table[(name, "auto")] = pair
        table[(name, pair[1])] = pair
    return table


def bad_call(
    variant: object, launch: object, table: Mapping[tuple[str, str], tuple[str, str]]
) -> ValueError:
    """The error for a ``(variant, launch)`` that *table* does not accept, naming what is."""
    variants = sorted({v for v, _ in table})
    if variant not in variants:
        return ValueError(f"variant must be one of {variants}, got {variant!r}")
    if launch not in LAUNCHES:
        return ValueError(f"launch must be one of {list(LAUNCHES)}, got {launch!r}")
    ok = [path for (v, path) in table if v == variant]
    return ValueError(f"launch={launch!r} is not available for variant={variant!r}; it takes {ok}")


def resolve(
    table: Mapping[tuple[str, str], tuple[str, str]], variant: object, launch: object
) -> tuple[str, str]:
    """(algorithm, launch path) of a ``(variant, launch)`` that *table* accepts; the
    :func:`bad_call` ValueError otherwise. (Public functions inline the same lookup: it is
    their hot path.)"""
    try:  # inline: this is the hot path (a try costs nothing until it raises)
        call = table.get((variant, launch))
    except TypeError:  # an unhashable variant or launch: named below
        call = None
    if call is None:
        raise bad_call(variant, launch, table)
    return call


def other_device(tensors) -> int | None:
    """The CUDA device of *tensors* where it is not the current one, else None. Triton
    launches on the current device and its stream; PyTorch's own ops follow their
    inputs' device, so a launch for tensors on another GPU must make that one current."""
    device = tensors[0].device
    if device.type != "cuda" or device.index is None:
        return None
    # The C call under torch.cuda.current_device: CUDA is initialized where a CUDA tensor is.
    return device.index if device.index != _current_device() else None


_current_device = getattr(torch._C, "_cuda_getDevice", None) or torch.cuda.current_device


def launch_by(
    path: str,
    kernel,
    grid: tuple[int, ...],
    tensors: tuple[torch.Tensor, ...],
    scalars: tuple[int, ...],
    constexprs: tuple[tuple[str, Any], ...],
    num_warps: int,
    launch_pdl: bool = False,
    *,
    site=None,
    inputs: tuple[torch.Tensor, ...] = (),
    out: torch.Tensor | tuple[torch.Tensor, ...] | None = None,
) -> None:
    """One launch by the host path a call chose: ``"triton"`` through Triton's JIT
    dispatcher (``kernel[grid]``) every time; ``"native"`` with a ``site`` through
    :meth:`ltx2k.kernels._native.Site.launch_and_record`, which records it for the site's
    replay (``inputs`` and ``out`` as that method takes them); anything else, and
    ``"native"`` without a site, through :func:`launch`. The site is passed in rather
    than looked up because each kernel keys its memos its own way."""
    args = (path, kernel, grid, tensors, scalars, constexprs, num_warps, launch_pdl)
    other = other_device(tensors)
    if other is None:
        return _launch_by(*args, site, inputs, out)
    with torch.cuda.device(other):
        return _launch_by(*args, site, inputs, out)


def _launch_by(path, kernel, grid, tensors, scalars, constexprs, num_warps, launch_pdl,
               site, inputs, out) -> None:  # fmt: skip
    if path == "triton":
        _normal(kernel, grid, tensors, scalars, constexprs, num_warps, launch_pdl)
    elif path == "native" and site is not None:
        site.launch_and_record(
            kernel,
            grid,
            inputs,
            out,
            tensors,
            scalars,
            constexprs,
            num_warps,
            launch_pdl=launch_pdl,
        )
    else:
        launch(kernel, grid, tensors, scalars, constexprs, num_warps, launch_pdl)
