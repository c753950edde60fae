"""``ltx2k quick``: time every variant now, without asv, one row as each is measured."""

from __future__ import annotations

import argparse

from ltx2k.commands.common import EXIT_OK, positive


def add_parser(subparsers) -> argparse.ArgumentParser:
    s = subparsers.add_parser(
        "quick", help="time every variant now, without asv, and print a table"
    )
    s.add_argument("--kernel", action="append", help="split_rope or ada_values9 (repeatable)")
    s.add_argument("--shape", action="append", help="shape label to keep (repeatable)")
    s.add_argument(
        "--seconds", type=positive(float), default=0.2, help="time budget per measurement"
    )
    return s


def _check_filters(kernels: list[str] | None, shapes: list[str] | None, on_gpu: bool):
    """Unknown --kernel/--shape names would select nothing: name the valid ones instead."""
    from ltx2k import cases

    for k in kernels or ():
        if k not in cases.KERNELS:
            raise ValueError(f"--kernel {k!r}: unknown kernel; valid: {', '.join(cases.KERNELS)}")
    chosen = kernels or list(cases.KERNELS)
    here = [s.label for k in chosen for s in cases.shapes_for(k, on_gpu)]
    anywhere = [
        s.label for k in chosen for s in cases.shapes_for(k, True) + cases.shapes_for(k, False)
    ]
    device = "GPU" if on_gpu else "CPU interpreter"
    for label in shapes or ():
        if label in here:
            continue
        other = "the CPU interpreter" if on_gpu else "a GPU"
        where = f"measured only on {other}" if label in anywhere else "unknown shape"
        of = f" of --kernel {', '.join(kernels)}" if kernels else ""
        raise ValueError(
            f"--shape {label!r}: {where}{of}; valid on this device ({device}): "
            + ", ".join(dict.fromkeys(here))
        )


def _widths(on_gpu: bool) -> list[int]:
    """Column widths known before the first row, so each row can be printed as measured."""
    from ltx2k import cases
    from ltx2k.measure import suite

    names = {0: list(cases.KERNELS), 1: [v for k in cases.KERNELS.values() for v in k.variants]}
    names[2] = [s.label for k in cases.KERNELS for s in cases.shapes_for(k, on_gpu)]
    return [
        max([len(col), 8, *(len(n) for n in names.get(i, ()))])
        for i, col in enumerate(suite.QUICK_COLUMNS)
    ]


def run(args: argparse.Namespace) -> int:
    from ltx2k import runtime

    runtime.select_backend()
    from ltx2k.measure import suite

    on_gpu = runtime.device() == "cuda"
    _check_filters(args.kernel, args.shape, on_gpu)
    widths = _widths(on_gpu)
    print(suite.format_row(suite.QUICK_COLUMNS, widths), flush=True)
    for row in suite.quick_rows(kernels=args.kernel, shapes=args.shape, seconds=args.seconds):
        print(suite.format_row(row, widths), flush=True)
    return EXIT_OK
