"""``ltx2k`` command line: thin argparse handlers over importable logic.

Each ``cmd_*`` handler parses nothing itself, imports its heavy modules
lazily (so ``ltx2k --help`` never imports torch), calls one library
function and turns ``ValueError``/``RuntimeError`` into a message on stderr
and a non-zero exit.
"""

from __future__ import annotations

import argparse
import sys

# Exit statuses shared by every command (regress documents its own 2 and 3).
EXIT_OK = 0
EXIT_ERROR = 1


def _fail(msg: str, code: int = EXIT_ERROR) -> int:
    print(f"ltx2k: error: {msg}", file=sys.stderr)
    return code


# --- kernels and measurement -------------------------------------------------


def cmd_check(args: argparse.Namespace) -> int:
    from ltx2k import runtime

    runtime.select_backend()
    from ltx2k.measure.gate import check_all

    failures = check_all(verbose=True)
    return EXIT_OK if not failures else _fail(f"{len(failures)} case(s) not bit-exact")


def cmd_machine(args: argparse.Namespace) -> int:
    from ltx2k import machine

    info = machine.identify()
    if args.write:
        path = machine.write_asv_machine_file(info, args.path)
        print(f"wrote {path}", file=sys.stderr)
    print(info["machine"] if args.name_only else machine.format_info(info))
    return EXIT_OK


def cmd_quick(args: argparse.Namespace) -> int:
    from ltx2k import runtime

    runtime.select_backend()
    from ltx2k.measure.suite import quick_table

    print(quick_table(kernels=args.kernel, shapes=args.shape, seconds=args.seconds))
    return EXIT_OK


# --- history, analysis, report (see ltx2k/history, ltx2k/analysis, ltx2k/report) ---
# HELPER-SECTION: add history/regress/report handlers below this line.


# --- parser ----------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ltx2k", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    s = sub.add_parser("check", help="check every kernel variant bit-exactly against its reference")
    s.set_defaults(func=cmd_check)

    s = sub.add_parser("machine", help="identify this GPU runner (asv machine name and fields)")
    s.add_argument("--write", action="store_true", help="write ~/.asv-machine.json for asv")
    s.add_argument(
        "--path", default=None, help="machine file to write (default ~/.asv-machine.json)"
    )
    s.add_argument("--name-only", action="store_true", help="print only the machine name")
    s.set_defaults(func=cmd_machine)

    s = sub.add_parser("quick", help="time every variant now, without asv, and print a table")
    s.add_argument("--kernel", action="append", help="split_rope or ada_values9 (repeatable)")
    s.add_argument("--shape", action="append", help="shape label to keep (repeatable)")
    s.add_argument("--seconds", type=float, default=0.2, help="time budget per measurement")
    s.set_defaults(func=cmd_quick)

    # HELPER-PARSERS: add history/regress/report subparsers below this line.

    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, RuntimeError, FileNotFoundError) as e:
        return _fail(str(e))


if __name__ == "__main__":
    sys.exit(main())
