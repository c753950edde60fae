"""Which path a public function's call takes, and the helpers every op's vmap rule shares.

A public function launches directly (natively or from Python) for plain inference, and
sends everything else to its registered ``torch.library`` op: :func:`routed` says which.
This module imports no kernel module, so each kernel module can register its own op
and route to it without an import cycle.
"""

from __future__ import annotations

import torch

from ltx2k.kernels import _native

_Tensor = torch.Tensor
_Parameter = torch.nn.Parameter
_len_dispatch_modes = torch._C._len_torch_dispatch_stack


def _observers_only() -> bool:
    # Modes that only watch the ops go by (ltx2k.measure.allocations) change no result.
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    return all(getattr(m, "ltx2k_observer", False) for m in _get_current_dispatch_mode_stack())


def routed(*tensors: object) -> bool:
    """Whether a public function's call must go through the registered op: an input
    that needs autograd, a functorch transform or forward-AD level, a fake/meta tensor or
    other subclass, a lazily negated view (``torch._neg_view``, or ``.imag`` of a conjugated
    complex view: the kernels would read its memory as not negated, while the dispatcher
    resolves the negation before the op runs), or an active
    dispatch mode. Non-tensors stay on the Python path, whose validation names them.
    (``nn.Parameter`` under ``no_grad`` is plain inference.)"""
    if not all(isinstance(t, _Tensor) for t in tensors):
        return False
    if (
        _native._functorch_level() is not None
        or (_len_dispatch_modes() and not _observers_only())
        or _native._forward_ad._current_level >= 0
    ):
        return True
    grad = torch.is_grad_enabled()
    for t in tensors:
        kind = type(t)
        if (kind is not _Tensor and kind is not _Parameter) or t.is_meta or t.is_neg():
            return True
        if grad and t.requires_grad:
            return True
    return False


def saved(*tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """What an op's autograd rule saves of its inputs. An inference tensor (made under
    ``torch.inference_mode``) cannot be saved for backward, yet a call outside that mode
    may still need gradients of its other inputs (a norm's ``nn.Parameter`` weight applied
    to inference activations), as eager ops allow: such an input is saved as a copy, which
    has no graph to lose."""
    return tuple(t.clone() if t.is_inference() else t for t in tensors)


def fold(t: torch.Tensor, dim: int | None, n: int) -> torch.Tensor:
    """The vmapped dimension of ``t`` (or a broadcast one) merged into its first dim."""
    t = t.movedim(dim, 0) if dim is not None else t.expand(n, *t.shape)
    return t.reshape(n * t.shape[1], *t.shape[2:])


def sample_shape(t: torch.Tensor, dim: int | None) -> tuple[int, ...]:
    """The shape of one sample of ``t`` vmapped at ``dim`` (``t``'s own where not vmapped)."""
    return tuple(t.shape) if dim is None else (*t.shape[:dim], *t.shape[dim + 1 :])


def unfold(out: torch.Tensor, n: int, like: torch.Tensor, dim: int | None) -> torch.Tensor:
    """A folded call's output ``[n*B, ...]`` as ``[n, B, ...]``, B being the first dim of
    one sample of ``like`` (vmapped at ``dim``). B is given, not left to ``view(n, -1, ...)``:
    an output of zero elements (no tokens, or no samples) cannot infer it."""
    return out.view(n, sample_shape(like, dim)[0], *out.shape[1:])


def meta_sample(t: torch.Tensor, dim: int | None) -> torch.Tensor:
    """One sample of ``t`` vmapped at ``dim``, as a meta tensor of its shape, strides and
    dtype: what a rule that loops over the samples validates when there are none."""
    keep = [d for d in range(t.dim()) if d != dim]
    return torch.empty_strided(
        [t.shape[d] for d in keep], [t.stride(d) for d in keep], dtype=t.dtype, device="meta"
    )
