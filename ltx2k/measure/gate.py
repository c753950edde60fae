"""The correctness gate: no number is posted for a variant that does not match its reference.

What a variant is compared with, and how closely, is its kernel's data
(:meth:`ltx2k.workload.cases.KernelSpec.gate`): the device algorithms and most peers
bit for bit with the kernel's reference (``torch.equal``, atol=0, rtol=0); a peer that
computes another summation order against its own reference, within a stated
:class:`~ltx2k.workload.cases.Tolerance`. In the CPU interpreter (which truncates
fp32->bf16 and has no bf16 arithmetic), inputs are exactly representable so that the
comparison stays bit-exact there too.
"""

from __future__ import annotations

import sys

from ltx2k import runtime
from ltx2k.workload import cases
from ltx2k.workload.variants import COMPILED_VARIANTS


class CorrectnessError(AssertionError):
    """A variant's output differs from the reference: the benchmark must fail."""


def check_case(kernel: str, variant: str, shape, device, seed: int = 0, launch="auto") -> None:
    spec = cases.KERNELS[kernel]
    exact = runtime.interpreter_requested()
    args = spec.make_inputs(shape, device, seed=seed, exact=exact)
    fn = cases.variant_fn(kernel, variant, launch)
    check = spec.gate(variant)
    want = check.against(*args)
    against = getattr(check.against, "__name__", "its reference")
    how = (
        "bit-identical to"
        if check.tolerance.exact
        else f"within atol={check.tolerance.atol:g}, rtol={check.tolerance.rtol:g} of"
    )
    # Twice: a native launch path records on its first call and replays after it,
    # and the replay is what the timed calls run.
    for call in ("first", "second"):
        if not check.accepts(fn(*args), want):
            raise CorrectnessError(
                f"{kernel}/{variant} (launch={launch}) at {shape.label} is not {how} "
                f"{against} on its {call} call; refusing to time it"
            )


def launches(kernel: str, variant: str) -> tuple[str, ...]:
    """The launch paths *variant* takes at this version ("auto" alone for a peer)."""
    if cases.is_peer(kernel, variant):
        return ("auto",)
    import importlib

    try:
        mod = importlib.import_module(cases.KERNELS[kernel].triton_module)
    except ModuleNotFoundError:  # the kernel is not at this version: check_case skips it
        return ("auto",)
    calls = getattr(mod, "CALLS", None)
    if calls is None:
        return ("auto",)
    # "auto" is one of the others
    return tuple(path for (v, path) in calls if v == variant and path != "auto") or ("auto",)


def check_all(verbose: bool = False, variants=None) -> list[str]:
    """Check every kernel x variant x launch path x shape on this device; return the failures."""
    on_gpu = runtime.device() == "cuda"
    failures = []
    for kernel, spec in cases.KERNELS.items():
        for variant in spec.variants:
            if variants and variant not in variants:
                continue
            compiled = variant in COMPILED_VARIANTS
            if compiled and not on_gpu:
                continue  # inductor's CPU backend compiles C++ for minutes; GPU-only peer
            shape_list = cases.shapes_for(kernel, on_gpu)
            with recompiles_allowed(len(shape_list) if compiled else 0):
                for shape in shape_list:
                    for launch in launches(kernel, variant):
                        try:
                            check_case(kernel, variant, shape, runtime.device(), launch=launch)
                            status = "ok"
                        except cases.VariantUnavailable:
                            status = "unavailable"  # not at this version: nothing to check
                        except CorrectnessError as e:
                            failures.append(str(e))
                            status = "MISMATCH"
                        if verbose:
                            print(
                                f"{kernel:16s} {variant:16s} {launch:7s} {shape.label:40s} "
                                f"{status}",
                                file=sys.stderr,
                            )
    return failures


def recompiles_allowed(n_shapes: int):
    """A context in which dynamo may compile one code object once per shape.

    The compiled peer is compiled at static shapes (one graph per shape, as each
    benchmark process compiles its own). The gate checks every shape in one process,
    and past dynamo's recompile limit (8 by default) ``fullgraph=True`` makes the
    next shape a hard error rather than a check.
    """
    import contextlib

    if n_shapes == 0:
        return contextlib.nullcontext()
    import torch._dynamo

    cfg = torch._dynamo.config
    # renamed from cache_size_limit in torch 2.6
    name = "recompile_limit" if hasattr(cfg, "recompile_limit") else "cache_size_limit"
    return cfg.patch(**{name: max(getattr(cfg, name), n_shapes + 8)})
