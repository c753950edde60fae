"""``ltx2k power``: the smallest slowdown regress flags, from an A/A pair of runs
(:mod:`ltx2k.analysis.detection_power`)."""

from __future__ import annotations

import argparse
import math
import sys

from ltx2k.commands.common import EXIT_OK, at_least, check_output_files, check_outputs


def add_parser(subparsers) -> argparse.ArgumentParser:
    s = subparsers.add_parser(
        "power",
        help="smallest slowdown ltx2k regress flags, from two runs of one commit (real noise)",
        description="RUN_A and RUN_B are asv results dirs holding the same commit, measured "
        "twice on one machine. Prints the false flags of that A/A pair and the share of cells "
        "flagged at each injected slowdown (ltx2k/analysis/detection_power.py).",
    )
    s.add_argument("run_a", metavar="RUN_A", help="asv results dir of the first run")
    s.add_argument("run_b", metavar="RUN_B", help="asv results dir of the second run")
    s.add_argument("--machine", default=None, help="machine, if the runs share several")
    s.add_argument("--commit", default=None, help="commit (prefix), if the runs share several")
    s.add_argument(
        "--env", default=None, help="asv environment, if the runs hold the commit in several"
    )
    s.add_argument("--benchmarks", default="*.time_device_*", help="fnmatch over names")
    s.add_argument(
        "--min-us", type=at_least(float, 0), default=10.0, help="cells with a base >= this (10)"
    )
    s.add_argument("--exclude", action="append", metavar="GLOB", help='e.g. "* compiled *"')
    s.add_argument(
        "--ratio",
        action="append",
        type=float,  # checked in run(), naming the flag
        default=[],
        help="device-time threshold ratio(s) >= 1 to try, e.g. 1.03 (repeatable)",
    )
    s.add_argument("--json", help="write the result here")
    s.add_argument("--plot", help="write the detection curve (PNG) here")
    return s


def run(args: argparse.Namespace) -> int:
    from ltx2k.analysis import detection_power

    for ratio in args.ratio:
        # As the thresholds file's ratios (ltx2k.analysis.thresholds), which would say
        # "threshold for '*.time_device_*'" without naming the flag the value came from.
        if not (math.isfinite(ratio) and ratio >= 1.0):
            raise ValueError(
                f"--ratio {ratio!r} must be a finite ratio >= 1.0 (1.05 = 5% worse), "
                "a device-time threshold to try"
            )
    outputs = {"--json": args.json, "--plot": args.plot}
    check_outputs(outputs, {"RUN_A": args.run_a, "RUN_B": args.run_b})
    # Both before the analysis: --plot's writer would create a missing folder where
    # --json's fails on it, and a failure after the work loses it.
    check_output_files(outputs)
    from ltx2k.analysis.regress import problem_notices

    problems: list = []
    try:
        runs = detection_power.load_runs(args.run_a, args.run_b, problems)
    finally:
        # What could not be read says why cells are missing, before any error about them.
        for line in problem_notices(problems, in_report=False):
            print(f"ltx2k power: {line}", file=sys.stderr)
    reports = []
    for label, report in detection_power.at_ratios(
        *runs,
        args.ratio,
        machine=args.machine,
        commit=args.commit,
        env=args.env,
        benchmarks=args.benchmarks,
        min_value=args.min_us * 1e-6,
        exclude=args.exclude or (),
    ):
        reports.append((label, report))
        print(detection_power.format_report(report))
    if args.json:
        detection_power.write_json(reports, args.json)
    if args.plot:
        from ltx2k.report import plots

        plots.save(plots.detection_power(reports), args.plot)
        print(f"wrote {args.plot}", file=sys.stderr)
    return EXIT_OK
