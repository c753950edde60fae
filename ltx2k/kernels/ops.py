"""The index of the kernels' registered ``torch.library`` ops; importing it registers every op.

Each op is registered by its kernel's module, after the launcher it wraps, so that the
kernel module never imports this one:

- ``torch.ops.ltx2k.split_rope(x, cos, sin, variant, launch) -> Tensor``
  (:mod:`ltx2k.kernels.rope`);
- ``torch.ops.ltx2k.split_rope_backward(grad, cos, sin) -> Tensor``, its gradient w.r.t.
  x (registered in :mod:`ltx2k.kernels.rope`, the kernel in
  :mod:`ltx2k.kernels.rope_backward`);
- ``torch.ops.ltx2k.split_rope_pair(q, k, q_cos, q_sin, k_cos, k_sin, variant, launch)
  -> (Tensor, Tensor)``: split RoPE of q and of k in one launch
  (:mod:`ltx2k.kernels.rope_pair`);
- ``torch.ops.ltx2k.qknorm_split_rope_pair(q, k, q_weight, k_weight, q_cos, q_sin, k_cos,
  k_sin, eps, variant, launch) -> (Tensor, Tensor)``: RMSNorm of q and of k, then split
  RoPE of each, in one launch (:mod:`ltx2k.kernels.qknorm_rope`);
- ``torch.ops.ltx2k.ada_values9(scale_shift_table, timestep, variant, launch) -> Tensor``:
  the ``(9, B, S, D)`` slab; :func:`ltx2k.ltx2_ada_values9` returns its ``unbind(0)``
  (:mod:`ltx2k.kernels.adaln`).

Each has a fake implementation (shapes, dtypes, strides; the same validation, so a
bad input fails while tracing as it would at run time), an autograd formula and a vmap
rule; ``torch.library.opcheck`` tests them (tests/test_ops.py). The public functions
send a call to their op when :func:`routed` says so (autograd, functorch, fake or meta
tensors, a dispatch mode, tensor subclasses) and while ``torch.compile`` or
``torch.export`` traces; plain inference tensors keep the native fast path, which never
enters the dispatcher. docs/kernels/transforms.md says what each transform does with
each kernel.

The public functions call the ops through ``torch.autograd.Function`` s over them
(:class:`SplitRope`, :class:`SplitRopePair`, :class:`QKNormSplitRopePair`,
:class:`AdaValues9`): a custom op's own autograd formula serves
``.backward()`` but not ``torch.func`` transforms (its generated Function has no
``setup_context``) nor forward-mode AD (it takes no jvp formula). The Functions add
both, with the same backward, and a jvp: split RoPE is linear in ``x`` and in
``(cos, sin)``, AdaLN in both its inputs, so each tangent goes through the forward
kernel (the fused RMSNorm is not linear: its jvp is the reference's, in eager ops).

The names below are those of the modules that define them, gathered here for callers.
"""

from __future__ import annotations

from ltx2k.kernels._routing import routed
from ltx2k.kernels.adaln import AdaValues9, ada_values9, ada_values9_routed
from ltx2k.kernels.qknorm_rope import QKNormSplitRopePair, qknorm_split_rope_pair
from ltx2k.kernels.rope import SplitRope, split_rope, split_rope_backward, split_rope_routed
from ltx2k.kernels.rope_pair import SplitRopePair, split_rope_pair

__all__ = [
    "AdaValues9",
    "QKNormSplitRopePair",
    "SplitRope",
    "SplitRopePair",
    "ada_values9",
    "ada_values9_routed",
    "qknorm_split_rope_pair",
    "routed",
    "split_rope",
    "split_rope_backward",
    "split_rope_pair",
    "split_rope_routed",
]
