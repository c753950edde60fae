"""``ltx2k shard-run``: one asv process per GPU of the host (:func:`ltx2k.runner.shard.run`)."""

from __future__ import annotations

import argparse

from ltx2k.commands.common import add_config_option, find_config


def add_parser(subparsers) -> argparse.ArgumentParser:
    s = subparsers.add_parser(
        "shard-run",
        help="asv run over a commit range, one process per GPU of this host, merged results",
        description="Split the range round-robin over the visible GPUs (nvidia-smi; "
        "CUDA_VISIBLE_DEVICES narrows them), run one pinned asv process per GPU into its own "
        "results dir, and merge into --results. Benchmarks matching an exclusive regex run "
        "afterwards one GPU at a time (default: host latency; docs/runners.md). Everything "
        "after `--` goes to asv run, e.g. `ltx2k shard-run -- main~20..main -b SplitRope`.",
    )
    s.add_argument("--gpus", default="auto", help="number of GPUs to use, or auto (all visible)")
    s.add_argument("--results", default=None, help="results dir (default: the config's)")
    add_config_option(s)
    pol = s.add_mutually_exclusive_group()
    pol.add_argument("--policy", help='JSON {"exclusive": [regex, ...]} (ltx2k interference)')
    pol.add_argument(
        "--exclusive",
        action="append",
        metavar="REGEX",
        help="exclusive benchmark regex (repeatable)",
    )
    pol.add_argument("--no-exclusive", action="store_true", help="run every benchmark concurrently")
    s.add_argument("--dry-run", action="store_true", help="print the split only")
    s.add_argument(
        "asv_args",
        nargs=argparse.REMAINDER,
        metavar="-- ASV_ARGS",
        help="commit range and options for asv run, after --",
    )
    return s


def run(args: argparse.Namespace) -> int:
    from ltx2k.runner import shard
    from ltx2k.runner.partition import policy_from_options

    return shard.run(
        args.asv_args,
        gpus=args.gpus,
        results=args.results,
        config=find_config(args.config, args.results),
        policy=policy_from_options(args.policy, args.exclusive, args.no_exclusive),
        dry_run=args.dry_run,
    )
