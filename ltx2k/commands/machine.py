"""``ltx2k machine``: this runner's asv machine name and fields."""

from __future__ import annotations

import argparse
import sys

from ltx2k.commands.common import EXIT_OK


def add_parser(subparsers) -> argparse.ArgumentParser:
    s = subparsers.add_parser(
        "machine", help="identify this GPU runner (asv machine name and fields)"
    )
    s.add_argument("--write", action="store_true", help="write ~/.asv-machine.json for asv")
    s.add_argument(
        "--path", default=None, help="machine file to write (default ~/.asv-machine.json)"
    )
    s.add_argument("--name-only", action="store_true", help="print only the machine name")
    return s


def run(args: argparse.Namespace) -> int:
    from ltx2k.runner import machine

    # Checked before identify, which imports torch: a mistyped command fails at once.
    if args.path is not None and not args.write:
        raise ValueError(f"--path {args.path!r} is the file --write writes; pass --write too")
    info = machine.identify()
    if args.write:
        path = machine.write_asv_machine_file(info, args.path)
        print(f"wrote {path}", file=sys.stderr)
    print(info["machine"] if args.name_only else machine.format_info(info))
    return EXIT_OK
