"""``ltx2k publish``: the dashboard (:mod:`ltx2k.report.publish`)."""

from __future__ import annotations

import argparse
import sys

from ltx2k.analysis.model import EXIT_INCOMPLETE
from ltx2k.commands.common import (
    EXIT_OK,
    add_config_option,
    at_least,
    check_results_dir,
    fail,
    find_config,
    internal_error,
)


def add_parser(subparsers) -> argparse.ArgumentParser:
    s = subparsers.add_parser(
        "publish",
        help="build the dashboard: asv publish + html/summary.html",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="exit status:\n"
        "  0  the dashboard was built\n"
        "  1  error (bad arguments, no results, asv publish failed)\n"
        "  4  dashboard incomplete: a part of it (a figure, the verdicts, the summary\n"
        "     page) hit an internal error, named on stderr; the rest was published",
    )
    add_config_option(s)
    s.add_argument("--results", default=None, help="results dir (default: the config's)")
    s.add_argument("--html", default=None, help="output dir (default: the config's html_dir)")
    s.add_argument(
        "--regress-json",
        default=None,
        help="regress report to show (default: judge the newest commit along the last 20 commits)",
    )
    s.add_argument("--repo", default=None, help="git repo with the commits (default: the config's)")
    from ltx2k.history.window import DRAWN

    drawn = s.add_mutually_exclusive_group()
    drawn.add_argument(
        "--last",
        type=at_least(int, 1),
        default=DRAWN,
        help=f"draw each GPU's last N commits, on asv's pages and the plots (default {DRAWN})",
    )
    drawn.add_argument(
        "--all",
        dest="last",
        action="store_const",
        const=None,
        help="draw the whole history (time and memory grow with it)",
    )
    return s


def run(args: argparse.Namespace) -> int:
    from ltx2k.report import publish

    if args.results is not None:
        check_results_dir(args.results)
    if args.repo is not None:
        from ltx2k.history.commits import check_repo

        # Before asv publish, which takes a while and would draw nothing of it.
        check_repo(args.repo)
    config = find_config(args.config, args.results)
    try:
        res = publish.publish_dashboard(
            config,
            args.results,
            args.html,
            regress_json=args.regress_json,
            repo=args.repo,
            last=args.last,
        )
    except ValueError:
        _name_problems(config, args.results)
        raise
    for what, e in res.internal_errors:
        internal_error(what, e)
    if res.error:
        return fail(res.error)
    print(f"wrote {res.html_dir / 'index.html'} and {res.summary}", file=sys.stderr)
    if res.internal_errors:
        print(
            f"ltx2k publish: the dashboard is incomplete (exit {EXIT_INCOMPLETE}): "
            f"{len(res.internal_errors)} part(s) named above are missing",
            file=sys.stderr,
        )
        return EXIT_INCOMPLETE
    return EXIT_OK


def _name_problems(config, results) -> None:
    """The files publish could not read, one line each as regress prints them: a
    refused publish (no readable result) would otherwise only count them."""
    from ltx2k.analysis.regress import problem_notices
    from ltx2k.history.records import load_results
    from ltx2k.report import publish

    try:
        results_dir, _, _ = publish.conf_dirs(config, results)
    except ValueError:
        return  # the config itself is the error, and says so
    if results_dir.is_dir():
        for line in problem_notices(load_results(results_dir)[1]):
            print(f"ltx2k publish: {line}", file=sys.stderr)
