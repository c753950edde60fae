"""The native call path: one C function per call, replaying a launch the Python path made.

Why: on the H200 runners a single Python-level call into torch costs ~7-9 us
(``torch.empty``, ``torch.add``), so a launcher written in Python -- validate,
allocate, launch, even through the lean path of :mod:`ltx2k.kernels._launch` --
cannot get under ~25 us per call, while eager PyTorch pays one C++ dispatch, and
host latency at or below eager's is the goal. What no existing tool does:
Triton's own launcher and PyTorch's ``_StaticCudaLauncher`` are both called
from Python per launch, after Python has validated and allocated.

How (``_native.cpp`` has the details): a :class:`Site` is one public function.
Its Python path validates, allocates, launches through Triton's normal
``kernel[grid]`` and then :meth:`Site.record` stores the launch, keyed by every
input tensor's sizes, strides, dtype, device and ``data_ptr() % 128``. The
Python path's decisions (the validation verdict, output shapes, grid, scalars)
are functions of exactly that key, so a later ``site.call(*inputs)`` with the
same key replays them in C++: allocate the output (or each of a site's several
outputs, separately) with ``at::empty``, fill the kernel's parameters,
``cuLaunchKernel`` on the current stream. Which binary to
launch is Triton's decision: the replay checks that Triton's in-memory cache
still holds the recorded ``CompiledKernel`` under the cache key Triton computed
for the recorded launch, with the same launch-time options. Anything else -- a
miss, another current device, a profiler's launch hook, a recompiled kernel --
returns ``None``, and the caller takes its Python path.

Never taking the caller's process down: the launchers call :func:`plain2` /
:func:`plain3` before ``Site.call`` (a few attribute reads: tensor subclasses such
as FakeTensor, meta tensors and functorch transforms -- vmap, grad, jvp -- go
straight to the Python path); the C++ side refuses every other tensor it cannot
read directly (functorch wrappers outside a transform, functionalization,
dispatch and function modes, no storage, nested or symbolic sizes), and every C++
entry point turns any C++ exception into a miss (``call``, ``probe``) or a Python
exception. The Python path then behaves exactly as the non-native variants do.

The module is built at first use with ``torch.utils.cpp_extension.load``
(a C++ compiler and ninja; ~1 min once, cached per source hash, torch and
Python version). It is never built in the CPU interpreter (there are no
launches to replay) nor on a Triton whose launch protocol was not verified
(one warning, from :func:`ltx2k.kernels._launch.unsupported_triton`); if the
build fails it warns once and :meth:`Site.call` returns ``None`` for the rest
of the process: slower, never wrong.

``Site.call`` must not be reached while ``torch.compile`` traces (dynamo has to see
``kernel[grid]``): the launchers check ``torch.compiler.is_compiling()`` before it, and
``Site.launch_and_record`` launches plainly while tracing.
"""

from __future__ import annotations

import functools
import hashlib
import os
import sys
import weakref
from pathlib import Path
from typing import Any

import torch

from ltx2k.kernels import _checks, _launch

SOURCE = Path(__file__).with_name("_native.cpp")
# Argument kinds of the recorded parameter list (ArgKind in _native.cpp): (ARG_INPUT, i)
# is inputs[i], (ARG_OUTPUT, j) the site's output j, the scalars carry their value.
ARG_INPUT, ARG_OUTPUT, ARG_I32, ARG_I64 = 0, 1, 2, 3
# The most outputs one site returns (kMaxOutputs in _native.cpp).
MAX_OUTPUTS = 4
# Triton signature types of scalars this path passes, and how.
_SCALAR_KINDS = {"i32": ARG_I32, "i64": ARG_I64}

_Tensor = torch.Tensor
# Eager forward-mode AD (torch.autograd.forward_ad.dual_level) sets this module's level to
# >= 0; a dual tensor is otherwise a plain Tensor, and a replay would drop its tangent.
_forward_ad = torch.autograd.forward_ad
try:  # the functorch interpreter stack: not None inside vmap, grad, jvp, functionalize
    _functorch_level = torch._C._functorch.peek_interpreter_stack
except AttributeError:  # a torch without it: the C++ side's functorch TLS check still refuses

    def _functorch_level() -> None:
        return None


# The input types the replay takes: plain tensors, and nn.Parameter, which only marks a
# module's tensors (no __torch_function__ or __torch_dispatch__ of its own), so a block's
# weights called under no_grad or inference_mode are plain inference. The C++ side
# (plain_type) accepts the same two types exactly; any other subclass is declined.
PLAIN_TYPES = frozenset((torch.Tensor, torch.nn.Parameter))


def plain2(a, b) -> bool:
    """Whether a two-input call may try the replay: both plain tensors or Parameters
    (:data:`PLAIN_TYPES`; not a subclass such as FakeTensor or DTensor), not on the meta
    device, and no functorch transform active. Cheap on purpose (~4 attribute reads); the
    C++ side re-checks everything it relies on, and refuses grad-requiring (under grad
    mode) and forward-AD dual tensors itself. Only the first input's device is read: a call
    whose inputs are on different devices fails the Python path's validation, and the C++
    side refuses meta tensors before reading any data."""
    return (
        type(a) in PLAIN_TYPES
        and type(b) in PLAIN_TYPES
        and not a.is_meta
        and _functorch_level() is None
    )


def plain3(a, b, c) -> bool:
    """:func:`plain2` for three inputs."""
    return (
        type(a) in PLAIN_TYPES
        and type(b) in PLAIN_TYPES
        and type(c) in PLAIN_TYPES
        and not a.is_meta
        and _functorch_level() is None
    )


def _plain_all(tensors) -> bool:
    """:func:`plain2` for any number of tensors, every device read (the slow path's check)."""
    return _functorch_level() is None and all(
        type(t) in PLAIN_TYPES and not t.is_meta for t in tensors
    )


class _State:
    module: Any = None
    tried = False
    off_reason: str | None = None


_STATE = _State()


def _turn_off(reason: str) -> None:
    _launch.warn_off(_STATE, "native call path", "the Python launchers", reason, stacklevel=3)


def build_name() -> str:
    """The extension's name: a hash of the source and of the ABI it is built against."""
    h = hashlib.sha256(SOURCE.read_bytes())
    h.update(f"{torch.__version__}|{sys.version}|{sys.platform}".encode())
    return f"ltx2k_native_{h.hexdigest()[:16]}"


def build_dir(name: str) -> Path:
    root = os.environ.get("LTX2K_NATIVE_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "ltx2k", "native"
    )
    return Path(root) / name


def _load_built(name: str, path: Path):
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build(verbose: bool = False):
    """Build (or load the cached build of) the extension module; raises on failure."""
    name = build_name()
    where = build_dir(name)
    where.mkdir(parents=True, exist_ok=True)
    built = where / f"{name}.so"
    if built.is_file():
        # The name hashes the source, torch and Python, so a built module is the right
        # one: load it directly. cpp_extension.load would run ninja and the compiler
        # checks again (subprocesses) in every process that takes the native path, and
        # importing cpp_extension (it imports setuptools) alone is a third of a second
        # per process (docs/measurement.md, "Suite cost").
        module = _load_built(name, built)
    else:
        from torch.utils import cpp_extension

        try:  # the ninja wheel's binary, where the venv's bin is not on PATH
            import ninja

            if ninja.BIN_DIR not in os.environ.get("PATH", "").split(os.pathsep):
                os.environ["PATH"] = ninja.BIN_DIR + os.pathsep + os.environ.get("PATH", "")
        except ImportError:
            pass  # a system ninja, or the build fails and says so
        # Long work shows progress: a first build takes ~1 min on a 2-core machine.
        print(f"ltx2k: building the native call path ({name}, once) in {where}", file=sys.stderr)
        module = cpp_extension.load(
            name=name,
            sources=[str(SOURCE)],
            extra_cflags=["-O2"],
            extra_ldflags=["-ldl"],
            build_directory=str(where),
            verbose=verbose,
        )
    from triton import knobs

    module.configure(knobs.runtime, knobs.compilation)
    return module


def available_reason() -> str | None:
    """Why this process cannot use native launches (None: it can, or has not decided yet)."""
    if _checks.INTERPRET:
        return "the CPU interpreter has no launches to replay"
    if not torch.cuda.is_available():
        return "no CUDA device"
    return None


def module():
    """The built module, or None (with one warning saying why) where it cannot be used.

    The first callers wait for the build under ``_launch.LOCK``; ``tried`` is set only once
    the answer is: a thread that saw it set while ``module`` was still None would unbind
    its site from the native path for good."""
    if not _STATE.tried:
        with _launch.LOCK:
            if not _STATE.tried:
                _decide()
                _STATE.tried = True
    return _STATE.module


def _decide() -> None:
    if available_reason() is not None:
        return  # silent: there is nothing to launch anyway
    unsupported = _launch.unsupported_triton()  # warns once, for both launch paths
    if unsupported is not None:
        _STATE.off_reason = unsupported
        return
    try:
        mod = build()
        reason = mod.driver_error() or None
    except Exception as e:  # no compiler, no ninja, a failed build: all mean "off"
        reason = f"building {SOURCE.name} failed ({type(e).__name__}: {e})"
    if reason is None:
        _STATE.module = mod
    else:
        _turn_off(reason)


def _stop_replays(reason: str) -> None:
    """Turn the native path off for the rest of the process (one warning): every site's
    ``call`` answers None from now on, so no existing entry is replayed either."""
    _turn_off(reason)
    _STATE.module = None
    for site in list(_ALL_SITES):
        site.call = _no_entry


def _current_device() -> int:
    return torch.cuda.current_device()


def _no_entry(*inputs) -> None:
    return None


# Every Site, so that _stop_replays can unbind them all.
_ALL_SITES: weakref.WeakSet = weakref.WeakSet()


class Site:
    """One public function's memo of launches.

    ``call(*inputs)`` returns what the Python path returns for these inputs, or
    ``None`` (a miss: the caller takes its Python path). With one output (the
    default) that is the output tensor, or with ``unbind=True`` the tuple of its
    ``unbind(0)`` views; with ``n_outputs > 1``, a tuple of ``n_outputs`` tensors,
    each its own allocation, in the order :meth:`launch_and_record` got them.

    ``call`` is a C function once the module is built (``functools.partial``
    adds no Python frame); until then, and where the module is unavailable, a
    Python function that returns ``None``. Callers check :func:`plain2` /
    :func:`plain3` first.
    """

    def __init__(self, name: str, n_inputs: int, unbind: bool = False, n_outputs: int = 1):
        if not 1 <= n_outputs <= MAX_OUTPUTS:
            raise ValueError(
                f"site {name}: n_outputs must be in [1, {MAX_OUTPUTS}], got {n_outputs}"
            )
        if unbind and n_outputs > 1:
            raise ValueError(
                f"site {name}: unbind=True returns one output's unbind(0) views; "
                f"it cannot be combined with n_outputs={n_outputs}"
            )
        self.name = name
        self.n_inputs = n_inputs
        self.unbind = unbind
        self.n_outputs = n_outputs
        self.id: int | None = None
        self.call = self._first_call
        _ALL_SITES.add(self)

    def _bind(self) -> bool:
        mod = module()
        if mod is None:
            self.call = _no_entry
            return False
        if self.id is None:
            with _launch.LOCK:  # one C++ site per Site, whichever thread binds first
                if self.id is None:
                    self.id = (
                        mod.new_site(self.name, self.n_inputs, self.unbind)
                        if self.n_outputs == 1
                        else mod.new_site(self.name, self.n_inputs, self.unbind, self.n_outputs)
                    )
        self.call = functools.partial(mod.call, self.id)
        return True

    def _first_call(self, *inputs):
        return self.call(*inputs) if self._bind() else None

    def stats(self) -> tuple[int, int, int]:
        """(entries, hits, misses) so far; zeros before the first call."""
        if self.id is None or _STATE.module is None:
            return (0, 0, 0)
        return _STATE.module.stats(self.id)

    def probe(self, *inputs) -> bool:
        """Whether ``call`` would replay these inputs, given a CUDA driver (no launch)."""
        return self.id is not None and _STATE.module.probe(self.id, *inputs)

    def last_error(self) -> str | None:
        """The last C++ exception or failed launch that ``call`` turned into a miss."""
        if self.id is None or _STATE.module is None:
            return None
        return _STATE.module.last_error(self.id)

    def clear(self) -> None:
        if self.id is not None and _STATE.module is not None:
            _STATE.module.clear(self.id)

    def launch_and_record(
        self,
        kernel,
        grid: tuple[int, ...],
        inputs: tuple[torch.Tensor, ...],
        out: torch.Tensor | tuple[torch.Tensor, ...],
        tensors: tuple[torch.Tensor, ...],
        scalars: tuple[int, ...],
        constexprs: tuple[tuple[str, Any], ...],
        num_warps: int,
        launch_pdl: bool = False,
    ) -> None:
        """Launch as ``_launch.launch`` would; where the module is built, through Triton's
        normal path, and record the launch so that the next call with these inputs' key
        is replayed by ``call``. ``out`` is the output tensor, or with ``n_outputs > 1`` a
        tuple of that many separately allocated tensors (``call`` returns them in this
        order). ``tensors`` are the kernel's tensor arguments in its parameter order, each
        one of ``inputs`` or of the outputs (by identity). While ``torch.compile`` traces,
        a plain launch: dynamo must see ``kernel[grid]``, and nothing is recorded.

        Raises ``TypeError``/``ValueError`` (before launching) if ``out`` is not the site's
        number of outputs."""
        outs = (out,) if self.n_outputs == 1 and isinstance(out, _Tensor) else self._outputs(out)
        if torch.compiler.is_compiling():
            _launch.launch(kernel, grid, tensors, scalars, constexprs, num_warps, launch_pdl)
            return
        if self.id is None:
            self._bind()
        mod = _STATE.module
        if mod is None or self.id is None or not _launch.is_jit_function(kernel):
            _launch.launch(kernel, grid, tensors, scalars, constexprs, num_warps, launch_pdl)
            return
        compiled = _launch._normal(
            kernel, grid, tensors, scalars, constexprs, num_warps, launch_pdl
        )
        if not _plain_all((*inputs, *outs)):
            return  # launched as the other variants launch; nothing the replay could repeat
        try:
            self._record(mod, kernel, compiled, grid, inputs, out, tensors, scalars, constexprs)
        except Exception as e:  # a protocol this code does not know: the launch itself is done
            _stop_replays(f"recording a launch failed ({type(e).__name__}: {e})")

    def _outputs(self, out) -> tuple[torch.Tensor, ...]:
        """``out`` as a tuple of the site's outputs; raises if it is not ``n_outputs`` of them."""
        if self.n_outputs == 1:
            if isinstance(out, _Tensor):
                return (out,)
            raise TypeError(
                f"site {self.name} has one output: out must be a Tensor, got {type(out).__name__}"
            )
        if not isinstance(out, tuple):
            raise TypeError(
                f"site {self.name} has {self.n_outputs} outputs: out must be a tuple of "
                f"Tensors, got {type(out).__name__}"
            )
        if len(out) != self.n_outputs:
            raise ValueError(f"site {self.name} records {self.n_outputs} outputs, got {len(out)}")
        return out

    def _record(self, mod, kernel, compiled, grid, inputs, out, tensors, scalars, constexprs):
        if hasattr(compiled, "result"):  # async compile mode hands back a future
            compiled = compiled.result()
        spec = arg_spec(kernel, compiled, inputs, out, tensors, scalars, constexprs)
        if spec is None:
            return
        device = _current_device()
        cache_key = triton_cache_key(kernel, compiled, device)
        if cache_key is None:
            return
        from triton import knobs

        padded = tuple(grid) + (1,) * (3 - len(grid))
        mod.record(
            self.id,
            tuple(inputs),
            out,
            compiled.function,
            mod.current_context(),
            device,
            padded,
            32 * compiled.metadata.num_warps,
            compiled.metadata.shared,
            spec,
            (
                kernel,
                device,
                cache_key,
                compiled,
                # the options JITFunction.run folds into its cache key at each launch
                kernel.debug or knobs.runtime.debug,
                knobs.compilation.instrumentation_mode,
            ),
            # replayed with programmatic dependent launch, as the launcher launches it
            bool(compiled.run.launch_pdl),
        )


def triton_cache_key(kernel, compiled, device: int):
    """The key under which Triton's in-memory cache holds ``compiled`` for ``device``
    (Triton 3.6: ``kernel.device_caches[device][0]``, the dict ``JITFunction.run`` looks
    each launch up in), or None. Found by identity rather than recomputed, so it is
    Triton's own key whatever goes into it."""
    try:
        per_device = kernel.device_caches.get(device)  # .get: no binder made for a new device
        cache = per_device[0] if per_device is not None else None
    except (AttributeError, TypeError, IndexError, KeyError):
        return None
    if not isinstance(cache, dict):
        return None
    # A snapshot: another thread compiling a new layout inserts into this dict, and
    # iterating it live raises mid-way. dict.copy copies in C without running Python code
    # (list(items()) can: its allocations may start a garbage collection whose
    # finalizers let another thread run); a copy that still raises is taken again.
    for _ in range(8):
        try:
            snapshot = cache.copy()
            break
        except RuntimeError:
            continue
    else:
        return None
    return next((key for key, value in snapshot.items() if value is compiled), None)


def arg_spec(
    kernel, compiled, inputs, out, tensors, scalars, constexprs
) -> list[tuple[int, int]] | None:
    """The compiled kernel's parameters as (kind, value) pairs, or None if this path
    cannot pass them (the call then stays on the Python path; nothing is recorded).
    ``out`` is the output tensor or a tuple of the outputs: a pointer argument that is
    output ``j`` (by identity) is ``(ARG_OUTPUT, j)``.

    Triton 3.6's launcher passes every non-constexpr parameter of the compiled
    signature in order -- ints specialized to 1 are "constexpr" there and are
    not passed -- then two scratch pointers (null unless the kernel needs
    scratch, which is not recorded).
    """
    try:
        launcher = compiled.run  # loads the module, as the first launch did
        meta = compiled.metadata
        signature = dict(compiled.src.signature)
        if (
            launcher.global_scratch_size
            or launcher.profile_scratch_size
            or launcher.launch_cooperative_grid
            or meta.num_ctas != 1
        ):
            return None
    except AttributeError:
        return None
    outs = out if isinstance(out, tuple) else (out,)
    values = (*tensors, *scalars)
    if list(signature) != list(kernel.arg_names) or not _launch._params_match(
        kernel, len(values), constexprs
    ):
        return None
    spec = []
    # constexpr parameters follow the runtime ones (_params_match), so zip stops before them
    for name, value in zip(kernel.arg_names, values, strict=False):
        ty = signature[name]
        if ty == "constexpr":
            continue
        if ty.startswith("*"):
            index = next((j for j, t in enumerate(outs) if t is value), None)
            if index is not None:
                spec.append((ARG_OUTPUT, index))
                continue
            index = next((i for i, t in enumerate(inputs) if t is value), None)
            if index is None:
                return None
            spec.append((ARG_INPUT, index))
        elif ty in _SCALAR_KINDS and type(value) is int:
            spec.append((_SCALAR_KINDS[ty], value))
        else:
            return None
    return spec
