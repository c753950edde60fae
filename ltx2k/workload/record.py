"""The shape recorder: which call signatures the public kernel functions see, and how often.

``with ltx2k.record_shapes("calls.json"):`` counts every distinct call signature of the
public kernel functions (each kernel of :data:`ltx2k.workload.cases.KERNELS`) made inside
it, from any thread, and merges the counts into the file at exit.
``LTX2K_RECORD_SHAPES=calls.json`` does the same for a whole process (written at
its exit), for a caller that cannot be edited, such as a serving process.
``ltx2k shapes add calls.json`` turns the file into suite shapes (docs/shapes.md).

A signature is the kernel and, per tensor argument, its shape, strides, dtype and
storage offset, and which earlier argument it is the very same tensor as (a
self-attention passes one cos/sin for q and k); the file adds what follows from them
(RoPE's cos/sin layout, each tensor's offset alignment). Cost: outside a recording, one
test of a global per call; inside, one C call (the native module's ``shape_count``) that
keys the tensors' metadata and updates one dictionary per recording. Where the native module
is not built (the CPU interpreter, no compiler) or a tensor is not plain (a tensor
subclass, a functorch wrapper), the key is built in Python. Recording never raises
into a kernel call: a call that cannot be recorded (while torch.compile traces,
symbolic shapes, a non-tensor argument) is skipped.

Several recordings, threads or processes may write one file: each merges its
counts into it under a file lock and replaces it in one rename, so no count is
lost and the file is never half-written. A path that cannot be written is an
error when the recording starts, not when it ends (for ``LTX2K_RECORD_SHAPES``, one line
on stderr when the kernels are first imported; the process runs on unrecorded).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import sys
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ltx2k.workload import cases

FORMAT = "ltx2k-shape-record/1"
ENV_VAR = "LTX2K_RECORD_SHAPES"
# The tensor arguments of each public function, in call order (KernelSpec.record_args).
ARGS: dict[str, tuple[str, ...]] = {name: spec.record_args for name, spec in cases.KERNELS.items()}
# Offset alignments are reported up to the widest vector access a kernel makes (bytes).
MAX_ALIGNMENT = 16

# The native key's first word (shape_count in ltx2k/kernels/_native.cpp).
KERNEL_IDS = {kernel: i for i, kernel in enumerate(ARGS)}

# The recordings calls go to; empty outside any (the one test a call pays then).
_ACTIVE: tuple[Recording, ...] = ()
_ACTIVE_LOCK = threading.Lock()
_is_compiling = None  # torch.compiler.is_compiling, bound when the first recording starts


def note(kernel: str, *args: object) -> None:
    """Count this call in every active recording: the public functions' first line."""
    if _ACTIVE:
        _count(kernel, args)


# The call context of a signature, as bits of the key's first word above the kernel id:
# the autograd mode and capture state of the call, then per tensor argument whether it is
# an nn.Parameter, requires grad, or is an inference tensor. What host latency depends on
# (docs/measurement.md, "Call contexts"), recorded so that `ltx2k shapes add` can time a
# shape in the context the model called it in.
CONTEXT_FLAGS = ("grad_mode", "inference_mode", "graph_capture", "compiling")
TENSOR_FLAGS = ("parameter", "requires_grad", "inference")
_KERNEL_BITS = 8
# Above the context: per tensor argument, 1 + the index of the earlier argument that is the
# very same tensor object (0: none). Identity, not equal metadata: a self-attention passes
# one cos/sin for q and k, and the kernel reads them once; two equal tensors are read twice.
_SAME_AS_BITS = 3  # up to 8 tensor arguments, as the native key holds


def _context_bits(args: tuple, compiling: bool) -> int:
    import torch

    if compiling:
        # A trace's fake tensors: whether a compiled graph is captured or runs under
        # inference mode is decided at its replay, not here.
        bits = torch.is_grad_enabled() | 1 << 3
    else:
        capturing = torch.cuda.is_initialized() and torch.cuda.is_current_stream_capturing()
        bits = torch.is_grad_enabled() | torch.is_inference_mode_enabled() << 1 | capturing << 2
    same_as = 0
    for i, t in enumerate(args):
        flags = (
            isinstance(t, torch.nn.Parameter),
            t.requires_grad,
            (not compiling) and t.is_inference(),
        )
        for j, flag in enumerate(flags):
            bits |= bool(flag) << (len(CONTEXT_FLAGS) + len(TENSOR_FLAGS) * i + j)
        for j in range(i):
            if args[j] is t:
                same_as |= (j + 1) << (_SAME_AS_BITS * i)
                break
    return bits | same_as << (len(CONTEXT_FLAGS) + len(TENSOR_FLAGS) * len(args))


def note_traced(kernel: str, *args: object) -> None:
    """Count a trace of the kernel's registered op (its fake implementation, run while
    torch.compile or torch.export traces the model): once per trace, with "compiling",
    since a compiled graph replays without entering Python.

    A trace's tensors are FakeTensors. An eager call on plain meta tensors reaches the fake
    implementation too, and its public function counted it already: it is not a trace."""
    if _ACTIVE and any(isinstance(t, _fake_tensor_type()) for t in args):
        _count(kernel, args, traced=True)


def _fake_tensor_type() -> type:
    from torch._subclasses.fake_tensor import FakeTensor

    return FakeTensor


def _count(kernel: str, args: tuple, traced: bool = False) -> None:
    try:
        # While dynamo traces the public function nothing is counted here: the op's fake
        # implementation counts the trace (note_traced), outside dynamo's bytecode.
        if not traced and _is_compiling():
            return
        compiling = traced
        head = KERNEL_IDS[kernel] | _context_bits(args, compiling) << _KERNEL_BITS
        counter = _COUNTER if _COUNTER.ready else _COUNTER.bind()
        if not compiling and counter.count is not None and counter.count(_ACTIVE, head, *args):
            return
        metas = tuple((tuple(t.shape), t.stride(), t.dtype, t.storage_offset()) for t in args)
        if compiling and not all(
            isinstance(d, int)
            for shape, stride, _, offset in metas
            for d in (*shape, *stride, offset)
        ):
            return  # symbolic sizes: reading them as numbers would specialize the trace
        key = (kernel, head >> _KERNEL_BITS, *metas)
        counter.add(_ACTIVE, key, 1)
    except Exception:  # symbolic shapes, a non-tensor argument: the call goes on unrecorded
        pass


def same_as_of(kernel: str, bits: int) -> dict[str, str]:
    """{argument: the earlier argument it was the very same tensor as} from a signature's bits."""
    names = ARGS[kernel]
    field = bits >> (len(CONTEXT_FLAGS) + len(TENSOR_FLAGS) * len(names))
    out = {}
    for i, name in enumerate(names):
        j = field >> (_SAME_AS_BITS * i) & ((1 << _SAME_AS_BITS) - 1)
        if j:
            out[name] = names[j - 1]
    return out


def context_of(kernel: str, bits: int) -> dict:
    """The ``context`` object of a signature from its context bits."""
    out: dict = {name: bool(bits >> i & 1) for i, name in enumerate(CONTEXT_FLAGS)}
    tensors = {}
    for i, arg in enumerate(ARGS[kernel]):
        base = len(CONTEXT_FLAGS) + len(TENSOR_FLAGS) * i
        tensors[arg] = {name: bool(bits >> (base + j) & 1) for j, name in enumerate(TENSOR_FLAGS)}
    out["tensors"] = tensors
    return out


class _Counter:
    """How counts are added: through the native module where it is built (one C call, atomic
    under the GIL), else in Python under each recording's lock. Chosen at the first counted
    call (the native module is built or loaded then anyway, for the launch itself), once
    per process, so one process never mixes the two."""

    def __init__(self):
        self.ready = False
        self.count = None  # native shape_count(recordings, kernel_id, *tensors) -> bool
        self.add = _python_add  # (recordings, key, n)
        self.dtype = None  # native scalar_type_dtype(code) -> torch.dtype

    def bind(self, module=None) -> _Counter:
        if module is None:
            from ltx2k.kernels import _native

            module = _native.module()
        if module is not None:
            self.count, self.add = module.shape_count, module.shape_add
            self.dtype = module.scalar_type_dtype
        self.ready = True
        return self


def _python_add(recordings: tuple, key: tuple, n: int) -> None:
    for recording in recordings:
        with recording._lock:
            recording._counts[key] = recording._counts.get(key, 0) + n


_COUNTER = _Counter()


def _decode(key: bytes | tuple) -> tuple:
    """(kernel, context bits, (shape, stride, dtype, storage offset) per tensor) of a counted
    key: the
    Python path's tuple, or the native path's int64 words (see shape_count in
    ltx2k/kernels/_native.cpp)."""
    if isinstance(key, tuple):
        return key
    words = memoryview(key).cast("q").tolist()
    head = words[0]
    kernel, i, metas = list(ARGS)[head & ((1 << _KERNEL_BITS) - 1)], 1, []
    while i < len(words):
        dim = words[i]
        shape, stride = words[i + 1 : i + 1 + dim], words[i + 1 + dim : i + 1 + 2 * dim]
        code, offset = words[i + 1 + 2 * dim], words[i + 2 + 2 * dim]
        metas.append((tuple(shape), tuple(stride), _COUNTER.dtype(code), offset))
        i += 3 + 2 * dim
    return (kernel, head >> _KERNEL_BITS, *metas)


class Recording:
    """Counts of call signatures bound for one file; :meth:`write` merges them into it."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self._lock = threading.Lock()
        # Replaced, never cleared in place: a count added while write() swaps it lands in
        # the dict write() takes or in the new one.
        self._counts: dict[bytes | tuple, int] = {}
        _check_writable(self.path)

    def forget(self) -> None:
        """Drop the counts so far (in a forked child: its parent writes them)."""
        self._lock = threading.Lock()  # the parent's may have been held at fork()
        self._counts = {}

    def write(self) -> None:
        """Merge the counts into the file (under its lock) and start again from none."""
        with self._lock:
            counts, self._counts = self._counts, {}
        if not counts:
            return
        try:
            ours = [_signature(_decode(key), n) for key, n in counts.items()]
            with _file_lock(self.path):
                merged = merge(read(self.path)["signatures"] if self.path.exists() else [], ours)
                _replace(self.path, {"format": FORMAT, "signatures": merged})
        except BaseException:
            for key, n in counts.items():  # not written: keep them for a later write
                _COUNTER.add((self,), key, n)
            raise


@contextlib.contextmanager
def record_shapes(path: str | os.PathLike) -> Iterator[Recording]:
    """Record the kernels' call signatures made inside the block to *path* (merged at exit).

    Raises ValueError at once when *path* cannot be written or holds something other than
    a recorder file.
    """
    recording = Recording(path)
    _start(recording)
    try:
        yield recording
    finally:
        _stop(recording)
        recording.write()


def _start(recording: Recording) -> None:
    global _ACTIVE, _is_compiling
    import torch

    _is_compiling = torch.compiler.is_compiling
    with _ACTIVE_LOCK:
        _ACTIVE = (*_ACTIVE, recording)


def _stop(recording: Recording) -> None:
    global _ACTIVE
    with _ACTIVE_LOCK:
        _ACTIVE = tuple(r for r in _ACTIVE if r is not recording)


def _check_writable(path: Path) -> None:
    where = f"shape record {str(path)!r}"
    if path.is_dir():
        raise ValueError(f"{where} is a directory; give a file path")
    if not path.parent.is_dir():
        raise ValueError(f"{where}: directory {str(path.parent)!r} does not exist")
    if path.exists():
        read(path)  # ValueError naming it: never overwrite something else
    try:
        with open(_lock_path(path), "a"):
            pass
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        os.close(fd)
        os.unlink(tmp)
    except OSError as e:
        raise ValueError(f"{where} cannot be written: {e.strerror or e}") from None


def _lock_path(path: Path) -> Path:
    return path.with_name(path.name + ".lock")


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    import fcntl

    with open(_lock_path(path), "a") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def _replace(path: Path, data: dict) -> None:
    from ltx2k.workload.shapes import replace_file

    replace_file(path, json.dumps(data, indent=1) + "\n")


# --- the file ------------------------------------------------------------------------


def _alignment(offset: int, itemsize: int) -> int:
    nbytes = offset * itemsize
    return MAX_ALIGNMENT if nbytes == 0 else min(MAX_ALIGNMENT, nbytes & -nbytes)


def cos_sin_layout(shape: list[int], stride: list[int]) -> str:
    """ "token_major" or "head_major" storage of a [B, H, S, D/2] cos/sin view."""
    _, H, S, _ = shape
    if H == 1 or S == 1:  # both orders are the same memory
        return "token_major"
    return "token_major" if stride[2] > stride[1] else "head_major"


def _signature(key: tuple, calls: int) -> dict:
    kernel, bits, *metas = key
    args = {}
    same_as = same_as_of(kernel, bits)
    for name, (shape, stride, dtype, offset) in zip(ARGS[kernel], metas, strict=True):
        args[name] = {
            "shape": list(shape),
            "stride": list(stride),
            "dtype": str(dtype).removeprefix("torch."),
            "storage_offset": offset,
            "offset_alignment": _alignment(offset, dtype.itemsize),
        }
        if name in same_as:
            args[name]["same_as"] = same_as[name]
    sig = {"kernel": kernel, "calls": calls, "args": args, "context": context_of(kernel, bits)}
    pairs = cos_sin_pairs(kernel)
    if pairs:
        sig["layout"] = rope_layout(args, *(name for pair in pairs for name in pair))
    return sig


def cos_sin_pairs(kernel: str) -> list[tuple[str, str]]:
    """The (cos, sin) arguments of a kernel that takes split RoPE's tables: ("cos", "sin"),
    or ("q_cos", "q_sin") and ("k_cos", "k_sin")."""
    names = ARGS[kernel]
    return [(n, n[:-3] + "sin") for n in names if n.endswith("cos") and n[:-3] + "sin" in names]


def rope_layout(args: dict, *names: str) -> str:
    """The layout of a signature's cos/sin args (*names*, by default "cos" and "sin"):
    "mixed" where they differ, "unknown" where one is not 4-D."""
    layouts = set()
    for name in names or ("cos", "sin"):
        a = args[name]
        if len(a["shape"]) != 4:
            return "unknown"
        layouts.add(cos_sin_layout(a["shape"], a["stride"]))
    return layouts.pop() if len(layouts) == 1 else "mixed"


def _identity(sig: dict) -> str:
    # A signature recorded before contexts were (no "context") stays its own entry.
    return json.dumps([sig["kernel"], sig["args"], sig.get("context")], sort_keys=True)


def merge(*lists: list[dict]) -> list[dict]:
    """Signatures of several lists, the calls of equal ones summed, in a stable order."""
    out: dict[str, dict] = {}
    for sigs in lists:
        for sig in sigs:
            key = _identity(sig)
            if key in out:
                out[key] = {**out[key], "calls": out[key]["calls"] + sig["calls"]}
            else:
                out[key] = dict(sig)
    return [out[k] for k in sorted(out)]


def _is_int64(d: object) -> bool:
    return isinstance(d, int) and not isinstance(d, bool) and 0 <= d < 2**63


def _check_signature(sig: object, at: str) -> None:
    if not isinstance(sig, dict):
        raise ValueError(f"{at}: must be an object, got {sig!r}")
    kernel = sig.get("kernel")
    if not isinstance(kernel, str):  # a list or an object: no name (nor a dict key)
        raise ValueError(
            f"{at}: kernel must be a kernel's name (one of {', '.join(ARGS)}), got {kernel!r}"
        )
    if kernel not in ARGS:
        raise ValueError(f"{at}: unknown kernel {kernel!r} (known: {', '.join(ARGS)})")
    calls = sig.get("calls")
    if isinstance(calls, bool) or not isinstance(calls, int) or calls < 1:
        raise ValueError(f"{at}: calls must be a positive integer, got {calls!r}")
    args = sig.get("args")
    if not isinstance(args, dict) or set(args) != set(ARGS[kernel]):
        got = sorted(args) if isinstance(args, dict) else args
        raise ValueError(f"{at}: args must be {list(ARGS[kernel])}, got {got!r}")
    for name, a in args.items():
        if not isinstance(a, dict):
            raise ValueError(f"{at}: args.{name} must be an object")
        for k in ("shape", "stride"):
            v = a.get(k)
            if not isinstance(v, list) or not all(_is_int64(d) for d in v):
                raise ValueError(
                    f"{at}: args.{name}.{k} must be a list of integers in [0, 2**63) "
                    f"(PyTorch's sizes and strides), got {v!r}"
                )
        if len(a["shape"]) != len(a["stride"]):
            raise ValueError(
                f"{at}: args.{name} has {len(a['shape'])} sizes but {len(a['stride'])} strides"
            )
        if not isinstance(a.get("dtype"), str):
            raise ValueError(f"{at}: args.{name}.dtype must be a string, got {a.get('dtype')!r}")
        if "storage_offset" in a and not _is_int64(a["storage_offset"]):
            raise ValueError(
                f"{at}: args.{name}.storage_offset must be an integer in [0, 2**63), "
                f"got {a['storage_offset']!r}"
            )
        same = a.get("same_as")
        earlier = ARGS[kernel][: ARGS[kernel].index(name)]
        if same is not None and same not in earlier:
            raise ValueError(
                f"{at}: args.{name}.same_as must name an earlier argument of {list(earlier)}, "
                f"got {same!r}"
            )
    context = sig.get("context")
    if context is None:
        return  # recorded before call contexts were: unknown
    ok = (
        isinstance(context, dict)
        and all(isinstance(context.get(f), bool) for f in CONTEXT_FLAGS)
        and isinstance(context.get("tensors"), dict)
        and set(context["tensors"]) == set(ARGS[kernel])
        and all(
            isinstance(t, dict) and all(isinstance(t.get(f), bool) for f in TENSOR_FLAGS)
            for t in context["tensors"].values()
        )
    )
    if not ok:
        raise ValueError(
            f"{at}: context must be an object of {list(CONTEXT_FLAGS)} and, under 'tensors', "
            f"{list(TENSOR_FLAGS)} for each of {list(ARGS[kernel])} (booleans), got {context!r}"
        )


def read(path: str | os.PathLike) -> dict:
    """A recorder file's content, checked; ValueError naming the file and the entry."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise ValueError(f"{path}: cannot read the shape record: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not a shape record (not text)") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not a shape record (not JSON: {e})") from None
    except (ValueError, RecursionError) as e:
        # Valid JSON that json.loads still refuses: an integer past Python's digit limit,
        # or nesting past the recursion limit.
        raise ValueError(f"{path}: not a shape record ({str(e).splitlines()[0]})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError(f"{path}: not a shape record (needs format {FORMAT!r})")
    sigs = data.get("signatures")
    if not isinstance(sigs, list):
        raise ValueError(f"{path}: 'signatures' must be a list")
    for i, sig in enumerate(sigs):
        _check_signature(sig, f"{path}: signatures[{i}]")
    return data


# --- from signatures to suite shapes ----------------------------------------------------


# The most memory one tensor of a suite shape may span: more than any one GPU holds (the
# largest hold under 300 GB), so no shape a GPU can run is refused for its size, and a file
# whose sizes or strides were mangled (petabytes of x) is.
MAX_TENSOR_BYTES = 2**40  # 1 TiB


def suite_shape(sig: dict, source: str):
    """The suite shape a (checked) signature is timed at; ValueError saying why there is none:
    each kernel's ``KernelSpec.shape_of_call``, then what the kernel can launch
    (:func:`check_runnable`)."""
    shape = cases.KERNELS[sig["kernel"]].shape_of_call(sig["args"], source)
    check_runnable(sig["kernel"], sig["args"], shape)
    return shape


def check_runnable(kernel: str, args: dict, shape) -> None:
    """ValueError unless the kernel can run a call of these (checked) *args* at *shape*:
    its grid fits CUDA's (:func:`_check_grid`), no tensor spans more than
    :data:`MAX_TENSOR_BYTES`, and the kernel's own validation (the public function's:
    ranks, strides, sizes within its limits) passes for tensors of these sizes and strides.
    Those are built on the meta device: nothing is allocated."""
    _check_grid(kernel, shape)
    import torch

    dtypes = {name: getattr(torch, a["dtype"]) for name, a in args.items()}  # shape_of_call's
    for name, a in args.items():
        # The memory a view reaches: PyTorch ignores the stride of a dim of size 1.
        reach = sum((n - 1) * st for n, st in zip(a["shape"], a["stride"], strict=True) if n > 1)
        nbytes = (reach + 1) * dtypes[name].itemsize
        if nbytes > MAX_TENSOR_BYTES:
            raise ValueError(
                f"{name} {a['shape']} (strides {a['stride']}) spans {nbytes} bytes, over the "
                f"{MAX_TENSOR_BYTES} bytes (1 TiB) one tensor of a suite shape may span "
                "(ltx2k.workload.record.MAX_TENSOR_BYTES): more than any GPU holds"
            )
    try:
        tensors = [
            torch.empty_strided(a["shape"], a["stride"], dtype=dtypes[name], device="meta")
            for name, a in args.items()
        ]
    except (RuntimeError, OverflowError) as e:  # sizes PyTorch cannot index
        raise ValueError(f"sizes and strides no tensor can have: {e}") from None
    _kernel_validate(kernel)(*(tensors[list(args).index(name)] for name in ARGS[kernel]))


def _kernel_validate(kernel: str):
    """The kernel's own argument validation (its public function's), by tensor arguments
    in :data:`ARGS` order."""
    from ltx2k.kernels import adaln, qknorm_rope, rope, rope_pair

    def qknorm(*tensors):
        return qknorm_rope._validate(*tensors, eps=cases.QK_NORM_EPS)

    return {
        "split_rope": rope._validate,
        "ada_values9": adaln._validate,
        "split_rope_pair": rope_pair._validate,
        "qknorm_rope_pair": qknorm,
    }[kernel]


def _check_grid(kernel: str, shape) -> None:
    """ValueError where a launch at *shape* would pass CUDA's 2**31 - 1 programs on the grid's
    x axis (``ltx2k.kernels.adaln.MAX_PROGRAMS``), where the kernels index programs and tokens
    in int32: split RoPE launches up to one program per token (``per_head``), a pair up to one
    per token of q and of k (``row``, or ``tiled`` with tiles of one token), and AdaLN's grid
    kernel (``adaln.GRID_ALGORITHMS``, the default variant among them) one per row, value and
    column block, more than which it refuses."""
    from ltx2k.kernels import adaln

    if kernel == "ada_values9":
        block_d, _ = adaln._grid_config(shape.D)
        programs = shape.B * shape.S * adaln.N_VALUES * -(-shape.D // block_d)
        what = (
            f"B*S*9*ceil(D/{block_d}) = {programs} programs of the grid kernel "
            f"({'/'.join(adaln.GRID_ALGORITHMS)}, the default among them)"
        )
    elif kernel == "split_rope":
        programs = shape.B * shape.S
        what = f"B*S = {programs} tokens, up to one program each"
    else:
        programs = shape.B * shape.Sq if shape.shared else shape.B * (shape.Sq + shape.Sk)
        tokens = "B*Sq" if shape.shared else "B*(Sq + Sk)"
        what = f"{tokens} = {programs} tokens of q and k, up to one program each"
    if programs > adaln.MAX_PROGRAMS:
        raise ValueError(
            f"{what}: over CUDA's limit of {adaln.MAX_PROGRAMS} programs on a grid's x axis "
            "(ltx2k.kernels.adaln.MAX_PROGRAMS)"
        )


@dataclass(frozen=True)
class Addition:
    kernel: str
    shape: object  # the kernel's shape type (ltx2k.workload.shapes.KERNEL_FIELDS)
    calls: int  # recorded calls of every signature timed at this shape
    held: bool  # the suite has this label already
    # The call contexts (ltx2k.workload.contexts) its signatures were recorded in; empty for
    # a file recorded before contexts were.
    contexts: frozenset = frozenset()


def additions(record_path: str | os.PathLike, suite=None) -> list[Addition]:
    """Every suite shape the recorder file's signatures map to, in the file's order,
    with their calls; ``held`` says whether the suite (``ltx2k.workload.shapes.load()``) has it.

    Raises ValueError naming the file and the entry for anything that is not a
    recorder file or a signature no suite shape can stand for.
    """
    from ltx2k.workload import contexts, shapes

    suite = suite or shapes.load()
    data = read(record_path)
    source = f"recorded: {Path(record_path).name}"
    found: dict[tuple[str, str], Addition] = {}
    for i, sig in enumerate(data["signatures"]):
        try:
            shape = suite_shape(sig, source)
        except ValueError as e:
            raise ValueError(f"{record_path}: signatures[{i}] ({sig['kernel']}): {e}") from None
        key = (sig["kernel"], shape.label)
        calls = sig["calls"] + (found[key].calls if key in found else 0)
        held = shape.label in suite.labels(sig["kernel"])
        seen = found[key].contexts if key in found else frozenset()
        if sig.get("context") is not None:
            seen = seen | {contexts.name_of(sig["kernel"], sig["context"])}
        found[key] = Addition(sig["kernel"], shape, calls, held, seen)
    return list(found.values())


# --- a whole process: LTX2K_RECORD_SHAPES ---------------------------------------------


def _write_at_exit(recording: Recording) -> None:
    try:
        recording.write()
    except Exception as e:  # at exit there is no caller left to raise to
        print(f"ltx2k: {ENV_VAR}: counts not written: {e}", file=sys.stderr)


def _forget_in_child() -> None:
    # A forked child inherits its parent's counts, which the parent writes: the child
    # counts its own calls only.
    global _ACTIVE_LOCK
    _ACTIVE_LOCK = threading.Lock()  # the parent's may have been held at fork()
    for recording in _ACTIVE:
        recording.forget()


def _write_in_child(recording: Recording) -> None:
    # A multiprocessing child made by fork() leaves through os._exit, which skips atexit;
    # multiprocessing runs its own exit finalizers first.
    if "multiprocessing" in sys.modules:
        from multiprocessing import util

        util.Finalize(None, _write_at_exit, args=(recording,), exitpriority=0)


def _from_environment() -> None:
    path = os.environ.get(ENV_VAR)
    if not path:
        return
    try:
        recording = Recording(path)
    except ValueError as e:
        # Said once, when the process starts; the process itself goes on (a library never
        # takes its caller down), unrecorded.
        print(f"ltx2k: error: {ENV_VAR}: {e}; not recording", file=sys.stderr)
        return
    _start(recording)
    atexit.register(_write_at_exit, recording)
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=lambda: _write_in_child(recording))


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)
_from_environment()
