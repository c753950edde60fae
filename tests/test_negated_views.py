"""A lazily negated input (``torch._neg_view``: ``is_neg()``, the negation not yet in memory)
gives every kernel's result of the negated values, as any torch op would: such a call goes
through the registered op, where the dispatcher resolves the negation. Read directly, the
kernels would see the memory's values, not negated: a silently wrong answer."""

from __future__ import annotations

import pytest
import torch
from conftest import DEVICE

from ltx2k.workload import cases, variants


def _outputs(result) -> list[torch.Tensor]:
    return list(result) if isinstance(result, (tuple, list)) else [result]


@pytest.mark.parametrize("kernel", sorted(cases.KERNELS))
def test_a_negated_view_is_read_as_negated(kernel):
    spec = cases.KERNELS[kernel]
    shape = spec.cpu_shapes[0]
    args = spec.make_inputs(shape, DEVICE, seed=3, exact=True)
    fn = cases.variant_fn(kernel, variants.DEFAULT_VARIANT[kernel])
    tensors = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
    for i in tensors:
        negated = list(args)
        negated[i] = torch._neg_view(args[i])
        assert negated[i].is_neg()
        materialized = list(args)
        materialized[i] = args[i].neg()
        got = _outputs(fn(*negated))
        want = _outputs(fn(*materialized))
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            assert torch.equal(g, w), f"{kernel}: argument {i} negated lazily"
        # Not vacuous: negating this argument changes the result.
        plain = _outputs(fn(*args))
        if args[i].abs().max() > 0:
            assert any(not torch.equal(p, w) for p, w in zip(plain, want, strict=True)), i
