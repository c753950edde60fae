"""``ltx2k check``: every kernel variant bit-exact against its reference (the gate)."""

from __future__ import annotations

import argparse

from ltx2k.commands.common import EXIT_OK, fail


def add_parser(subparsers) -> argparse.ArgumentParser:
    return subparsers.add_parser(
        "check", help="check every kernel variant bit-exactly against its reference"
    )


def run(args: argparse.Namespace) -> int:
    from ltx2k import runtime

    runtime.select_backend()
    from ltx2k.measure.gate import check_all

    failures = check_all(verbose=True)
    return EXIT_OK if not failures else fail(f"{len(failures)} case(s) not bit-exact")
