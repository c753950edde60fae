"""The correctness gate: no number is posted for a variant that is not bit-exact.

Outputs are compared with the reference by ``torch.equal`` (atol=0, rtol=0).
In the CPU interpreter (which truncates fp32->bf16 and has no bf16
arithmetic), inputs are exactly representable so that the comparison stays
bit-exact there too.
"""

from __future__ import annotations

import sys

from ltx2k import cases, runtime


class CorrectnessError(AssertionError):
    """A variant's output differs from the reference: the benchmark must fail."""


def check_case(kernel: str, variant: str, shape, device, seed: int = 0) -> None:
    spec = cases.KERNELS[kernel]
    exact = runtime.interpreter_requested()
    args = spec.make_inputs(shape, device, seed=seed, exact=exact)
    fn = cases.variant_fn(kernel, variant)
    out = fn(*args)
    ref = spec.reference(*args)
    if not cases.outputs_equal(out, ref):
        raise CorrectnessError(
            f"{kernel}/{variant} at {shape.label} is not bit-identical to the reference; "
            "refusing to time it"
        )


def check_all(verbose: bool = False, variants=None) -> list[str]:
    """Check every kernel x variant x shape for this device; return the failures."""
    on_gpu = runtime.device() == "cuda"
    failures = []
    for kernel, spec in cases.KERNELS.items():
        for variant in spec.variants:
            if variants and variant not in variants:
                continue
            if variant == "compiled" and not on_gpu:
                continue  # inductor's CPU backend compiles C++ for minutes; GPU-only peer
            for shape in cases.shapes_for(kernel, on_gpu):
                try:
                    check_case(kernel, variant, shape, runtime.device())
                    status = "ok"
                except CorrectnessError as e:
                    failures.append(str(e))
                    status = "MISMATCH"
                if verbose:
                    print(f"{kernel:12s} {variant:9s} {shape.label:24s} {status}", file=sys.stderr)
    return failures
