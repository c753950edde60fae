"""Call contexts (ltx2k/workload/contexts.py): what the host clock's calls look like in each,
and the suite's cells of them."""

from __future__ import annotations

import pytest
import torch
from conftest import DEVICE

from ltx2k.measure import suite
from ltx2k.workload import cases, contexts, variants


def test_model_context_passes_the_weights_as_parameters_under_inference_mode(monkeypatch):
    seen = []

    def spy(*args):
        seen.append(
            (tuple(type(a) for a in args), torch.is_inference_mode_enabled(), args[0].requires_grad)
        )

    monkeypatch.setattr(suite, "_gated_fn", lambda *a, **k: spy)
    suite.forget()
    shape = cases.KERNELS["ada_values9"].cpu_shapes[0]
    for context in ("plain", "model"):
        seen.clear()
        suite.prepare("ada_values9", "slab", shape, "host", context=context).run()
        assert seen
        types, inference, grad = seen[-1]
        if context == "model":
            assert types == (torch.nn.Parameter, torch.Tensor) and inference and grad
        else:
            assert types == (torch.Tensor, torch.Tensor) and not inference and not grad
    suite.forget()


def test_contexts_keep_the_values_and_reject_unknown_names():
    args = cases.KERNELS["ada_values9"].make_inputs(
        cases.KERNELS["ada_values9"].cpu_shapes[0], "cpu"
    )
    wrapped = contexts.arguments("ada_values9", args, "model")
    assert (
        isinstance(wrapped[0], torch.nn.Parameter) and wrapped[0].data_ptr() == args[0].data_ptr()
    )
    assert wrapped[1] is args[1]
    rope = cases.KERNELS["split_rope"].make_inputs(cases.KERNELS["split_rope"].cpu_shapes[0], "cpu")
    assert all(type(a) is torch.Tensor for a in contexts.arguments("split_rope", rope, "model"))
    with pytest.raises(ValueError, match="call context must be one of"):
        contexts.get("serving")
    with pytest.raises(ValueError, match="host metric only"):
        suite.prepare(
            "ada_values9",
            "slab",
            cases.KERNELS["ada_values9"].cpu_shapes[0],
            "device_cold",
            context="model",
        )


@pytest.mark.parametrize("kernel", sorted(cases.KERNELS))
def test_the_model_context_gives_the_same_bits_as_plain(kernel):
    """Through the public function (the interpreter here; the GPU test replays natively):
    a Parameter under inference mode gives the plain call's output."""
    import importlib

    spec = cases.KERNELS[kernel]
    fn = getattr(importlib.import_module(spec.triton_module), spec.public_fn)
    args = spec.make_inputs(spec.cpu_shapes[0], DEVICE, exact=True)
    plain = fn(*args, variant=variants.DEFAULT_VARIANT[kernel])
    with contexts.entered("model"):
        model = fn(
            *contexts.arguments(kernel, args, "model"), variant=variants.DEFAULT_VARIANT[kernel]
        )
    assert cases.outputs_equal(model, plain)
