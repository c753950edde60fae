"""``ltx2k all``: the main job (:func:`ltx2k.pipeline.run_all`)."""

from __future__ import annotations

import argparse

from ltx2k.commands.common import EXIT_OK, add_config_option, find_config


def add_parser(subparsers) -> argparse.ArgumentParser:
    s = subparsers.add_parser(
        "all",
        help="the main job: gate, asv run, store, regress, publish (GPU or CPU interpreter)",
    )
    add_config_option(s)
    s.add_argument(
        "--commits",
        default="HEAD^!",
        help="commit range to benchmark, as for asv run (default HEAD^!: HEAD only)",
    )
    s.add_argument(
        "--store",
        default=".asv/store.git",
        help="results store: git URL or local path (created as a bare repo if missing); "
        "'' to skip (default .asv/store.git)",
    )
    s.add_argument("--results", default="results", help="asv results dir (default results)")
    s.add_argument("--html", default="html", help="dashboard output dir (default html)")
    s.add_argument("--skip-bench", action="store_true", help="reuse existing results")
    return s


def run(args: argparse.Namespace) -> int:
    from ltx2k import pipeline

    out = pipeline.run_all(
        config=find_config(args.config, args.results),
        commits=args.commits,
        store=args.store,
        html=args.html,
        results=args.results,
        skip_bench=args.skip_bench,
    )
    # A regression is reported (exit 2) but the dashboard is still published.
    return out.regress_exit if out.regress_exit == 2 else EXIT_OK
