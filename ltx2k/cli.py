"""``ltx2k`` command line: thin argparse handlers over importable logic.

Each ``cmd_*`` handler parses nothing itself, imports its heavy modules
lazily (so ``ltx2k --help`` never imports torch) and calls one library
function. ``main`` turns a user's error (bad input, a missing file, a tool
that failed) into one line on stderr that names the flag, and a non-zero
exit; only a bug shows a traceback.
"""

from __future__ import annotations

import argparse
import os
import re
import sys

# Exit statuses shared by every command (regress documents its own 2 and 3).
EXIT_OK = 0
EXIT_ERROR = 1
EXIT_INTERRUPTED = 130  # a shell's status for SIGINT

# Library functions name their parameters in errors; on the command line the same
# value came from a flag. These parameters' flags have other names.
_PARAM_FLAGS = {
    "results_dir": "results",
    "dest_results_dir": "dest",
    "store_url": "store",
    "asv_conf": "config",
    "html_dir": "html",
    "out_dir": "out",
    "machine_name": "machine",
    "params": "param",
}


def _fail(msg: str, code: int = EXIT_ERROR) -> int:
    print(f"ltx2k: error: {msg}", file=sys.stderr)
    return code


def _user_error(e: BaseException) -> str | None:
    """One line for an error the user can fix (bad input, missing file, failed tool);
    None for anything else."""
    import subprocess

    if isinstance(e, subprocess.CalledProcessError):
        cmd = e.cmd if isinstance(e.cmd, str) else " ".join(map(str, e.cmd))
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else e.stderr
        last = next((ln for ln in reversed((err or "").splitlines()) if ln.strip()), "")
        return f"`{cmd}` exited {e.returncode}" + (f": {last.strip()}" if last else "")
    if isinstance(e, OSError) and e.filename is not None:
        return f"{e.filename}: {e.strerror or e}"
    if isinstance(e, (ValueError, RuntimeError, OSError)):
        return str(e)
    if type(e).__name__ == "UserError" and type(e).__module__.startswith("asv"):
        return str(e)  # asv's own "you asked for something wrong"
    return None


def _drop_param(param: str, e: BaseException) -> str:
    """The message of *e* without its ``param='value'`` part."""
    return re.sub(rf"{param}=('[^']*'|\S+)[,:]? ?", "", str(e)).strip()


def _subparser(parser: argparse.ArgumentParser, args: argparse.Namespace):
    """The (sub)parser of the command that ran, e.g. the one of ``store push``."""
    current = parser
    for dest in ("command", "store_command"):
        actions = [a for a in current._actions if isinstance(a, argparse._SubParsersAction)]
        if not actions or getattr(args, dest, None) is None:
            break
        current = actions[0].choices[getattr(args, dest)]
    return current


def _name_flags(message: str, parser: argparse.ArgumentParser) -> str:
    """``results_dir='x' is not a directory`` -> ``--results 'x' is not a directory``."""
    flags = {}
    for a in parser._actions:
        if a.option_strings:
            flags[a.dest] = max(a.option_strings, key=len)
        elif a.metavar:
            flags[a.dest] = str(a.metavar)
    for param, dest in _PARAM_FLAGS.items():
        if dest in flags:
            flags.setdefault(param, flags[dest])
    for param, flag in sorted(flags.items(), key=lambda kv: -len(kv[0])):
        # `pass machine=` (no value follows) -> `pass --machine`
        message = re.sub(rf"(?<![\w.=-]){param}=(?=[\s;,.)]|$)", flag, message)
        message = re.sub(rf"(?<![\w.=-]){param}=", f"{flag} ", message)
        message = re.sub(rf"(?<![\w.=-]){param}( must\b)", rf"{flag}\1", message)
    return message


# --- kernels and measurement -------------------------------------------------


def cmd_check(args: argparse.Namespace) -> int:
    from ltx2k import runtime

    runtime.select_backend()
    from ltx2k.measure.gate import check_all

    failures = check_all(verbose=True)
    return EXIT_OK if not failures else _fail(f"{len(failures)} case(s) not bit-exact")


def cmd_machine(args: argparse.Namespace) -> int:
    from ltx2k import machine

    info = machine.identify()
    if args.write:
        path = machine.write_asv_machine_file(info, args.path)
        print(f"wrote {path}", file=sys.stderr)
    print(info["machine"] if args.name_only else machine.format_info(info))
    return EXIT_OK


def _check_quick_filters(kernels: list[str] | None, shapes: list[str] | None, on_gpu: bool):
    """Unknown --kernel/--shape names would select nothing: name the valid ones instead."""
    from ltx2k import cases

    for k in kernels or ():
        if k not in cases.KERNELS:
            raise ValueError(f"--kernel {k!r}: unknown kernel; valid: {', '.join(cases.KERNELS)}")
    chosen = kernels or list(cases.KERNELS)
    here = [s.label for k in chosen for s in cases.shapes_for(k, on_gpu)]
    anywhere = [
        s.label for k in chosen for s in cases.shapes_for(k, True) + cases.shapes_for(k, False)
    ]
    device = "GPU" if on_gpu else "CPU interpreter"
    for label in shapes or ():
        if label in here:
            continue
        other = "the CPU interpreter" if on_gpu else "a GPU"
        where = f"measured only on {other}" if label in anywhere else "unknown shape"
        of = f" of --kernel {', '.join(kernels)}" if kernels else ""
        raise ValueError(
            f"--shape {label!r}: {where}{of}; valid on this device ({device}): "
            + ", ".join(dict.fromkeys(here))
        )


def cmd_quick(args: argparse.Namespace) -> int:
    from ltx2k import cases, runtime

    runtime.select_backend()
    from ltx2k.measure import suite

    on_gpu = runtime.device() == "cuda"
    _check_quick_filters(args.kernel, args.shape, on_gpu)
    # Widths known before the first row, so each row can be printed as it is measured.
    names = {0: list(cases.KERNELS), 1: [v for k in cases.KERNELS.values() for v in k.variants]}
    names[2] = [s.label for k in cases.KERNELS for s in cases.shapes_for(k, on_gpu)]
    widths = [
        max([len(col), 8, *(len(n) for n in names.get(i, ()))])
        for i, col in enumerate(suite.QUICK_COLUMNS)
    ]
    print(suite.format_row(suite.QUICK_COLUMNS, widths), flush=True)
    for row in suite.quick_rows(kernels=args.kernel, shapes=args.shape, seconds=args.seconds):
        print(suite.format_row(row, widths), flush=True)
    return EXIT_OK


def cmd_all(args: argparse.Namespace) -> int:
    from ltx2k import pipeline

    out = pipeline.run_all(
        config=args.config,
        commits=args.commits,
        store=args.store,
        html=args.html,
        results=args.results,
        skip_bench=args.skip_bench,
    )
    # A regression is reported (exit 2) but the dashboard is still published.
    return out.regress_exit if out.regress_exit == 2 else EXIT_OK


def cmd_run(args: argparse.Namespace) -> int:
    from ltx2k import asv_run

    return asv_run.run(args.asv_args, config=args.config, dry_run=args.dry_run)


# --- history, analysis, report (see ltx2k/history, ltx2k/analysis, ltx2k/report) ---


def cmd_power(args: argparse.Namespace) -> int:
    import json

    from ltx2k.analysis import detection_power as power
    from ltx2k.analysis.thresholds import Thresholds
    from ltx2k.history.records import load_results

    runs = []
    for flag, path in (("RUN_A", args.run_a), ("RUN_B", args.run_b)):
        try:
            records, problems = load_results(path)
        except ValueError as e:
            raise ValueError(f"{flag} {path!r} {_drop_param('results_dir', e)}") from e
        if not records:
            raise ValueError(f"{path!r} holds no asv results ({len(problems)} problem(s))")
        runs.append(records)
    ratios = list(args.ratio) or [None]
    reports = []
    for ratio in ratios:
        thr = None
        if ratio is not None:
            thr = Thresholds(ratios=(("*.time_device_*", ratio), *Thresholds().ratios))
        rep = power.detection_power(
            *runs,
            thresholds=thr,
            machine=args.machine,
            commit=args.commit,
            benchmarks=args.benchmarks,
            min_value=args.min_us * 1e-6,
            exclude=args.exclude or (),
        )
        used = (thr or Thresholds()).ratio_for("x.time_device_cold")
        reports.append((f"threshold {used}", rep))
        print(power.format_report(rep))
    if args.json:
        with open(args.json, "w") as f:
            json.dump([r.to_json() for _, r in reports], f, indent=1)
    if args.plot:
        from ltx2k.report import plots

        plots.save(plots.detection_power(reports), args.plot)
        print(f"wrote {args.plot}", file=sys.stderr)
    return EXIT_OK


def cmd_shard_run(args: argparse.Namespace) -> int:
    from ltx2k import shard

    if args.policy:
        policy = shard.Policy.load(args.policy)
    elif args.no_exclusive:
        policy = shard.Policy(())
    elif args.exclusive:
        policy = shard.Policy(tuple(args.exclusive))
    else:
        policy = shard.Policy()
    return shard.run(
        args.asv_args,
        gpus=args.gpus,
        results=args.results,
        config=args.config,
        policy=policy,
        dry_run=args.dry_run,
    )


def cmd_interference(args: argparse.Namespace) -> int:
    from ltx2k.analysis import interference

    conditions = {}
    for spec in args.condition:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path or name in conditions:
            raise ValueError(f"--condition {spec!r}: expected a new NAME=RESULTS_DIR")
        if not os.path.isdir(path):
            raise ValueError(f"--condition {spec!r}: {path!r} is not a directory")
        try:
            conditions[name] = interference.load_condition(path, args.machine, args.commit)
        except ValueError as e:
            # The message names the dir as results_dir=...: the condition says it already.
            raise ValueError(f"--condition {spec!r}: {_drop_param('results_dir', e)}") from e
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


def _usage_error_exits_1(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """regress reserves exit 2 for "regression found"; argparse would use 2 for usage errors."""

    def error(message: str):
        parser.print_usage(sys.stderr)
        parser.exit(EXIT_ERROR, f"{parser.prog}: error: {message}\n")

    parser.error = error
    return parser


def cmd_regress(args: argparse.Namespace) -> int:
    import json

    from ltx2k.analysis import regress
    from ltx2k.history.records import load_results
    from ltx2k.report.markdown import render_markdown

    if not os.path.isdir(args.results):
        return _fail(f"--results {args.results!r} is not a directory of asv results")
    records, problems = load_results(args.results)
    # A broken file is reported, never fatal: the other files still count. Benchmarks
    # a run skipped or failed are routine (variants timed for some metrics only):
    # counted here, listed in the report.
    routine = ("skipped", "failed", "timeout")
    for p in problems:
        if p.kind not in routine:
            print(f"ltx2k regress: {p.kind}: {p.message}", file=sys.stderr)
    n_routine = sum(p.kind in routine for p in problems)
    if n_routine:
        print(
            f"ltx2k regress: {n_routine} benchmark(s) with skipped or failed parameter "
            "combinations (listed at the end of the report)",
            file=sys.stderr,
        )
    # A full sha with no results is a commit not measured yet (exit 3); anything
    # shorter that no result starts with cannot be told from a typo.
    known = any(r.commit.startswith(args.head.strip().lower()) for r in records)
    if args.repo is None and records and not known and len(args.head.strip()) != 40:
        return _fail(
            f"--head {args.head!r}: no result in --results {args.results!r} is of that commit; "
            "pass the full sha, or --repo PATH for a branch name"
        )
    report = regress.compare(
        records,
        args.head,
        problems=problems,
        baseline=args.baseline,
        last=args.last,
        **({"recent": args.recent} if args.recent is not None else {}),
        repo=args.repo,
        machines=args.machine,
        thresholds=args.thresholds,
        env=args.env,
    )
    markdown = render_markdown(report)
    for flag, path, text in (
        ("--json", args.json, json.dumps(report.to_json(), indent=2)),
        ("--markdown", args.markdown, markdown),
    ):
        if path:
            try:
                with open(path, "w", encoding="utf-8") as f:
                    f.write(text)
            except OSError as e:
                return _fail(f"{flag} {path!r}: cannot write: {e.strerror or e}")
    if not args.markdown:
        print(markdown)
    print(f"ltx2k regress: {markdown.splitlines()[0]}", file=sys.stderr)
    return report.exit_code


def cmd_confirm(args: argparse.Namespace) -> int:
    from ltx2k import confirm

    outcome = confirm.run(
        report=args.report,
        benchmark=args.benchmark,
        good=args.good,
        bad=args.bad,
        params=args.param or (),
        machine_name=args.machine,
        config=args.config,
        work=args.work,
        rounds=args.rounds,
        thresholds=args.thresholds,
        max_cells=args.max_cells,
        dry_run=args.dry_run,
    )
    markdown = confirm.write_outputs(outcome, json_path=args.json, markdown_path=args.markdown)
    if not args.markdown:
        print(markdown)
    print(f"ltx2k confirm: {outcome.status} on {outcome.machine}", file=sys.stderr)
    return outcome.exit_code


def cmd_store_push(args: argparse.Namespace) -> int:
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


def cmd_store_pull(args: argparse.Namespace) -> int:
    from ltx2k.history import store

    # Local files that differ from the store are kept and listed on stderr:
    # on a runner they are its own results not pushed yet, not an error.
    store.pull_results(args.store, args.dest, branch=args.branch, overwrite=args.overwrite)
    return EXIT_OK


def cmd_publish(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ltx2k.history.records import load_results
    from ltx2k.report import publish

    results, html, conf_repo = publish.conf_dirs(args.config, args.results, args.html)
    where = f"--results {str(results)!r}" if args.results else f"results dir {str(results)!r}"
    if not results.is_dir():
        return _fail(f"{where} is not a directory (asv run or ltx2k store pull fills it)")
    records, problems = load_results(results)
    if not records:
        # A dashboard of nothing would only hide that the results are missing.
        return _fail(
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
        return _fail(
            f"asv publish failed (problems above): wrote {res.summary}, "
            f"but no new {res.html_dir / 'index.html'}"
        )
    print(f"wrote {res.html_dir / 'index.html'} and {res.summary}", file=sys.stderr)
    return EXIT_OK


# --- parser ----------------------------------------------------------------------


def _at_least(kind, minimum):
    """An argparse type: *kind* (int or float) no smaller than *minimum*."""

    def parse(text: str):
        value = kind(text)  # ValueError: argparse says "invalid int value: 'two'"
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{text!r} is below the minimum, {minimum}")
        return value

    parse.__name__ = kind.__name__
    return parse


def _positive(kind):
    """An argparse type: *kind* greater than zero."""

    def parse(text: str):
        value = _at_least(kind, 0)(text)
        if value == 0:
            raise argparse.ArgumentTypeError(f"{text!r} is not greater than 0")
        return value

    parse.__name__ = kind.__name__
    return parse


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="ltx2k",
        description="Check, benchmark and track the LTX-2 Triton kernels, GPU by GPU "
        "(asv underneath). `ltx2k COMMAND --help` for each command.",
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    s = sub.add_parser("check", help="check every kernel variant bit-exactly against its reference")
    s.set_defaults(func=cmd_check)

    s = sub.add_parser("machine", help="identify this GPU runner (asv machine name and fields)")
    s.add_argument("--write", action="store_true", help="write ~/.asv-machine.json for asv")
    s.add_argument(
        "--path", default=None, help="machine file to write (default ~/.asv-machine.json)"
    )
    s.add_argument("--name-only", action="store_true", help="print only the machine name")
    s.set_defaults(func=cmd_machine)

    s = sub.add_parser("quick", help="time every variant now, without asv, and print a table")
    s.add_argument("--kernel", action="append", help="split_rope or ada_values9 (repeatable)")
    s.add_argument("--shape", action="append", help="shape label to keep (repeatable)")
    s.add_argument(
        "--seconds", type=_positive(float), default=0.2, help="time budget per measurement"
    )
    s.set_defaults(func=cmd_quick)

    s = sub.add_parser(
        "all",
        help="the main job: gate, asv run, store, regress, publish (GPU or CPU interpreter)",
    )
    s.add_argument("--config", default="asv.conf.json", help="asv config (default asv.conf.json)")
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
    s.set_defaults(func=cmd_all)

    s = sub.add_parser(
        "run",
        help="asv run on this machine (GPU-derived name, samples recorded, offline env)",
        description="Everything after the options is passed to `asv run`, e.g. "
        "`ltx2k run HEAD^!`, `ltx2k run main~3..main`, `ltx2k run NEW`.",
    )
    s.add_argument("--config", default="asv.conf.json", help="asv config (default asv.conf.json)")
    s.add_argument("--dry-run", action="store_true", help="print the asv command only")
    s.add_argument(
        "asv_args",
        nargs=argparse.REMAINDER,
        metavar="ASV_ARGS",
        help="options and commit range for asv run, e.g. HEAD^! or main~3..main",
    )
    s.set_defaults(func=cmd_run)

    s = sub.add_parser(
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
    s.add_argument("--benchmarks", default="*.time_device_*", help="fnmatch over names")
    s.add_argument("--min-us", type=float, default=10.0, help="cells with a base >= this (10)")
    s.add_argument("--exclude", action="append", metavar="GLOB", help='e.g. "* compiled *"')
    s.add_argument(
        "--ratio",
        action="append",
        type=float,
        default=[],
        help="device-time threshold ratio(s) to try, e.g. 1.03 (repeatable)",
    )
    s.add_argument("--json", help="write the result here")
    s.add_argument("--plot", help="write the detection curve (PNG) here")
    s.set_defaults(func=cmd_power)

    s = sub.add_parser(
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
    s.add_argument("--config", default="asv.conf.json", help="asv config (default asv.conf.json)")
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
    s.set_defaults(func=cmd_shard_run)

    s = sub.add_parser(
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
    s.set_defaults(func=cmd_interference)

    s = sub.add_parser(
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
        "  1  error (bad arguments, unreadable thresholds file)\n"
        "  2  at least one regression on at least one machine\n"
        "  3  not enough data: nothing comparable (head or history missing on every\n"
        "     machine), or a machine named with --machine had nothing comparable\n"
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
    s.set_defaults(func=cmd_regress)
    _usage_error_exits_1(s)

    s = sub.add_parser(
        "confirm",
        help="re-measure flagged steps on this runner's GPU, each bisected to one commit",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="For every regression that --report flags on this machine (or the one "
        "step named by --benchmark/--good/--bad): bisect its range with `asv find` when it "
        "holds more than one commit, re-measure the commit found and the one before it as an "
        "interleaved A/B pair with `asv continuous`, and judge the pair with ltx2k regress's "
        "rule and the cell's threshold. Results go to --work, never to results/.",
        epilog="exit status:\n"
        "  0  nothing confirmed (or nothing flagged on this machine)\n"
        "  1  error (bad arguments, unknown commit, a cell that could not be measured)\n"
        "  2  at least one regression confirmed (wins over errors of other cells)",
    )
    s.add_argument(
        "--report", metavar="REGRESS.json", help="`ltx2k regress --json` report with steps"
    )
    s.add_argument(
        "--benchmark",
        metavar="NAME",
        help="instead of --report: an asv benchmark, full name or dotted suffix "
        "(e.g. SplitRope.time_device_cold)",
    )
    s.add_argument("--good", metavar="REF", help="with --benchmark: last commit without the change")
    s.add_argument("--bad", metavar="REF", help="with --benchmark: a commit with the change")
    s.add_argument(
        "--param",
        action="append",
        metavar="NAME=VALUE",
        help="with --benchmark: only these parameter values (repeatable), e.g. variant=blocked",
    )
    s.add_argument("--machine", help="asv machine name (default: this runner's, ltx2k machine)")
    s.add_argument("--config", default="asv.conf.json", help="asv config (default asv.conf.json)")
    s.add_argument(
        "--work",
        default=".asv/confirm",
        help="private asv config and results of the re-measurements (default .asv/confirm)",
    )
    s.add_argument(
        "--rounds",
        type=_at_least(int, 1),
        default=4,
        help="interleaved rounds per commit in the A/B (4)",
    )
    s.add_argument(
        "--max-cells",
        type=_at_least(int, 1),
        default=20,
        help="check at most this many flagged cells, worst ratio first (20)",
    )
    s.add_argument(
        "--thresholds", help="JSON thresholds file as for regress (a report's own per-cell wins)"
    )
    s.add_argument("--markdown", metavar="OUT.md", help="write the summary here, not to stdout")
    s.add_argument("--json", metavar="OUT.json", help="also write the result as JSON here")
    s.add_argument("--dry-run", action="store_true", help="print the asv commands, run nothing")
    s.set_defaults(func=cmd_confirm)
    _usage_error_exits_1(s)

    s = sub.add_parser("store", help="push/pull asv results to/from the shared git results store")
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
        "--retries", type=_at_least(int, 0), default=8, help="retries when the tip moved (8)"
    )
    t.add_argument(
        "--backoff", type=_at_least(float, 0), default=0.5, help="first retry delay, s (0.5)"
    )
    t.set_defaults(func=cmd_store_push)
    t = store_sub.add_parser("pull", help="assemble the store into a results dir for asv publish")
    t.add_argument("--store", required=True, help="git URL or path of the store repository")
    t.add_argument("--dest", default="results", help="results dir to fill (default results)")
    t.add_argument("--branch", default="asv-results", help="store branch (default asv-results)")
    t.add_argument("--overwrite", action="store_true", help="replace differing local files")
    t.set_defaults(func=cmd_store_pull)

    s = sub.add_parser("publish", help="build the dashboard: asv publish + html/summary.html")
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
        type=_at_least(int, 1),
        default=None,
        help="history plots: keep the last N commits",
    )
    s.set_defaults(func=cmd_publish)

    return p


def main(argv: list[str] | None = None) -> int:
    parser = _usage_error_exits_1(build_parser())
    # `ltx2k run --quick HEAD^!`: options ltx2k does not know belong to asv.
    args, extra = parser.parse_known_args(argv)
    if extra:
        if args.command != "run":
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
        args.asv_args = extra + list(args.asv_args)
    try:
        return args.func(args)
    except BrokenPipeError:
        # `ltx2k regress ... | head`: the reader left; nothing is wrong with the run.
        sys.stderr.close()
        return EXIT_OK
    except KeyboardInterrupt:
        return _fail("interrupted", EXIT_INTERRUPTED)
    except Exception as e:
        message = _user_error(e)
        if message is None:
            raise  # a bug: the traceback is what a report of it needs
        return _fail(_name_flags(message, _subparser(parser, args)))


if __name__ == "__main__":
    sys.exit(main())
