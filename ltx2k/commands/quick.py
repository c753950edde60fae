"""``ltx2k quick``: time every variant now, without asv, one row as each is measured."""

from __future__ import annotations

import argparse
import sys

from ltx2k.commands.common import EXIT_ERROR, EXIT_OK, positive


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
    failed = []

    def on_error(kernel, variant, label, e):
        # One line now, beside the table; the rest of the table is still measured.
        first = next((ln for ln in str(e).splitlines() if ln.strip()), "")
        failed.append(f"{kernel} {variant} {label}")
        print(f"ltx2k quick: {kernel} {variant} {label}: {type(e).__name__}: {first}",
              file=sys.stderr, flush=True)  # fmt: skip

    print(suite.format_row(suite.QUICK_COLUMNS, widths), flush=True)
    rows = suite.quick_rows(
        kernels=args.kernel, shapes=args.shape, seconds=args.seconds, on_error=on_error
    )
    for row in rows:
        print(suite.format_row(row, widths), flush=True)
    if failed:
        print(f"ltx2k quick: {len(failed)} case(s) failed: {', '.join(failed)}", file=sys.stderr)
        return EXIT_ERROR
    return EXIT_OK
