"""ltx2k: LTX-2 Triton kernels and a continuous performance-tracking harness.

Public API (imported lazily, so that the harness can choose Triton's backend
-- GPU or the CPU interpreter -- before any ``@triton.jit`` is evaluated):

- :func:`apply_ltx2_split_rotary_emb` -- split-layout rotary embedding;
- :func:`ltx2_ada_values9` -- the nine AdaLN scale/shift/gate tensors;
- :func:`record_shapes` -- record the call signatures both functions see
  (:mod:`ltx2k.workload.record`);
- :mod:`ltx2k.workload.reference` -- the eager PyTorch references both match bit for bit.
"""

from __future__ import annotations

__version__ = "0.1.0"

_LAZY = {
    "apply_ltx2_split_rotary_emb": ("ltx2k.kernels.rope", "apply_ltx2_split_rotary_emb"),
    "ltx2_ada_values9": ("ltx2k.kernels.adaln", "ltx2_ada_values9"),
    "ROPE_ACCEPTED_VARIANTS": ("ltx2k.kernels.rope", "ACCEPTED_VARIANTS"),
    "ADA_ACCEPTED_VARIANTS": ("ltx2k.kernels.adaln", "ACCEPTED_VARIANTS"),
    "record_shapes": ("ltx2k.workload.record", "record_shapes"),
}

__all__ = ["apply_ltx2_split_rotary_emb", "ltx2_ada_values9", "record_shapes", "__version__"]


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'ltx2k' has no attribute {name!r}")
