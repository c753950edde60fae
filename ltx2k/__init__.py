"""ltx2k: LTX-2 Triton kernels and a continuous performance-tracking harness.

Public API (imported lazily, so that the harness can choose Triton's backend
-- GPU or the CPU interpreter -- before any ``@triton.jit`` is evaluated):

- :func:`apply_ltx2_split_rotary_emb` -- split-layout rotary embedding;
- :func:`ltx2_ada_values9` -- the nine AdaLN scale/shift/gate tensors;
- :func:`apply_ltx2_split_rotary_emb_pair` -- split RoPE on q and k in one launch;
- :func:`ltx2_qknorm_split_rope_pair` -- the attention prologue in one launch: RMSNorm of
  q and of k, then split RoPE of each;
- :func:`record_shapes` -- record the call signatures both functions see
  (:mod:`ltx2k.workload.record`);
- :mod:`ltx2k.workload.reference` -- the eager PyTorch references both match bit for bit.
"""

from __future__ import annotations

__version__ = "0.1.0"

_LAZY = {
    "apply_ltx2_split_rotary_emb": ("ltx2k.kernels.rope", "apply_ltx2_split_rotary_emb"),
    "ltx2_ada_values9": ("ltx2k.kernels.adaln", "ltx2_ada_values9"),
    "apply_ltx2_split_rotary_emb_pair": (
        "ltx2k.kernels.rope_pair",
        "apply_ltx2_split_rotary_emb_pair",
    ),
    "ltx2_qknorm_split_rope_pair": ("ltx2k.kernels.qknorm_rope", "ltx2_qknorm_split_rope_pair"),
    "ROPE_ACCEPTED_VARIANTS": ("ltx2k.kernels.rope", "ACCEPTED_VARIANTS"),
    "ADA_ACCEPTED_VARIANTS": ("ltx2k.kernels.adaln", "ACCEPTED_VARIANTS"),
    "record_shapes": ("ltx2k.workload.record", "record_shapes"),
}

__all__ = [
    "apply_ltx2_split_rotary_emb",
    "apply_ltx2_split_rotary_emb_pair",
    "ltx2_ada_values9",
    "ltx2_qknorm_split_rope_pair",
    "record_shapes",
    "__version__",
]


# Modules that moved: the old name (a module of its own, ltx2k/reference.py and
# ltx2k/shapes.py) is the new module itself, with one DeprecationWarning per process.
_MOVED = {"reference": "ltx2k.workload.reference", "shapes": "ltx2k.workload.shapes"}
_WARNED: set[str] = set()


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        return getattr(importlib.import_module(module), attr)
    if name in _MOVED:  # ``ltx2k.shapes`` before any ``import ltx2k.shapes``
        import importlib

        return importlib.import_module(f"ltx2k.{name}")
    raise AttributeError(f"module 'ltx2k' has no attribute {name!r}")


def _moved(old: str) -> None:
    """Run by the module ``old`` (``ltx2k.reference``, ``ltx2k.shapes``) as it is imported:
    ``sys.modules[old]`` becomes the module it moved to, so the import returns that very
    module, and the first time in the process a DeprecationWarning names the new path."""
    import importlib
    import sys
    import warnings

    new = _MOVED[old.rpartition(".")[2]]
    sys.modules[old] = importlib.import_module(new)
    if old in _WARNED:
        return
    _WARNED.add(old)
    warnings.warn(
        f"{old} moved to {new}; import that instead",
        DeprecationWarning,
        stacklevel=_importer_stacklevel(sys._getframe(1)),
    )


def _importer_stacklevel(frame) -> int:
    """The ``stacklevel`` of the importing code for a warning from :func:`_moved`, whose
    caller is ``frame``, the old module's own. ``warnings`` counts _moved as 1 and, past
    it, skips importlib's bootstrap frames; frames of this package's lazy attributes and
    of ``importlib.import_module`` between the old module and its importer are skipped
    here too, so the warning names the line that used the old path."""
    machinery = {"importlib", __name__, *(f"{__name__}.{n}" for n in _MOVED)}
    level = 2
    while frame is not None and frame.f_globals.get("__name__") in machinery:
        frame = frame.f_back
        while frame is not None and _bootstrap(frame.f_code.co_filename):
            frame = frame.f_back
        level += 1
    return level


def _bootstrap(filename: str) -> bool:
    # The frames warnings skips when it counts a stacklevel: importlib's bootstrap.
    return "importlib" in filename and "_bootstrap" in filename
