"""``ltx2k confirm`` from the targets to the outcome: bisect, re-measure, judge; and
:func:`run`, what the command does with its flags.

``ltx2k regress`` flags a cell from stored history: values of different
commits, measured in different processes, often hours apart. Before anyone
is told "commit X made this kernel slower on the H200", the runner of that
GPU checks it:

1. **Bisect.** When the step's range (the commits after ``last_good`` up to
   ``first_bad``) holds more than one commit, ``asv find`` searches it for
   the one commit (``--invert`` for higher-is-better metrics). asv find
   never names the oldest commit of its range, so the range given to it
   starts at ``last_good`` itself (``last_good^..first_bad``).
2. **Re-measure.** That commit and the one before it are measured again as
   an interleaved A/B pair by ``asv continuous`` (``--interleave-rounds``
   with several rounds: every round is a fresh process per commit, and the
   commits alternate order between rounds, so drift during the run and
   per-process effects hit both sides alike).
3. **Judge.** The pair is compared with the cell's own threshold and
   direction (as in the report), :mod:`ltx2k.confirm.verdict`.

The asv environment is the one ``ltx2k run`` sets up (:mod:`ltx2k.runner.asv_run`):
the machine file written from the GPU, ``TRITON_INTERPRET=1`` without a GPU,
a CUDA context held open on a GPU, the config's launch method and env plugin.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from ltx2k.confirm.asv import (
    Runner,
    asv_problem,
    check_work,
    config_repo,
    continuous_command,
    find_command,
    parse_found,
    private_config,
    results_dir,
    say,
    stream,
)
from ltx2k.confirm.report import Outcome, format_line
from ltx2k.confirm.targets import (
    Plan,
    Target,
    explicit_target,
    plan,
    read_report,
    report_machines,
    subject,
)
from ltx2k.confirm.verdict import (
    CellResult,
    higher_is_better,
    judge,
    threshold_of,
    with_process_values,
)
from ltx2k.history import names

if TYPE_CHECKING:
    from ltx2k.analysis.thresholds import Thresholds

DEFAULT_ROUNDS = 4
DEFAULT_MAX_CELLS = 20
DEFAULT_WORK = ".asv/confirm"

Pair = tuple[str, str]  # (before, after): the commits of one A/B


@dataclass(frozen=True)
class _Context:
    """What every step of one confirm run shares."""

    conf: Path  # the private asv config (the original in a dry run)
    repo: Path
    machine: str
    env: dict
    runner: Runner
    thresholds: Thresholds
    rounds: int
    dry_run: bool


def confirm(
    targets: Sequence[Target],
    *,
    machine: str,
    config="asv.conf.json",
    work=DEFAULT_WORK,
    rounds: int = DEFAULT_ROUNDS,
    thresholds=None,
    max_cells: int = DEFAULT_MAX_CELLS,
    source: dict | None = None,
    notes: Sequence[str] = (),
    env: dict | None = None,
    runner: Runner | None = None,
    load: Callable | None = None,
    setup: Callable[[], None] | None = None,
    dry_run: bool = False,
) -> Outcome:
    """Bisect (where needed), re-measure and judge every target on *machine*.

    ``runner(cmd, env) -> (exit status, output)`` runs asv (default:
    :func:`ltx2k.confirm.asv.stream`); ``load(results_dir) -> records`` reads its
    results (default: ``load_results``); ``setup()`` runs once every target is
    resolved, before the first asv command.
    """
    thresholds = _checked_options(rounds, max_cells, thresholds)
    env = dict(os.environ if env is None else env)
    outcome = Outcome(machine, dict(source or {}), notes=list(notes))
    chosen = _choose(targets, max_cells, outcome)

    conf_src = Path(os.fspath(config))
    if not conf_src.is_file():
        raise FileNotFoundError(
            f"--config {os.fspath(config)!r} does not exist (run from the repo root)"
        )
    repo = config_repo(conf_src)
    # Every commit is checked before any measuring: a bad report fails in seconds.
    plans = []
    for t in chosen:
        what = f"{outcome.source.get('report', 'report')}: {t.label}: " if t.exact else ""
        plans.append(plan(t, repo, what=what))
    if not plans:
        return outcome
    # Names and --param values the suite as last run here lacks (notes: the commits'
    # suites may differ), before any measuring.
    outcome.notes.extend(unmatched_in_suite(chosen, results_dir(conf_src)))
    conf = conf_src if dry_run else _prepare(conf_src, work, machine, setup)

    ctx = _Context(conf, repo, machine, env, runner or stream, thresholds, rounds, dry_run)
    pairs = _bisect(ctx, plans, outcome)
    measured = _remeasure(ctx, pairs)
    if dry_run:
        outcome.dry_run = True
        return outcome
    records = (load or _load_results)(results_dir(conf))
    _judge_pairs(ctx, pairs, measured, records, outcome)
    return outcome


def unmatched_in_suite(targets: Sequence[Target], results: Path) -> list[str]:
    """What a dry run can say of the names before asv runs: targets whose name matches no
    benchmark, or several, of the suite as last run into *results* (its benchmarks.json).
    Notes, not errors: the suite at the target commits may differ from the last run's."""
    from ltx2k.history.records import load_benchmarks_json

    suite = load_benchmarks_json(results, [])  # missing or unusable: nothing to say
    names = list(suite)
    if not names:
        return []
    notes = []
    for t in targets:
        hits = [n for n in names if replace(t, params=None).matches(n, ())]
        if hits and t.params and not t.exact:
            notes += _unknown_params(t, [suite[n] for n in hits], results)
        if not hits:
            notes.append(
                f"{t.label}: no benchmark of this name in {results / 'benchmarks.json'} "
                "(the suite as last run here); asv will say whether the commits have one"
            )
        elif len(hits) > 1 and not t.exact:
            notes.append(
                f"{t.label}: matches {len(hits)} benchmarks of the suite as last run here "
                f"({', '.join(sorted(hits)[:3])}{', ...' if len(hits) > 3 else ''}); "
                "asv will refuse it: give the full name"
            )
    return notes


def _unknown_params(t: Target, metas: Sequence, results: Path) -> list[str]:
    """--param NAME=VALUE pairs that no matching benchmark has: asv's -b regex carries the
    values only, so a wrong name or value would select nothing, silently."""
    notes = []
    for name, value in t.params:
        known = [m for m in metas if isinstance(m, dict) and name in (m.get("param_names") or ())]
        if not known:
            notes.append(
                f"{t.label}: --param {name}: no parameter of this name in "
                f"{results / 'benchmarks.json'}; asv would select nothing"
            )
            continue
        values = set()
        for m in known:
            axis = m["param_names"].index(name)
            params = m.get("params") or []
            if axis < len(params) and isinstance(params[axis], list):
                values |= {str(v).strip("'\"") for v in params[axis]}
        if values and value not in values:
            shown = ", ".join(sorted(values)[:6]) + (", ..." if len(values) > 6 else "")
            notes.append(
                f"{t.label}: --param {name}={value}: not a value of {name} in "
                f"{results / 'benchmarks.json'} ({shown}); asv would select nothing"
            )
    return notes


def _checked_options(rounds, max_cells, thresholds) -> Thresholds:
    """The Thresholds to judge with, once --rounds and --max-cells are known to be sane."""
    from ltx2k.analysis.thresholds import Thresholds

    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        raise ValueError(f"--rounds must be an integer >= 1, got {rounds!r}")
    if isinstance(max_cells, bool) or not isinstance(max_cells, int) or max_cells < 1:
        raise ValueError(f"--max-cells must be an integer >= 1, got {max_cells!r}")
    if thresholds is None:
        return Thresholds()
    if isinstance(thresholds, Thresholds):
        return thresholds
    try:
        return Thresholds.load(thresholds)
    except TypeError as e:  # a JSON value of the wrong type
        raise ValueError(f"--thresholds: {e}") from None


def _choose(targets: Sequence[Target], max_cells: int, outcome: Outcome) -> list[Target]:
    """The worst *max_cells* targets; the rest go into *outcome* as not checked."""
    ordered = sorted(targets, key=_badness, reverse=True)
    chosen, left = ordered[:max_cells], ordered[max_cells:]
    for t in left:
        outcome.cells.append(
            CellResult(
                t.benchmark, t.params or (), "not-checked", flagged_ratio=t.flagged_ratio,
                message=f"beyond --max-cells {max_cells}",
            )
        )  # fmt: skip
    return chosen


def _badness(t: Target) -> float:
    r = t.flagged_ratio
    if r is None or r <= 0:
        return 0.0
    return 1 / r if t.higher_is_better else r


def _prepare(conf_src: Path, work, machine: str, setup: Callable[[], None] | None) -> Path:
    """The private config in *work*, its results of *machine* emptied; then *setup*."""
    conf = private_config(conf_src, work)
    # A clean slate: the verdict must read what this run measured, never a value
    # left by an earlier, interrupted one.
    results = results_dir(conf).resolve()
    mine = (results / machine).resolve()
    if mine.parent != results:  # a name that is a path: never empty anything outside
        raise ValueError(f"machine {machine!r} is not a machine directory name")
    shutil.rmtree(mine, ignore_errors=True)
    if setup is not None:
        setup()
    return conf


def _bisect(ctx: _Context, plans: Sequence[Plan], outcome: Outcome) -> dict[Pair, list[Plan]]:
    """Each plan's pair: ranges of more than one commit bisected by asv find, one search
    per distinct question. A search that names no commit is an error cell of *outcome*."""
    pairs: dict[Pair, list[Plan]] = {}
    found_cache: dict[tuple, tuple[str | None, str]] = {}
    for i, p in enumerate(plans):
        t = p.target
        outcome.notes.extend(f"{t.label}: {n}" for n in p.notes)
        if not p.bisect:
            pairs.setdefault((p.commits[0], p.commits[1]), []).append(p)
            continue
        invert = higher_is_better(t, ctx.thresholds)
        key = (p.find_range, t.regex(), invert)
        if key not in found_cache:
            say(
                f"[{i + 1}/{len(plans)}] bisecting {t.label} over {len(p.commits) - 1} commits "
                f"{p.commits[0][:8]}..{p.commits[-1][:8]} (asv find{' --invert' if invert else ''})"
            )
            cmd = find_command(ctx.conf, ctx.machine, p, invert=invert)
            if ctx.dry_run:
                say("+ " + " ".join(cmd))
                say("dry run: asv find's answer is unknown; the A/B below assumes first_bad")
                found_cache[key] = (p.commits[-1], "")
            else:
                rc, output = ctx.runner(cmd, ctx.env)
                found_cache[key] = (
                    parse_found(output, p.commits),
                    asv_problem(output, t, rc, "find"),
                )
        found, problem = found_cache[key]
        if found is None:
            outcome.cells.append(_error_cell(p, problem or "asv find named no commit of the range"))
            continue
        say(f"{t.label}: asv find names {found[:12]} {subject(ctx.repo, found)}")
        idx = p.commits.index(found)
        pairs.setdefault((p.commits[idx - 1], found), []).append(p)
    return pairs


def _remeasure(ctx: _Context, pairs: dict[Pair, list[Plan]]) -> dict[Pair, tuple[int, str, Path]]:
    """Each pair measured once, all of its cells in one asv continuous: its exit status,
    output and process-values file. Nothing in a dry run, which prints the commands."""
    from ltx2k.runner import process_values

    measured: dict[Pair, tuple[int, str, Path]] = {}
    for n, ((before, after), group) in enumerate(pairs.items(), 1):
        regexes = list(dict.fromkeys(p.target.regex() for p in group))
        factor = min(threshold_of(p.target, ctx.thresholds) for p in group)
        say(
            f"[pair {n}/{len(pairs)}] re-measuring {before[:8]} -> {after[:8]} "
            f"({len(group)} cell(s), {ctx.rounds} interleaved rounds, asv continuous)"
        )
        cmd = continuous_command(
            ctx.conf, ctx.machine, before, after, regexes, factor=factor, rounds=ctx.rounds
        )
        if ctx.dry_run:
            say("+ " + " ".join(cmd))
            continue
        # Each pair its own file, emptied first: values of another pair's rounds, or
        # left by an interrupted run, were not interleaved with this pair and must not count.
        values_path = Path(ctx.conf).parent / f"process-values-{n}.jsonl"
        values_path.unlink(missing_ok=True)
        rc, output = ctx.runner(cmd, {**ctx.env, process_values.ENV: str(values_path)})
        measured[(before, after)] = (rc, output, values_path)
    return measured


def _load_results(path) -> list:
    from ltx2k.history.records import load_results

    return load_results(path)[0] if Path(path).is_dir() else []


def _judge_pairs(
    ctx: _Context,
    pairs: dict[Pair, list[Plan]],
    measured: dict[Pair, tuple[int, str, Path]],
    records,
    outcome: Outcome,
) -> None:
    """Every cell of every pair judged from the private results, into *outcome*."""
    for (before, after), group in pairs.items():
        rc, output, values_path = measured[(before, after)]
        pair_records, sampled, bad = with_process_values(records, values_path, before, after)
        if bad:
            outcome.notes.append(
                f"{values_path}: {bad} line(s) were not a complete record "
                "(a measuring process cut short?) and were skipped"
            )
        for p in group:
            t = p.target
            cells = judge(pair_records, t, before, after, ctx.machine, ctx.thresholds, sampled)
            problem = asv_problem(output, t, rc, "continuous")
            if not cells:
                outcome.cells.append(
                    _error_cell(p, problem or f"asv continuous stored no result (exit {rc})")
                )
                continue
            for c in cells:
                c.bisected = p.bisect
                c.range_size = len(p.commits) - 1
                c.subject = subject(ctx.repo, after)
                if c.verdict == "no-data" and rc not in (0, 1):
                    c.message = f"asv continuous exited {rc}; see its log"
                outcome.cells.append(c)


def _error_cell(p: Plan, message: str) -> CellResult:
    t = p.target
    return CellResult(
        t.benchmark,
        t.params or (),
        "error",
        bisected=p.bisect,
        range_size=len(p.commits) - 1,
        flagged_ratio=t.flagged_ratio,
        message=message,
    )


# --- entry point for the CLI -----------------------------------------------------------------


def run(
    *,
    report=None,
    benchmark: str | None = None,
    good: str | None = None,
    bad: str | None = None,
    params: Sequence[str] = (),
    machine_name: str | None = None,
    config="asv.conf.json",
    work=DEFAULT_WORK,
    rounds: int = DEFAULT_ROUNDS,
    thresholds=None,
    max_cells: int = DEFAULT_MAX_CELLS,
    dry_run: bool = False,
) -> Outcome:
    """What ``ltx2k confirm`` does: targets from a report or the flags, then :func:`confirm`."""
    from ltx2k import runtime
    from ltx2k.runner import machine

    explicit = [benchmark, good, bad]
    if report is not None and any(x is not None for x in explicit):
        raise ValueError("pass either --report FILE or --benchmark/--good/--bad, not both")
    if report is None and not all(x is not None for x in explicit):
        flags = ("--benchmark", "--good", "--bad")
        missing = ", ".join(f for f, x in zip(flags, explicit, strict=True) if x is None)
        raise ValueError(
            f"pass --report FILE, or all of --benchmark, --good and --bad (missing {missing})"
        )
    if params and report is not None:
        raise ValueError("--param narrows --benchmark; a report names its cells itself")
    if report is not None and not Path(os.fspath(report)).is_file():
        what = "is a folder" if Path(os.fspath(report)).is_dir() else "no such file"
        raise ValueError(
            f"--report {os.fspath(report)}: {what}; pass the JSON report of ltx2k regress --json"
        )
    if not Path(os.fspath(config)).is_file():
        raise FileNotFoundError(
            f"--config {os.fspath(config)!r} does not exist (run from the repo root)"
        )
    check_work(work)  # a dry run says so too, before it is run for real

    if machine_name is not None:
        # The name becomes a folder under the results that confirm empties first: a path
        # ("../x", "/x") must never reach that rmtree.
        why = names.file_name(machine_name, "--machine")
        if why:
            raise ValueError(f"{why} (a machine name, not a path)")
    info = machine.identify()
    on_gpu = info.get("gpu_count", "0") != "0"
    if machine_name:
        info["machine"] = machine_name
    name = info["machine"]

    notes: list[str] = []
    if report is not None:
        targets, skipped = read_report(report, name)
        known = report_machines(report)
        if machine_name is not None and known is not None and name not in known:
            raise ValueError(
                f"--machine {name!r} is not a machine of --report {os.fspath(report)} "
                f"(it has: {', '.join(sorted(known)) or 'none'})"
            )
        notes += [f"{s.label}: {s.why}; not checked" for s in skipped]
        source = {"report": os.fspath(report)}
        if not targets:
            say(f"no flagged regression with a step on machine {name!r} in {os.fspath(report)}")
    else:
        targets = [explicit_target(benchmark, good, bad, params)]
        source = {"benchmark": benchmark, "good": good, "bad": bad, "params": list(params)}

    env = dict(os.environ)
    env.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
    if not on_gpu:
        env["TRITON_INTERPRET"] = "1"
    with runtime.context_keeper(bool(targets) and on_gpu and not dry_run):
        outcome = confirm(
            targets,
            machine=name,
            config=config,
            work=work,
            rounds=rounds,
            thresholds=thresholds,
            max_cells=max_cells,
            source=source,
            notes=notes,
            env=env,
            setup=lambda: machine.write_asv_machine_file(info),
            dry_run=dry_run,
        )
    for c in outcome.cells:
        say(format_line(c))
    return outcome
