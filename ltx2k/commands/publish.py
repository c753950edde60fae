"""``ltx2k publish``: the dashboard (:mod:`ltx2k.report.publish`)."""

from __future__ import annotations

import argparse
import sys

from ltx2k.commands.common import EXIT_OK, at_least, fail


def add_parser(subparsers) -> argparse.ArgumentParser:
    s = subparsers.add_parser(
        "publish", help="build the dashboard: asv publish + html/summary.html"
    )
    s.add_argument("--config", default="asv.conf.json", help="asv config (default asv.conf.json)")
    s.add_argument("--results", default=None, help="results dir (default: the config's)")
    s.add_argument("--html", default=None, help="output dir (default: the config's html_dir)")
    s.add_argument(
        "--regress-json",
        default=None,
        help="regress report to show (default: judge the newest commit along the last 20 commits)",
    )
    s.add_argument("--repo", default=None, help="git repo with the commits (default: the config's)")
    s.add_argument(
        "--last",
        type=at_least(int, 1),
        default=None,
        help="history plots: keep the last N commits",
    )
    return s


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ltx2k.history.records import load_results
    from ltx2k.report import publish

    results, html, conf_repo = publish.conf_dirs(args.config, args.results, args.html)
    where = f"--results {str(results)!r}" if args.results else f"results dir {str(results)!r}"
    if not results.is_dir():
        return fail(f"{where} is not a directory (asv run or ltx2k store pull fills it)")
    records, problems = load_results(results)
    if not records:
        # A dashboard of nothing would only hide that the results are missing.
        return fail(
            f"{where} holds no asv results ({len(problems)} problem(s)); nothing published, "
            f"{str(html)!r} left as it was (fill it with ltx2k run or ltx2k store pull)"
        )
    repo = Path(args.repo).resolve() if args.repo else conf_repo
    report = args.regress_json
    if report is None:
        report = publish.latest_vs_previous(results, repo=repo if repo.is_dir() else None)
    res = publish.publish(
        args.config, results, html, regress_json=report, repo=repo, last=args.last
    )
    if not res.asv_ok:
        # asv's pages are missing or left from an earlier publish: only the summary is new.
        return fail(
            f"asv publish failed (problems above): wrote {res.summary}, "
            f"but no new {res.html_dir / 'index.html'}"
        )
    print(f"wrote {res.html_dir / 'index.html'} and {res.summary}", file=sys.stderr)
    return EXIT_OK
