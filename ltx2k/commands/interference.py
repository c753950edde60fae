"""``ltx2k interference``: do concurrent runs disturb each other
(:mod:`ltx2k.analysis.interference`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ltx2k.commands.common import EXIT_OK, check_outputs


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
        default=None,
        help="condition the policy follows, one of the compared ones (default: "
        "concurrent-suite; without that condition, no policy.json is written)",
    )
    s.add_argument("--machine", default=None, help="machine, if a dir holds several")
    s.add_argument("--commit", default=None, help="commit (prefix), if a dir holds several")
    s.add_argument("--family", action="append", help="metric family (default: cold device, host)")
    s.add_argument("--alpha", type=float, default=0.002, help="significance level (0.002)")
    s.add_argument("--out", required=True, help="output directory")
    return s


def run(args: argparse.Namespace) -> int:
    from ltx2k.analysis import interference

    if not args.out:
        raise ValueError("--out must name a folder, got ''")
    if Path(args.out).exists() and not Path(args.out).is_dir():
        raise ValueError(f"--out {args.out!r} is a file; pass a folder for the report")
    check_outputs(
        {"--out": args.out},
        {f"--condition {spec}": spec.partition("=")[2] for spec in args.condition or ()},
    )
    conditions = interference.load_conditions(args.condition, args.machine, args.commit)
    families = args.family or interference.FAMILIES
    compared = [c for c in conditions if c != args.reference]
    decide = args.decide
    if decide is not None:
        # Before the analysis and before anything is written: an older policy.json in
        # --out would otherwise be taken for this run's by shard-run --policy.
        interference.check_decide(decide, compared)
    elif interference.SUITE_CONDITION in compared:
        decide = interference.SUITE_CONDITION
    report = interference.analyse(
        conditions, reference=args.reference, families=families, alpha=args.alpha
    )
    paths = interference.write_outputs(report, args.out, decide=decide)
    print(paths["markdown"].read_text())
    if decide is None:
        old = Path(args.out) / "policy.json"
        print(
            f"ltx2k interference: no policy.json written: no condition "
            f"{interference.SUITE_CONDITION!r} to follow; pass --decide NAME (one of "
            f"{', '.join(compared)})" + (f"; {_earlier(old)}" if old.exists() else ""),
            file=sys.stderr,
        )
    print(f"wrote {', '.join(str(p) for p in paths.values())}", file=sys.stderr)
    return EXIT_OK


def _earlier(path: Path) -> str:
    """What the policy.json already in --out is, so it is not taken for this run's."""
    from ltx2k.runner.partition import Policy

    try:
        pol = Policy.load(path)
    except ValueError:
        return f"{path} is an earlier run's and unreadable as a policy"
    at = f" at commit {pol.commit[:8]}" if pol.commit else ""
    on = f", measured on {pol.machine}{at}" if pol.machine else ""
    return f"{path} is an earlier run's{on}"
