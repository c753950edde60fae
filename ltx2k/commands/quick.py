"""``ltx2k quick``: time every variant now, without asv, one row as each is measured."""

from __future__ import annotations

import argparse

from ltx2k.commands.common import EXIT_OK, positive


def add_parser(subparsers) -> argparse.ArgumentParser:
    s = subparsers.add_parser(
        "quick", help="time every variant now, without asv, and print a table"
    )
    from ltx2k.workload import variants  # plain data, no torch

    kernels = ", ".join(variants.TIMED_VARIANTS)
    s.add_argument("--kernel", action="append", help=f"one of {kernels} (repeatable)")
    s.add_argument("--shape", action="append", help="shape label to keep (repeatable)")
    s.add_argument(
        "--seconds", type=positive(float), default=0.2, help="time budget per measurement"
    )
    return s


def run(args: argparse.Namespace) -> int:
    from ltx2k import runtime

    runtime.select_backend()
    from ltx2k.measure import suite

    on_gpu = runtime.device() == "cuda"
    suite.check_quick_filters(args.kernel, args.shape, on_gpu)
    widths = suite.quick_widths(on_gpu)
    print(suite.format_row(suite.QUICK_COLUMNS, widths), flush=True)
    for row in suite.quick_rows(kernels=args.kernel, shapes=args.shape, seconds=args.seconds):
        print(suite.format_row(row, widths), flush=True)
    return EXIT_OK
