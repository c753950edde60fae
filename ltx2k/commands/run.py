"""``ltx2k run``: asv run on this machine (:func:`ltx2k.runner.asv_run.run`)."""

from __future__ import annotations

import argparse

from ltx2k.commands.common import add_config_option, find_config


def add_parser(subparsers) -> argparse.ArgumentParser:
    s = subparsers.add_parser(
        "run",
        help="asv run on this machine (GPU-derived name, samples recorded, offline env)",
        description="Everything after the options is passed to `asv run`, e.g. "
        "`ltx2k run HEAD^!`, `ltx2k run main~3..main`, `ltx2k run NEW`.",
    )
    add_config_option(s)
    s.add_argument("--dry-run", action="store_true", help="print the asv command only")
    s.add_argument(
        "asv_args",
        nargs=argparse.REMAINDER,
        metavar="ASV_ARGS",
        help="options and commit range for asv run, e.g. HEAD^! or main~3..main",
    )
    return s


def run(args: argparse.Namespace) -> int:
    from ltx2k.runner import asv_run

    return asv_run.run(args.asv_args, config=find_config(args.config), dry_run=args.dry_run)
