"""Where the kernels run: a CUDA GPU, or Triton's CPU interpreter.

Triton decides at ``@triton.jit`` decoration time whether a kernel is
interpreted (``TRITON_INTERPRET=1``), so the choice must be made before
``ltx2k.kernels`` is imported. Library users set the variable themselves;
the harness (CLI, asv suite, pytest) calls :func:`select_backend`.
"""

from __future__ import annotations

import os
import sys


def interpreter_requested() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def select_backend() -> str:
    """Use the GPU when there is one, else Triton's interpreter. Returns "cuda" or "interpreter".

    Raises RuntimeError if the kernels were already imported in the other mode:
    mixing them would run interpreted kernels on a GPU or fail on CPU tensors.
    """
    import torch

    if not interpreter_requested() and not torch.cuda.is_available():
        if "ltx2k.kernels.rope" in sys.modules or "ltx2k.kernels.adaln" in sys.modules:
            raise RuntimeError(
                "no CUDA device, and ltx2k.kernels were already imported for the GPU; "
                "set TRITON_INTERPRET=1 before importing ltx2k.kernels"
            )
        os.environ["TRITON_INTERPRET"] = "1"
    return "interpreter" if interpreter_requested() else "cuda"


def device() -> str:
    """The torch device the harness allocates on: "cuda" on a GPU, "cpu" in the interpreter."""
    return "cpu" if interpreter_requested() else "cuda"


# The process ContextKeeper runs: one CUDA context per visible device,
# kept until its stdin closes (the parent exited or left the with-block).
_KEEPER_CODE = """
import sys, torch
for i in range(torch.cuda.device_count()):
    torch.empty(1, device=f"cuda:{i}")
print("ready", torch.cuda.device_count(), flush=True)
sys.stdin.read()
"""


class ContextKeeper:
    """Keep a CUDA context open on every visible GPU while a benchmark run lasts.

    asv forks a fresh process per benchmark x params (~280 of them per commit),
    and each one creates its own CUDA context. Without persistence mode the
    driver tears the GPU state down whenever the last context closes, so every
    process pays the full GPU initialisation again. One idle context held by a
    side process has the effect of persistence mode without root or a change to
    the GPU's settings; it launches nothing, so it does not compete for the GPU.
    ``tools/experiments/process_cost.py`` (removed; in git history at 6b69a44)
    measured the difference.
    """

    def __init__(self, python: str | None = None):
        self.python = python or sys.executable
        self.proc = None
        self.devices = 0

    def __enter__(self) -> ContextKeeper:
        import subprocess

        self.proc = subprocess.Popen(
            [self.python, "-c", _KEEPER_CODE],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        line = self.proc.stdout.readline().split()
        if line[:1] != ["ready"]:
            self.__exit__(None, None, None)
            raise RuntimeError("the CUDA context keeper did not start (see its stderr above)")
        self.devices = int(line[1])
        return self

    def __exit__(self, *exc) -> None:
        if self.proc is None:
            return
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=30)
        except Exception:  # never let cleanup mask the run's own outcome
            self.proc.kill()
        self.proc = None


def context_keeper(enabled: bool):
    """A :class:`ContextKeeper` where there is a GPU to keep warm, else a no-op context."""
    import contextlib

    return ContextKeeper() if enabled else contextlib.nullcontext()


def warm_before_fork() -> None:
    """Compute, once and before forking, what every forked benchmark process would recompute.

    Triton keys its on-disk kernel cache with ``triton_key()``: a SHA-256 of its
    own sources and of ``libtriton.so`` (about 400 MB for Triton 3.6), computed
    at the first compile or cache lookup of each process and kept in an
    ``lru_cache``. asv forks a process per benchmark and parameter combination,
    so without this each of them hashed the library again. Computed in the
    parent, it is inherited. The same holds for what else each process met at
    its first kernel call, found by profiling one forked benchmark process of
    each kind on the H200 (``tools/experiments/process_cost.py --profile``,
    removed; in git history at 6b69a44; the costs are in docs/measurement.md,
    "Suite cost"):

    - Triton's first launch in a process imports ``triton.experimental.gluon``
      (to recognise its tensor descriptors among the arguments);
    - inductor keys its caches with ``torch_key()``, a hash of torch's Python
      sources, computed at the first ``torch.compile`` of each process. Only
      where the caller has imported inductor already: importing it costs more
      than the hash.

    Not warmed here: what torch's CUDA initialisation and Triton's first launch
    do without calling into CUDA (registering two Triton sparse-matmul ops,
    creating Triton's CUDA driver object). Done in the parent, it saved nothing
    measurable per forked process on the H200 (docs/measurement.md). Nor
    dynamo's first trace, which imports more modules in each
    process that compiles the torch.compile peer. Dynamo saves the CUDA RNG
    state around every trace whenever a GPU is visible, which initialises CUDA
    in the tracing process and so would break every forked child.

    None of it touches CUDA state, so the children can still create their own
    CUDA context. Each step is best effort: one that fails here (another torch
    or Triton) is left to the children, as before.
    """
    try:
        from triton.runtime.cache import triton_key
    except ImportError:  # a Triton without it: each process computes what it needs
        return
    triton_key()
    import contextlib

    # A Triton without gluon does not import it at launch either.
    with contextlib.suppress(Exception):
        import triton.experimental.gluon  # noqa: F401
    codecache = sys.modules.get("torch._inductor.codecache")
    if codecache is not None and hasattr(codecache, "torch_key"):
        codecache.torch_key()
