"""Allocations per call of the public function (what the AdaLN slab optimization is about).

On CUDA this reads the caching allocator's own counter of allocation
requests (``allocation.all.allocated``), which counts every tensor
allocation, cached block or not. On CPU there is no such counter, so a
TorchDispatchMode counts op outputs whose storage is new.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes
from torch.utils._pytree import tree_leaves


class _NewStorageCounter(TorchDispatchMode):
    # Only observes: the public functions take their plain path under it, not their
    # registered op (which this mode would see as one op with one output).
    ltx2k_observer = True

    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        seen = {
            t.untyped_storage().data_ptr()
            for t in tree_leaves((args, kwargs))
            if isinstance(t, torch.Tensor)
        }
        out = func(*args, **kwargs)
        new = {
            t.untyped_storage().data_ptr()
            for t in tree_leaves(out)
            if isinstance(t, torch.Tensor) and t.untyped_storage().nbytes() > 0
        } - seen
        self.count += len(new)
        return out


@contextlib.contextmanager
def _interpreter_unobserved():
    # Triton's CPU interpreter copies arguments and builds numpy views with torch
    # ops of its own; on a GPU those are not there, so they are not the
    # function's allocations. Run interpreted launches outside the counting mode.
    try:
        from triton.runtime.interpreter import InterpretedFunction
    except ImportError:
        yield
        return
    original = InterpretedFunction.run

    def run(self, *args, **kwargs):
        with _disable_current_modes():
            return original(self, *args, **kwargs)

    InterpretedFunction.run = run
    try:
        yield
    finally:
        InterpretedFunction.run = original


def allocations_per_call(fn: Callable[[], object], on_gpu: bool) -> int:
    fn()  # warm-up: JIT compile, allocator pools
    if on_gpu:
        torch.cuda.synchronize()
        before = torch.cuda.memory_stats()["allocation.all.allocated"]
        out = fn()
        after = torch.cuda.memory_stats()["allocation.all.allocated"]
        del out
        return int(after - before)
    with _interpreter_unobserved(), _NewStorageCounter() as counter:
        fn()
    return counter.count
