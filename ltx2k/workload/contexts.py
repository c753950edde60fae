"""The call contexts the host-latency cells call a kernel in: how its caller holds the
inputs and which autograd mode is on. One name per context, used by the suite, the
pytest-benchmark run, the docs and the dashboard.

- ``plain``: plain tensors, grad mode as a script has it (on); the inputs need no grad.
- ``model``: as LTX-2 serving calls it: under ``torch.inference_mode()``, with a block's
  weights (:attr:`ltx2k.workload.cases.KernelSpec.weights`: AdaLN's
  ``scale_shift_table``, the attention's q_norm and k_norm weights) as the block's
  trainable ``nn.Parameter``s.

Host latency depends on the context (the native replay once declined a Parameter: 4x the
plain call's latency on the H200), so the suite times both.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class CallContext:
    name: str
    title: str
    weights_as_parameters: bool  # the kernel's weights (KernelSpec.weights) as nn.Parameter
    inference_mode: bool  # the calls run under torch.inference_mode()


CONTEXTS: dict[str, CallContext] = {
    c.name: c
    for c in (
        CallContext("plain", "plain tensors, grad mode on", False, False),
        CallContext(
            "model",
            "as LTX-2 serving calls it: the block's nn.Parameter weights, inference mode",
            True,
            True,
        ),
    )
}


def get(name: str) -> CallContext:
    """The context *name*, or ValueError naming the known ones."""
    if name not in CONTEXTS:
        raise ValueError(f"call context must be one of {sorted(CONTEXTS)}, got {name!r}")
    return CONTEXTS[name]


def arguments(kernel: str, args: tuple, context: str) -> tuple:
    """*args* of *kernel* as a caller in *context* holds them: in ``model``, the kernel's
    weights wrapped as ``nn.Parameter`` (same storage, so the same values and layout)."""
    import torch

    from ltx2k.workload import cases

    ctx = get(context)
    if not ctx.weights_as_parameters:
        return tuple(args)
    weights = cases.KERNELS[kernel].weights
    return tuple(
        torch.nn.Parameter(a, requires_grad=a.is_floating_point()) if i in weights else a
        for i, a in enumerate(args)
    )


@contextlib.contextmanager
def entered(context: str) -> Iterator[None]:
    """The autograd mode of *context* around a batch of calls."""
    import torch

    if get(context).inference_mode:
        with torch.inference_mode():
            yield
    else:
        yield


def name_of(kernel: str, recorded: dict) -> str:
    """The context a recorded call (a shape record's ``context`` object,
    :func:`ltx2k.workload.record.context_of`) is timed in: ``model`` where the call ran
    without grad mode, under inference mode, or with one of the kernel's weights an
    ``nn.Parameter``; ``plain`` otherwise."""
    from ltx2k.workload import cases, record

    weights = {record.ARGS[kernel][i] for i in cases.KERNELS[kernel].weights}
    parameter = any(recorded["tensors"][w]["parameter"] for w in weights)
    if parameter or recorded["inference_mode"] or not recorded["grad_mode"]:
        return "model"
    return "plain"
