"""``ltx2k interference``: do concurrent runs disturb each other
(:mod:`ltx2k.analysis.interference`)."""

from __future__ import annotations

import argparse
import sys

from ltx2k.commands.common import EXIT_OK


def add_parser(subparsers) -> argparse.ArgumentParser:
    s = subparsers.add_parser(
        "interference",
        help="median shift per metric of one commit run under several conditions vs alone",
        description="Each --condition NAME=DIR is an asv results dir holding one commit of one "
        "machine (scripts/interference.sh writes alone, concurrent-suite, concurrent-load). "
        "Writes interference.md/.json/.png and policy.json (for shard-run --policy) to --out.",
    )
    s.add_argument(
        "--condition",
        action="append",
        required=True,
        metavar="NAME=DIR",
        help="a condition's name and asv results dir (repeatable; one must be --reference)",
    )
    s.add_argument("--reference", default="alone", help="condition to compare with (alone)")
    s.add_argument(
        "--decide",
        default="concurrent-suite",
        help="condition the policy follows (concurrent-suite)",
    )
    s.add_argument("--machine", default=None, help="machine, if a dir holds several")
    s.add_argument("--commit", default=None, help="commit (prefix), if a dir holds several")
    s.add_argument("--family", action="append", help="metric family (default: cold device, host)")
    s.add_argument("--alpha", type=float, default=0.002, help="significance level (0.002)")
    s.add_argument("--out", required=True, help="output directory")
    return s


def run(args: argparse.Namespace) -> int:
    from ltx2k.analysis import interference

    conditions = interference.load_conditions(args.condition, args.machine, args.commit)
    report = interference.analyse(
        conditions,
        reference=args.reference,
        families=args.family or interference.FAMILIES,
        alpha=args.alpha,
    )
    paths = interference.write_outputs(report, args.out, decide=args.decide)
    print(paths["markdown"].read_text())
    print(f"wrote {', '.join(str(p) for p in paths.values())}", file=sys.stderr)
    return EXIT_OK
