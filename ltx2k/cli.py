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


def cmd_run(args: argparse.Namespace) -> int:
    from ltx2k import asv_run

    return asv_run.run(args.asv_args, config=args.config, dry_run=args.dry_run)


# --- history, analysis, report (see ltx2k/history, ltx2k/analysis, ltx2k/report) ---
# HELPER-SECTION: add history/regress/report handlers below this line.


def cmd_publish(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ltx2k.report import publish

    results, html, conf_repo = publish.conf_dirs(args.config, args.results, args.html)
    repo = Path(args.repo).resolve() if args.repo else conf_repo
    report = args.regress_json
    if report is None:
        report = publish.latest_vs_previous(results, repo=repo if repo.is_dir() else None)
    res = publish.publish(
        args.config, results, html, regress_json=report, repo=repo, last=args.last
    )
    print(f"wrote {res.html_dir}/index.html and {res.summary}", file=sys.stderr)
    if not res.asv_ok:
        return _fail("asv publish failed; only the summary page was written (see problems above)")
    return EXIT_OK


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

    s = sub.add_parser(
        "run",
        help="asv run on this machine (GPU-derived name, samples recorded, offline env)",
        description="Everything after the options is passed to `asv run`, e.g. "
        "`ltx2k run HEAD^!`, `ltx2k run main~3..main`, `ltx2k run NEW`.",
    )
    s.add_argument("--config", default="asv.conf.json")
    s.add_argument("--dry-run", action="store_true", help="print the asv command only")
    s.add_argument("asv_args", nargs=argparse.REMAINDER)
    s.set_defaults(func=cmd_run)

    # HELPER-PARSERS: add history/regress/report subparsers below this line.

    s = sub.add_parser("publish", help="build the dashboard: asv publish + html/summary.html")
    s.add_argument("--config", default="asv.conf.json", help="asv config (default asv.conf.json)")
    s.add_argument("--results", default=None, help="results dir (default: the config's)")
    s.add_argument("--html", default=None, help="output dir (default: the config's html_dir)")
    s.add_argument(
        "--regress-json",
        default=None,
        help="regress report to show (default: compute latest commit vs the previous one)",
    )
    s.add_argument("--repo", default=None, help="git repo with the commits (default: the config's)")
    s.add_argument("--last", type=int, default=None, help="history plots: keep the last N commits")
    s.set_defaults(func=cmd_publish)

    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, RuntimeError, FileNotFoundError) as e:
        return _fail(str(e))


if __name__ == "__main__":
    sys.exit(main())
