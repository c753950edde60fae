"""``ltx2k regress``: per-GPU regression flags (:mod:`ltx2k.analysis.regress`)."""

from __future__ import annotations

import argparse
import sys

from ltx2k.commands.common import (
    check_outputs,
    check_results_dir,
    fail,
    internal_error,
    usage_error_exits_1,
)
from ltx2k.history import store_kills


def add_parser(subparsers) -> argparse.ArgumentParser:
    s = subparsers.add_parser(
        "regress",
        help="flag per-GPU regressions: steps in each GPU's history, or head vs a baseline",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="With --last N: every GPU's series of each cell over the last N commits it "
        "measured, up to --head, goes through a change-point detector whose noise is learned "
        "from that history (and the GPU's other cells of the same metric); a step whose first "
        "bad commit is among the --recent newest runs flags the cell. With --baseline: head "
        "against one commit with asv's own test. Either way a flag needs significance AND a "
        "size beyond the benchmark's threshold ratio.",
        epilog="exit status:\n"
        "  0  no regression\n"
        "  1  error (bad arguments, unreadable thresholds file, an output that cannot\n"
        "     be written: the other outputs still are)\n"
        "  2  at least one regression on at least one machine\n"
        "  3  not enough data: nothing comparable (head or history missing on every\n"
        "     machine), a machine named with --machine had nothing comparable, or\n"
        "     head's own result file is broken (named in the report's notes)\n"
        "  4  report incomplete: an output could not be rendered (an internal error,\n"
        "     named on stderr); the other outputs were written. A regression (2)\n"
        "     still exits 2\n"
        'thresholds file (JSON): {"thresholds": {"*SplitRope.time_device_cold": 1.03},\n'
        '  "direction": {"*.track_my_rate": "higher"}, "alpha": 0.002, "history_alpha": 0.002};\n'
        "  defaults in docs/history.md.",
    )
    s.add_argument("--results", required=True, help="asv results directory")
    s.add_argument("--head", required=True, help="commit sha (or, with --repo, any git ref)")
    base = s.add_mutually_exclusive_group(required=True)
    base.add_argument("--baseline", help="baseline commit sha, or a branch name with --repo")
    base.add_argument(
        "--last",
        type=int,
        metavar="N",
        help="judge the last N measured commits before head for steps (20 is a good window)",
    )
    s.add_argument(
        "--recent",
        type=int,
        metavar="K",
        help="with --last: a step flags its cell while its first bad commit is among the "
        "K newest runs (default 5: HEAD and the 4 commits before it)",
    )
    s.add_argument("--repo", help="git repo: resolve branches, order --last by git rev-list")
    s.add_argument("--machine", action="append", help="only these machines (repeatable)")
    s.add_argument("--env", help="asv environment name, when a machine ran several")
    s.add_argument("--thresholds", help="JSON file of per-benchmark thresholds (see below)")
    s.add_argument("--markdown", metavar="OUT.md", help="write Markdown here, not to stdout")
    s.add_argument("--json", metavar="OUT.json", help="also write the JSON report here")
    usage_error_exits_1(s)
    return s


def run(args: argparse.Namespace) -> int:
    import json

    from ltx2k.analysis import regress
    from ltx2k.analysis.model import EXIT_INCOMPLETE, EXIT_REGRESSION
    from ltx2k.report.markdown import render_markdown, summary_line

    check_results_dir(args.results)
    if args.recent is not None and args.baseline is not None:
        return fail("--recent applies to --last (a history's newest runs), not to --baseline")
    check_outputs(
        {"--json": args.json, "--markdown": args.markdown},
        {"--results": args.results, "--thresholds": args.thresholds},
    )
    report = regress.triage(
        args.results,
        args.head,
        baseline=args.baseline,
        last=args.last,
        recent=args.recent,
        repo=args.repo,
        machines=args.machine,
        thresholds=args.thresholds,
        env=args.env,
    )
    # Each output is rendered from the report on its own: an error inside one of them
    # (a bug) is named on stderr, and the others are still written.
    outputs = (
        ("--json", args.json, lambda: json.dumps(report.to_json(), indent=2, allow_nan=False)),
        ("--markdown", args.markdown, lambda: render_markdown(report)),
    )
    incomplete = False
    unwritten = []  # outputs that could not be written: named, and the others still are
    markdown = None
    for flag, path, render in outputs:
        if not path and flag != "--markdown":
            continue
        try:
            text = render()
        except Exception as e:  # a bug in one output must not cost the others
            incomplete = True
            internal_error(f"the {flag} output" if path else "the Markdown on stdout", e)
            continue
        if flag == "--markdown":
            markdown = text
        if path:
            try:
                store_kills.write_whole(path, text)
            except OSError as e:
                print(
                    f"ltx2k: error: {flag} {path!r}: cannot write: {e.strerror or e}",
                    file=sys.stderr,
                )
                unwritten.append(flag)
    if not args.markdown and markdown is not None:
        print(markdown)
    try:
        line = summary_line(report)
    except Exception as e:
        incomplete = True
        internal_error("the summary line", e)
        line = f"status {report.status}"
    print(f"ltx2k regress: {line}", file=sys.stderr)
    code = report.exit_code
    if unwritten:  # an output path that cannot be written is a bad argument
        print(
            f"ltx2k regress: {' and '.join(unwritten)} not written (exit 1); the report's "
            "other outputs were",
            file=sys.stderr,
        )
        return 1
    if incomplete and code != EXIT_REGRESSION:
        print(
            f"ltx2k regress: the report is incomplete (exit {EXIT_INCOMPLETE}); "
            "the outputs named above were not written",
            file=sys.stderr,
        )
        return EXIT_INCOMPLETE
    return code
