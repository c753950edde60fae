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
