"""``ltx2k confirm``: re-measure and bisect flagged steps (:mod:`ltx2k.confirm`)."""

from __future__ import annotations

import argparse
import sys

from ltx2k.commands.common import (
    add_config_option,
    at_least,
    check_output_files,
    check_outputs,
    find_config,
    usage_error_exits_1,
)


def add_parser(subparsers) -> argparse.ArgumentParser:
    s = subparsers.add_parser(
        "confirm",
        help="re-measure flagged steps on this runner's GPU, each bisected to one commit",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="For every regression that --report flags on this machine (or the one "
        "step named by --benchmark/--good/--bad): bisect its range with `asv find` when it "
        "holds more than one commit, re-measure the commit found and the one before it as an "
        "interleaved A/B pair with `asv continuous`, and judge the pair with ltx2k regress's "
        "rule and the cell's threshold. Results go to --work, never to results/.",
        epilog="exit status:\n"
        "  0  nothing confirmed (or nothing flagged on this machine)\n"
        "  1  error (bad arguments, unknown commit, a cell that could not be measured)\n"
        "  2  at least one regression confirmed (wins over errors of other cells)",
    )
    s.add_argument(
        "--report", metavar="REGRESS.json", help="`ltx2k regress --json` report with steps"
    )
    s.add_argument(
        "--benchmark",
        metavar="NAME",
        help="instead of --report: an asv benchmark, full name or dotted suffix "
        "(e.g. SplitRope.time_device_cold)",
    )
    s.add_argument("--good", metavar="REF", help="with --benchmark: last commit without the change")
    s.add_argument("--bad", metavar="REF", help="with --benchmark: a commit with the change")
    s.add_argument(
        "--param",
        action="append",
        metavar="NAME=VALUE",
        help="with --benchmark: only these parameter values (repeatable), e.g. variant=blocked",
    )
    s.add_argument("--machine", help="asv machine name (default: this runner's, ltx2k machine)")
    add_config_option(s)
    s.add_argument(
        "--work",
        default=".asv/confirm",
        help="private asv config and results of the re-measurements (default .asv/confirm)",
    )
    s.add_argument(
        "--rounds",
        type=at_least(int, 1),
        default=4,
        help="interleaved rounds per commit in the A/B (4)",
    )
    s.add_argument(
        "--max-cells",
        type=at_least(int, 1),
        default=20,
        help="check at most this many flagged cells, worst ratio first (20)",
    )
    s.add_argument(
        "--thresholds", help="JSON thresholds file as for regress (a report's own per-cell wins)"
    )
    s.add_argument("--markdown", metavar="OUT.md", help="write the summary here, not to stdout")
    s.add_argument("--json", metavar="OUT.json", help="also write the result as JSON here")
    s.add_argument("--dry-run", action="store_true", help="print the asv commands, run nothing")
    usage_error_exits_1(s)
    return s


def run(args: argparse.Namespace) -> int:
    from ltx2k import confirm

    outputs = {"--json": args.json, "--markdown": args.markdown}
    check_outputs(outputs, {"--report": args.report, "--thresholds": args.thresholds})
    # Before the re-measurements (hours on a GPU): written after them, a path that
    # cannot be was an error that also kept the summary from stdout.
    check_output_files(outputs)
    outcome = confirm.run(
        report=args.report,
        benchmark=args.benchmark,
        good=args.good,
        bad=args.bad,
        params=args.param or (),
        machine_name=args.machine,
        config=find_config(args.config),
        work=args.work,
        rounds=args.rounds,
        thresholds=args.thresholds,
        max_cells=args.max_cells,
        dry_run=args.dry_run,
    )
    markdown = confirm.write_outputs(outcome, json_path=args.json, markdown_path=args.markdown)
    if not args.markdown:
        print(markdown)
    print(f"ltx2k confirm: {outcome.status} on {outcome.machine}", file=sys.stderr)
    return outcome.exit_code
