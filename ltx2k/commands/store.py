"""``ltx2k store push|pull``: the shared git results store (:mod:`ltx2k.history.store`)."""

from __future__ import annotations

import argparse

from ltx2k.commands.common import EXIT_OK, at_least


def add_parser(subparsers) -> argparse.ArgumentParser:
    s = subparsers.add_parser(
        "store", help="push/pull asv results to/from the shared git results store"
    )
    store_sub = s.add_subparsers(dest="store_command", required=True, metavar="ACTION")
    t = store_sub.add_parser(
        "push",
        help="add this runner's results/<machine>/ files to the store branch (never forces)",
    )
    t.add_argument("--store", required=True, help="git URL or path of the store repository")
    t.add_argument("--results", default="results", help="local asv results dir (default results)")
    t.add_argument("--branch", default="asv-results", help="store branch (default asv-results)")
    t.add_argument("--machine", action="append", help="machine dir(s) to push (repeatable)")
    t.add_argument("--message", default=None, help="commit message")
    t.add_argument(
        "--retries", type=at_least(int, 0), default=8, help="retries when the tip moved (8)"
    )
    t.add_argument(
        "--backoff", type=at_least(float, 0), default=0.5, help="first retry delay, s (0.5)"
    )
    t = store_sub.add_parser("pull", help="assemble the store into a results dir for asv publish")
    t.add_argument("--store", required=True, help="git URL or path of the store repository")
    t.add_argument("--dest", default="results", help="results dir to fill (default results)")
    t.add_argument("--branch", default="asv-results", help="store branch (default asv-results)")
    t.add_argument("--overwrite", action="store_true", help="replace differing local files")
    return s


def push(args: argparse.Namespace) -> int:
    from ltx2k.history import store

    store.push_results(
        args.store,
        args.results,
        branch=args.branch,
        machine=args.machine,
        message=args.message,
        retries=args.retries,
        backoff=args.backoff,
    )
    return EXIT_OK


def pull(args: argparse.Namespace) -> int:
    from ltx2k.history import store

    # Local files that differ from the store are kept and listed on stderr:
    # on a runner they are its own results not pushed yet, not an error.
    store.pull_results(args.store, args.dest, branch=args.branch, overwrite=args.overwrite)
    return EXIT_OK
