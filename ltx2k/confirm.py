"""``ltx2k confirm``: re-measure a flagged step on this runner, and bisect it to one commit.

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
3. **Judge.** The pair is compared by :func:`ltx2k.analysis.regress.compare`
   with the cell's own threshold and direction (as in the report): the step
   is *confirmed* only if it is a regression again. asv keeps one number per
   commit of a ``track_*`` benchmark; where the benchmark also wrote every
   measuring process's value (:mod:`ltx2k.process_values`), those values are
   its samples, judged by asv's rank test at the detector's minimum step.

asv runs with a private copy of asv.conf.json whose ``results_dir`` lies in
the work directory: the re-measurements never mix with, or overwrite, the
runner's own history in ``results/`` (which ``runner_bench.sh`` pushes to the
store), and the verdict reads exactly what this run measured. ``env_dir`` is
the config's own, so the per-commit builds are shared with ``ltx2k run``.

The asv environment is the one ``ltx2k run`` sets up (:mod:`ltx2k.asv_run`):
the machine file written from the GPU, ``TRITON_INTERPRET=1`` without a GPU,
a CUDA context held open on a GPU, the config's launch method and env plugin.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from ltx2k import git

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_CONFIRMED = 2

DEFAULT_ROUNDS = 4
DEFAULT_MAX_CELLS = 20
DEFAULT_WORK = ".asv/confirm"

_FULL_SHA = re.compile(r"[0-9a-f]{40}")
# What a user may pass as --good/--bad: a revision, never an option.
_REVISION = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/~^@{}-]*")
_FOUND = re.compile(r"Greatest (?:regression|improvement) found: ([0-9a-f]{7,40})")
# asv's messages when -b / the benchmark name selects nothing or too much.
_NO_MATCH = re.compile(r"No benchmarks selected|benchmark not found")
_MANY_MATCH = re.compile(r"matches more than one benchmark")

Runner = Callable[[Sequence[str], dict], "tuple[int, str]"]


def _say(msg: str) -> None:
    print(f"ltx2k confirm: {msg}", file=sys.stderr, flush=True)


# --- what to confirm -------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """One flagged cell (or, from the command line, a benchmark) and its step."""

    benchmark: str  # full asv name; from the command line also a dotted suffix
    params: tuple[tuple[str, str], ...] | None  # None: every parameter combination
    last_good: str
    first_bad: str
    range: tuple[str, ...] = ()  # as the report gave it; () from the command line
    higher_is_better: bool | None = None  # None: the thresholds' default for the name
    threshold: float | None = None  # None: the thresholds' default for the name
    exact: bool = True  # full name and the complete parameter combination (a report cell)
    flagged_ratio: float | None = None  # the report's ratio, for ordering and the summary

    @property
    def label(self) -> str:
        values = " ".join(v for _, v in self.params or ())
        return f"{self.benchmark} {values}".strip()

    def regex(self) -> str:
        """asv ``-b`` regex: asv matches it against ``name('value', 'value')``."""
        name = re.escape(self.benchmark)
        head = f"^{name}" if self.exact else rf"(?:^|\.){name}"
        if self.params is None:
            return head + r"(?:\(.*\))?$"
        if not self.params:
            return head + "$"
        if self.exact:
            return head + r"\(" + ", ".join(_value_re(v) for _, v in self.params) + r"\)$"
        # A subset from --param: asv's names carry values, not parameter names,
        # so each value must appear as one whole item of the list, anywhere.
        looks = "".join(rf"(?=(?:.*, )?{_value_re(v)}(?:, |\)$))" for _, v in self.params)
        return head + r"\(" + looks

    def matches(self, benchmark: str, params: tuple[tuple[str, str], ...]) -> bool:
        if self.exact:
            name_ok = benchmark == self.benchmark
        else:
            name_ok = benchmark == self.benchmark or benchmark.endswith("." + self.benchmark)
        if not name_ok or self.params is None:
            return name_ok
        if self.exact:
            return tuple(params) == self.params
        return set(self.params) <= set(params)


def _value_re(value: str) -> str:
    # asv writes parameter values as repr(): 'blocked' for strings, 4 for ints.
    v = re.escape(value)
    return f"(?:'{v}'|\"{v}\"|{v})"


@dataclass(frozen=True)
class Skipped:
    label: str
    why: str


def read_report(path, machine: str) -> tuple[list[Target], list[Skipped]]:
    """The flagged regression cells of *machine* that carry a step, and those skipped."""
    p = os.fspath(path)
    where = f"--report {p}"
    try:
        with open(p, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        raise ValueError(f"{where}: no such file") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{where}: not valid JSON ({e})") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"{where}: cannot be read ({e})") from None
    rows = data.get("rows") if isinstance(data, dict) else None
    if not isinstance(rows, list):
        raise ValueError(f"{where}: not an `ltx2k regress --json` report (no 'rows' list)")

    targets: list[Target] = []
    skipped: list[Skipped] = []
    flagged_without_key = 0
    for i, row in enumerate(rows):
        cell = (row.get("cells") or {}).get(machine) if isinstance(row, dict) else None
        if not isinstance(cell, dict) or cell.get("flag") != "regression":
            continue
        what = f"{where}: rows[{i}]"
        bench = row.get("benchmark")
        if not isinstance(bench, str) or not bench:
            raise ValueError(f"{what}: no 'benchmark' name")
        params = _report_params(row.get("params"), what)
        label = Target(bench, params, "", "").label
        if "step" not in cell:
            flagged_without_key += 1
            continue
        step = cell["step"]
        if step is None:
            skipped.append(Skipped(label, "flagged, but no step was found in its history"))
            continue
        if not isinstance(step, dict):
            raise ValueError(f"{what}: 'step' of {machine} is not an object")
        if step.get("direction", "regression") != "regression":
            skipped.append(Skipped(label, f"its step is an {step.get('direction')}"))
            continue
        good = _report_sha(step.get("last_good"), f"{what} step.last_good")
        bad = _report_sha(step.get("first_bad"), f"{what} step.first_bad")
        rng = step.get("range") or []
        if not isinstance(rng, list):
            raise ValueError(f"{what}: step.range is not a list")
        rng = tuple(_report_sha(c, f"{what} step.range") for c in rng)
        higher = row.get("higher_is_better")
        thr = row.get("threshold")
        ratio = cell.get("ratio")
        targets.append(
            Target(
                benchmark=bench,
                params=params,
                last_good=good,
                first_bad=bad,
                range=rng,
                higher_is_better=higher if isinstance(higher, bool) else None,
                threshold=float(thr) if isinstance(thr, (int, float)) and thr >= 1 else None,
                exact=True,
                flagged_ratio=float(ratio) if isinstance(ratio, (int, float)) else None,
            )
        )
    if flagged_without_key and not targets and not skipped:
        raise ValueError(
            f"{where}: its {flagged_without_key} flagged cell(s) on {machine} carry no 'step' "
            "(the report predates step detection in ltx2k regress); regenerate it, or name "
            "the step yourself with --benchmark, --good and --bad"
        )
    return targets, skipped


def _report_params(value, what: str) -> tuple[tuple[str, str], ...]:
    if value is None:
        return ()
    ok = isinstance(value, list) and all(
        isinstance(p, (list, tuple)) and len(p) == 2 and all(isinstance(x, str) for x in p)
        for p in value
    )
    if not ok:
        raise ValueError(f"{what}: 'params' must be a list of [name, value] pairs")
    return tuple((str(n), str(v)) for n, v in value)


def _report_sha(value, what: str) -> str:
    if not isinstance(value, str) or not _FULL_SHA.fullmatch(value):
        raise ValueError(f"{what}: expected a full commit sha, got {value!r}")
    return value


def explicit_target(benchmark: str, good: str, bad: str, params: Sequence[str] = ()) -> Target:
    """A target from ``--benchmark NAME --good REF --bad REF [--param NAME=VALUE ...]``."""
    if not benchmark or not benchmark.strip() or benchmark.startswith("-") or "\n" in benchmark:
        raise ValueError(f"--benchmark {benchmark!r}: expected an asv benchmark name")
    pairs = []
    for spec in params:
        name, sep, value = spec.partition("=")
        if not sep or not name or not value:
            raise ValueError(f"--param {spec!r}: expected NAME=VALUE, e.g. variant=blocked")
        pairs.append((name, value))
    return Target(
        benchmark=benchmark.strip(),
        params=tuple(pairs) if pairs else None,
        last_good=good,
        first_bad=bad,
        exact=False,
    )


# --- git -----------------------------------------------------------------------------------


def resolve_commit(repo, ref: str, what: str) -> str:
    """Full sha of *ref*, or ValueError naming *what* (the flag or report field)."""
    if not isinstance(ref, str) or not _REVISION.fullmatch(ref):
        raise ValueError(f"{what}: not a git revision: {ref!r}")
    proc = git.run(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    if proc.returncode != 0 or not proc.stdout.strip():
        raise ValueError(
            f"{what}: commit {ref!r} is unknown to git in {os.fspath(repo)} "
            "(a shallow clone? fetch the full history, e.g. actions/checkout fetch-depth: 0)"
        )
    return proc.stdout.strip()


def subject(repo, sha: str) -> str:
    proc = git.run(repo, "log", "-1", "--format=%s", sha)
    return proc.stdout.strip() if proc.returncode == 0 else ""


@dataclass(frozen=True)
class Plan:
    """A target with its commits resolved in git."""

    target: Target
    commits: tuple[str, ...]  # last_good, then the range (first-parent, oldest first)
    find_range: str  # the asv find range that starts at last_good itself
    notes: tuple[str, ...] = ()

    @property
    def bisect(self) -> bool:
        return len(self.commits) > 2


def plan(target: Target, repo, *, what: str = "") -> Plan:
    """Resolve the target's step in git; decide whether it needs a bisection."""
    good_flag = what + "step.last_good" if what else "--good"
    bad_flag = what + "step.first_bad" if what else "--bad"
    good = resolve_commit(repo, target.last_good, good_flag)
    bad = resolve_commit(repo, target.first_bad, bad_flag)
    if good == bad:
        raise ValueError(f"{good_flag} and {bad_flag} are the same commit {good[:12]}")
    anc = git.run(repo, "merge-base", "--is-ancestor", good, bad)
    if anc.returncode == 1:
        raise ValueError(
            f"{good_flag} {good[:12]} is not an ancestor of {bad_flag} {bad[:12]}: "
            "no step to bisect"
        )
    if anc.returncode != 0:
        raise ValueError(f"git merge-base failed in {os.fspath(repo)}: {anc.stderr.strip()}")
    listed = git.run(repo, "rev-list", "--first-parent", "--reverse", f"{good}..{bad}")
    rng = tuple(listed.stdout.split())
    parent = git.run(repo, "rev-parse", "--verify", "--quiet", f"{rng[0]}^1") if rng else None
    if not rng or parent is None or parent.stdout.strip() != good:
        # asv find walks first parents; a good commit off that line has no place in it.
        raise ValueError(
            f"{good_flag} {good[:12]} is not on the first-parent line of {bad_flag} {bad[:12]}"
        )
    notes = []
    if target.range and target.range != rng:
        notes.append(
            f"the report's range ({len(target.range)} commit(s)) differs from git's "
            f"first-parent range ({len(rng)}); git's is used"
        )
    has_parent = git.run(repo, "rev-parse", "--verify", "--quiet", f"{good}^1").returncode == 0
    # With a root good, everything up to bad is exactly good + the range.
    find_range = f"{good}^..{bad}" if has_parent else bad
    return Plan(
        replace(target, last_good=good, first_bad=bad), (good, *rng), find_range, tuple(notes)
    )


# --- asv commands ----------------------------------------------------------------------------


def find_command(config, machine: str, p: Plan, *, invert: bool) -> list[str]:
    cmd = [sys.executable, "-m", "asv", "find", "--config", os.fspath(config)]
    cmd += ["--machine", machine, "--show-stderr"]
    if invert:
        cmd.append("--invert")
    return cmd + [p.find_range, p.target.regex()]


def continuous_command(
    config,
    machine: str,
    before: str,
    after: str,
    regexes: Sequence[str],
    *,
    factor: float,
    rounds: int,
) -> list[str]:
    cmd = [sys.executable, "-m", "asv", "continuous", "--config", os.fspath(config)]
    cmd += ["--machine", machine, "--record-samples", "--interleave-rounds"]
    # The suite runs one round per commit (rounds = 1, to keep a full run short);
    # an A/B of a few cells can afford several, interleaved across the two commits.
    cmd += ["-a", f"rounds={rounds}", "--factor", f"{factor:g}", "--split", "--show-stderr"]
    for r in regexes:
        cmd += ["-b", r]
    return cmd + [before, after]


def private_config(config, work) -> Path:
    """asv.conf.json with results in *work*/results; every other path the original's."""
    from ltx2k import asv_compat

    src = Path(os.fspath(config))
    if not src.is_file():
        raise FileNotFoundError(
            f"--config {os.fspath(config)!r} does not exist (run from the repo root)"
        )
    root = src.resolve().parent
    conf = asv_compat.load_json(src, js_comments=True)
    for key in ("repo", "benchmark_dir", "env_dir", "html_dir"):
        value = conf.get(key)
        if isinstance(value, str) and "://" not in value and not value.startswith("git@"):
            conf[key] = str((root / value).resolve())
    work = Path(os.fspath(work)).resolve()
    own = (root / conf.get("results_dir", "results")).resolve()
    if work / "results" == own:
        raise ValueError(
            f"--work {os.fspath(work)}: its results/ is the config's results_dir {own}; "
            "confirm never writes into the runner's history"
        )
    work.mkdir(parents=True, exist_ok=True)
    conf["results_dir"] = str(work / "results")
    # asv imports a relative plugin (".ltx2k.asv_env") from the config's folder.
    for plugin in conf.get("plugins") or ():
        if isinstance(plugin, str) and plugin.startswith("."):
            top = plugin[1:].split(".")[0]
            link = work / top
            if not link.exists() and not link.is_symlink():
                link.symlink_to(root / top, target_is_directory=True)
    out = work / "asv.conf.json"
    out.write_text(json.dumps(conf, indent=4) + "\n")
    return out


def stream(cmd: Sequence[str], env: dict) -> tuple[int, str]:
    """Run *cmd*, echoing its output to stderr as it comes (progress), and keep it."""
    _say("+ " + " ".join(cmd))
    proc = subprocess.Popen(
        list(cmd), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        errors="replace",
    )  # fmt: skip
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:
        lines.append(line)
        sys.stderr.write(line)
    sys.stderr.flush()
    return proc.wait(), "".join(lines)


def parse_found(output: str, commits: Sequence[str]) -> str | None:
    """The commit asv find named, as a full sha of *commits* (never the first)."""
    found = _FOUND.findall(output)
    if not found:
        return None
    named = [c for c in commits[1:] if c.startswith(found[-1])]
    return named[0] if len(named) == 1 else None


# --- verdict ---------------------------------------------------------------------------------


@dataclass
class CellResult:
    benchmark: str
    params: tuple[tuple[str, str], ...]
    verdict: str  # "confirmed" | "not-confirmed" | "no-data" | "error" | "not-checked"
    commit: str | None = None  # the commit judged (after)
    before: str | None = None
    subject: str = ""
    bisected: bool = False
    range_size: int = 0  # commits in the step's range
    flag: str | None = None  # regress.compare's flag of the re-measured pair
    before_value: float | None = None
    after_value: float | None = None
    ratio: float | None = None  # after / before
    p_value: float | None = None
    test: str | None = None
    unit: str = ""
    threshold: float | None = None
    higher_is_better: bool | None = None
    flagged_ratio: float | None = None
    message: str = ""

    @property
    def label(self) -> str:
        values = " ".join(v for _, v in self.params)
        return f"{self.benchmark} {values}".strip()

    def to_json(self) -> dict:
        return {
            "benchmark": self.benchmark,
            "params": [list(p) for p in self.params],
            "verdict": self.verdict,
            "commit": self.commit,
            "before": self.before,
            "subject": self.subject,
            "bisected": self.bisected,
            "range_size": self.range_size,
            "flag": self.flag,
            "before_value": self.before_value,
            "after_value": self.after_value,
            "ratio": self.ratio,
            "p_value": self.p_value,
            "test": self.test,
            "unit": self.unit,
            "threshold": self.threshold,
            "higher_is_better": self.higher_is_better,
            "flagged_ratio": self.flagged_ratio,
            "message": self.message,
        }


def _thresholds_for(target: Target, base):
    """The report's threshold and direction for this cell first, *base* for the rest."""
    from ltx2k.analysis.thresholds import Thresholds

    ratios, directions = base.ratios, base.directions
    if target.exact and target.threshold is not None:
        ratios = ((target.benchmark, target.threshold), *ratios)
    if target.exact and target.higher_is_better is not None:
        direction = "higher" if target.higher_is_better else "lower"
        directions = ((target.benchmark, direction), *directions)
    return Thresholds(ratios=ratios, directions=directions, alpha=base.alpha)


def with_process_values(records: Iterable, path, before: str, after: str):
    """*records*, where a cell has every process's values for both commits of the pair
    (``ltx2k.process_values``, written by ``track_*`` benchmarks that asv keeps one
    number of), with those values as its samples and asv's statistics of them;
    the set of (benchmark, params) so replaced; and the number of lines of *path*
    that were not a complete record (skipped).

    A cell with values on one side only keeps asv's numbers on both sides: one
    sampled side against a single number is no rank test.
    """
    from ltx2k import asv_compat, process_values

    values, bad = process_values.load(path)
    records = list(records)

    def key(r, commit: str):
        return (commit, r.benchmark, tuple(v for _, v in r.params))

    both = {
        (r.benchmark, r.params)
        for r in records
        if r.commit == before and key(r, before) in values and key(r, after) in values
    }
    out = []
    for r in records:
        if r.commit not in (before, after) or (r.benchmark, r.params) not in both:
            out.append(r)
            continue
        samples = values[key(r, r.commit)]
        median, st = asv_compat.compute_stats(samples, 1)
        out.append(
            replace(
                r,
                value=median,
                samples=tuple(samples),
                ci_99=(st["ci_99_a"], st["ci_99_b"]),
                q_25=st["q_25"],
                q_75=st["q_75"],
                number=1,
                repeat=len(samples),
            )
        )
    return out, both, bad


def judge(
    records: Iterable,
    target: Target,
    before: str,
    after: str,
    machine: str,
    thresholds=None,
    sampled: frozenset | set = frozenset(),
):
    """Cell results of the re-measured pair: regress.compare(head=after, baseline=before).

    Cells in *sampled* (``with_process_values``) are judged on every process's value
    with a rank test, so their minimum size is the detector's minimum step for the
    benchmark (what an interleaved A/B of processes was measured to resolve,
    docs/history.md "Host latency"), not the commit-vs-commit ratio that stands in
    for a test when there are no samples.
    """
    from ltx2k.analysis.thresholds import Thresholds

    base = thresholds if thresholds is not None else Thresholds()
    mine = [
        r
        for r in records
        if r.machine == machine
        and r.commit in (before, after)
        and target.matches(r.benchmark, r.params)
    ]
    if not mine:
        return []
    groups = (
        ([r for r in mine if (r.benchmark, r.params) not in sampled], False),
        ([r for r in mine if (r.benchmark, r.params) in sampled], True),
    )
    out = []
    for group, by_process in groups:
        if group:
            out += _judge_group(group, target, before, after, machine, base, by_process)
    return out


def _judge_group(mine, target, before, after, machine, base, by_process: bool):
    from ltx2k.analysis import regress

    thresholds = _thresholds_for(target, base)
    if by_process:
        steps = tuple((r.benchmark, base.step_for(r.benchmark)) for r in mine)
        thresholds = replace(thresholds, ratios=steps + thresholds.ratios)
    report = regress.compare(
        mine, after, baseline=before, machines=[machine], thresholds=thresholds
    )
    out = []
    for row in report.rows:
        c = row.cells[machine]
        verdict = {
            "regression": "confirmed",
            "insufficient": "no-data",
        }.get(c.flag, "not-confirmed")
        out.append(
            CellResult(
                benchmark=row.benchmark,
                params=row.params,
                verdict=verdict,
                commit=after,
                before=before,
                flag=c.flag,
                before_value=c.base,
                after_value=c.head,
                ratio=c.ratio,
                p_value=c.p_value,
                test=c.test,
                unit=row.unit,
                threshold=row.threshold,
                higher_is_better=row.higher_is_better,
                flagged_ratio=target.flagged_ratio,
                message="no value on one side"
                if c.flag == "insufficient"
                else "judged on every measuring process's value"
                if by_process
                else "",
            )
        )
    return out


# --- the whole run ---------------------------------------------------------------------------


@dataclass
class Outcome:
    machine: str
    source: dict
    cells: list[CellResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    dry_run: bool = False

    @property
    def confirmed(self) -> list[CellResult]:
        return [c for c in self.cells if c.verdict == "confirmed"]

    @property
    def failed(self) -> list[CellResult]:
        return [c for c in self.cells if c.verdict in ("error", "no-data")]

    @property
    def status(self) -> str:
        if self.dry_run:
            return "dry-run"
        if self.confirmed:
            return "confirmed"
        if self.failed:
            return "error"
        if not self.cells:
            return "nothing-flagged"
        return "not-confirmed"

    @property
    def exit_code(self) -> int:
        # A confirmed regression wins over a cell that could not be measured.
        return {"confirmed": EXIT_CONFIRMED, "error": EXIT_ERROR}.get(self.status, EXIT_OK)

    def to_json(self) -> dict:
        return {
            "machine": self.machine,
            "status": self.status,
            "source": self.source,
            "cells": [c.to_json() for c in self.cells],
            "notes": list(self.notes),
        }


_ICON = {
    "confirmed": "❌ confirmed",
    "not-confirmed": "✅ not confirmed",
    "no-data": "⚠️ no data",
    "error": "💥 error",
    "not-checked": "⏭️ not checked",
}


def _value(value: float | None, unit: str) -> str:
    from ltx2k.report.markdown import format_value

    # One more digit than the regress tables: a re-measured pair differs by a few %.
    return format_value(value, unit, digits=4)


def render_markdown(outcome: Outcome) -> str:
    n, k = len(outcome.cells), len(outcome.confirmed)
    head = {
        "confirmed": f"❌ {k} of {n} cell(s) confirmed",
        "not-confirmed": f"✅ none of {n} cell(s) confirmed",
        "error": f"💥 {len(outcome.failed)} of {n} cell(s) could not be re-measured",
        "nothing-flagged": "nothing flagged on this machine",
        "dry-run": "dry run, nothing measured (the asv commands are in the log)",
    }[outcome.status]
    out = [f"### ltx2k confirm on `{outcome.machine}`: {head}", ""]
    if outcome.cells:
        if not outcome.dry_run:
            out += [
                "Each commit re-measured on this runner as an interleaved A/B pair "
                "(`asv continuous`), judged by `ltx2k regress`'s rule with the cell's "
                "threshold; a cell asv keeps one number of (`track_host_calibrated`) is "
                "judged on every measuring process's value with a rank test and the "
                "minimum step instead; ratio is after / before.",
                "",
            ]
        out += [
            "| cell | commit | before | after | ratio | p | verdict |",
            "|---|---|---:|---:|---:|---:|---|",
        ]
        for c in outcome.cells:
            commit = f"`{c.commit[:12]}`" if c.commit else "—"
            if c.subject:
                commit += " " + _md_escape(c.subject[:72])
            if c.bisected:
                commit += f" (bisected from {c.range_size} commits)"
            ratio = f"{c.ratio:.3f}" if c.ratio is not None else "—"
            p = f"{c.p_value:.2g}" if c.p_value is not None else (c.test or "—")
            verdict = _ICON[c.verdict] + (f": {_md_escape(c.message)}" if c.message else "")
            out.append(
                f"| {_md_escape(c.label)} | {commit} | {_value(c.before_value, c.unit)} "
                f"| {_value(c.after_value, c.unit)} | {ratio} | {p} | {verdict} |"
            )
        out.append("")
    if outcome.notes:
        out += ["Notes:", ""] + [f"- {_md_escape(n)}" for n in outcome.notes] + [""]
    return "\n".join(out)


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def format_line(c: CellResult) -> str:
    """One line per cell for the log."""
    parts = [f"{c.verdict:13s} {c.label}"]
    if c.commit:
        parts.append(f"commit {c.commit[:12]}")
    if c.before_value is not None or c.after_value is not None:
        before = _value(c.before_value, c.unit)
        parts.append(f"before {before} after {_value(c.after_value, c.unit)}")
    if c.ratio is not None:
        parts.append(f"ratio {c.ratio:.3f}")
    if c.p_value is not None:
        parts.append(f"p {c.p_value:.2g}")
    if c.message:
        parts.append(c.message)
    return "  ".join(parts)


def _badness(t: Target) -> float:
    r = t.flagged_ratio
    if r is None or r <= 0:
        return 0.0
    return 1 / r if t.higher_is_better else r


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

    ``runner(cmd, env) -> (exit status, output)`` runs asv (default: :func:`stream`);
    ``load(results_dir) -> records`` reads its results (default: ``load_results``);
    ``setup()`` runs once every target is resolved, before the first asv command.
    """
    from ltx2k.analysis.thresholds import Thresholds

    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        raise ValueError(f"--rounds must be an integer >= 1, got {rounds!r}")
    if isinstance(max_cells, bool) or not isinstance(max_cells, int) or max_cells < 1:
        raise ValueError(f"--max-cells must be an integer >= 1, got {max_cells!r}")
    if thresholds is None:
        thresholds = Thresholds()
    elif not isinstance(thresholds, Thresholds):
        try:
            thresholds = Thresholds.load(thresholds)
        except TypeError as e:  # a JSON value of the wrong type
            raise ValueError(f"--thresholds: {e}") from None
    run = runner or stream
    env = dict(os.environ if env is None else env)
    outcome = Outcome(machine, dict(source or {}), notes=list(notes))

    ordered = sorted(targets, key=_badness, reverse=True)
    chosen, left = ordered[:max_cells], ordered[max_cells:]
    for t in left:
        outcome.cells.append(
            CellResult(
                t.benchmark, t.params or (), "not-checked", flagged_ratio=t.flagged_ratio,
                message=f"beyond --max-cells {max_cells}",
            )
        )  # fmt: skip

    conf_src = Path(os.fspath(config))
    if not conf_src.is_file():
        raise FileNotFoundError(
            f"--config {os.fspath(config)!r} does not exist (run from the repo root)"
        )
    repo = _config_repo(conf_src)
    # Every commit is checked before any measuring: a bad report fails in seconds.
    plans = []
    for t in chosen:
        what = f"{outcome.source.get('report', 'report')}: {t.label}: " if t.exact else ""
        plans.append(plan(t, repo, what=what))
    if not plans:
        return outcome
    if dry_run:
        conf = conf_src
    else:
        conf = private_config(conf_src, work)
        # A clean slate: the verdict must read what this run measured, never a value
        # left by an earlier, interrupted one.
        shutil.rmtree(_results_dir(conf) / machine, ignore_errors=True)
        if setup is not None:
            setup()

    # 1. bisect ranges of more than one commit (asv find), one search per distinct question
    pairs: dict[tuple[str, str], list[Plan]] = {}
    found_cache: dict[tuple, tuple[str | None, str]] = {}
    for i, p in enumerate(plans):
        t = p.target
        outcome.notes.extend(f"{t.label}: {n}" for n in p.notes)
        if not p.bisect:
            pairs.setdefault((p.commits[0], p.commits[1]), []).append(p)
            continue
        invert = _higher(t, thresholds)
        key = (p.find_range, t.regex(), invert)
        if key not in found_cache:
            _say(
                f"[{i + 1}/{len(plans)}] bisecting {t.label} over {len(p.commits) - 1} commits "
                f"{p.commits[0][:8]}..{p.commits[-1][:8]} (asv find{' --invert' if invert else ''})"
            )
            cmd = find_command(conf, machine, p, invert=invert)
            if dry_run:
                _say("+ " + " ".join(cmd))
                _say("dry run: asv find's answer is unknown; the A/B below assumes first_bad")
                found_cache[key] = (p.commits[-1], "")
            else:
                rc, output = run(cmd, env)
                found_cache[key] = (
                    parse_found(output, p.commits),
                    _asv_problem(output, t, rc, "find"),
                )
        found, problem = found_cache[key]
        if found is None:
            outcome.cells.append(_error_cell(p, problem or "asv find named no commit of the range"))
            continue
        _say(f"{t.label}: asv find names {found[:12]} {subject(repo, found)}")
        idx = p.commits.index(found)
        pairs.setdefault((p.commits[idx - 1], found), []).append(p)

    # 2. re-measure each pair once, all of its cells in one asv continuous
    from ltx2k import process_values

    measured: dict[tuple[str, str], tuple[int, str]] = {}
    values_of: dict[tuple[str, str], Path] = {}
    for n, ((before, after), group) in enumerate(pairs.items(), 1):
        regexes = list(dict.fromkeys(p.target.regex() for p in group))
        factor = min(
            p.target.threshold or thresholds.ratio_for(_dotted(p.target.benchmark)) for p in group
        )
        _say(
            f"[pair {n}/{len(pairs)}] re-measuring {before[:8]} -> {after[:8]} "
            f"({len(group)} cell(s), {rounds} interleaved rounds, asv continuous)"
        )
        cmd = continuous_command(
            conf, machine, before, after, regexes, factor=factor, rounds=rounds
        )
        if dry_run:
            _say("+ " + " ".join(cmd))
            continue
        # Each pair its own file, emptied first: values of another pair's rounds, or
        # left by an interrupted run, were not interleaved with this pair and must not count.
        values_path = Path(conf).parent / f"process-values-{n}.jsonl"
        values_path.unlink(missing_ok=True)
        values_of[(before, after)] = values_path
        measured[(before, after)] = run(cmd, {**env, process_values.ENV: str(values_path)})

    if dry_run:
        outcome.dry_run = True
        return outcome

    # 3. judge every cell from the private results
    if load is None:
        from ltx2k.history.records import load_results

        def load(path):
            return load_results(path)[0] if Path(path).is_dir() else []

    records = load(_results_dir(conf))
    for (before, after), group in pairs.items():
        rc, output = measured[(before, after)]
        pair_records, sampled, bad = with_process_values(
            records, values_of[(before, after)], before, after
        )
        if bad:
            outcome.notes.append(
                f"{values_of[(before, after)]}: {bad} line(s) were not a complete record "
                "(a measuring process cut short?) and were skipped"
            )
        for p in group:
            t = p.target
            cells = judge(pair_records, t, before, after, machine, thresholds, sampled)
            problem = _asv_problem(output, t, rc, "continuous")
            if not cells:
                outcome.cells.append(
                    _error_cell(p, problem or f"asv continuous stored no result (exit {rc})")
                )
                continue
            for c in cells:
                c.bisected = p.bisect
                c.range_size = len(p.commits) - 1
                c.subject = subject(repo, after)
                if c.verdict == "no-data" and rc not in (0, 1):
                    c.message = f"asv continuous exited {rc}; see its log"
                outcome.cells.append(c)
    return outcome


def _dotted(name: str) -> str:
    # Threshold globs are "*.time_device_*"-style: give a bare suffix its dot.
    return name if "." in name else "." + name


def _higher(t: Target, thresholds) -> bool:
    if t.higher_is_better is not None:
        return t.higher_is_better
    return thresholds.higher_is_better(_dotted(t.benchmark))


def _asv_problem(output: str, t: Target, rc: int, what: str) -> str:
    if _MANY_MATCH.search(output):
        return (
            f"--benchmark {t.benchmark!r} matches more than one benchmark; "
            "give the full name (e.g. bench_kernels.SplitRope.time_device_cold)"
        )
    if _NO_MATCH.search(output):
        return f"benchmark {t.label!r} matches no benchmark of the suite"
    if rc not in (0, 1) or (what == "find" and rc != 0):
        return f"asv {what} exited {rc}; see its log"
    return ""


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


def _config_repo(config: Path) -> Path:
    from ltx2k import asv_compat

    conf = asv_compat.load_json(config, js_comments=True)
    repo = conf.get("repo", ".")
    if not isinstance(repo, str) or "://" in repo or repo.startswith("git@"):
        return config.resolve().parent
    return (config.resolve().parent / repo).resolve()


def _results_dir(config: Path) -> Path:
    from ltx2k import asv_compat

    conf = asv_compat.load_json(config, js_comments=True)
    return (Path(config).resolve().parent / conf.get("results_dir", "results")).resolve()


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
    from ltx2k import machine, runtime

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
        raise ValueError(f"--report {os.fspath(report)}: no such file")
    if not Path(os.fspath(config)).is_file():
        raise FileNotFoundError(
            f"--config {os.fspath(config)!r} does not exist (run from the repo root)"
        )

    info = machine.identify()
    on_gpu = info.get("gpu_count", "0") != "0"
    if machine_name:
        info["machine"] = machine_name
    name = info["machine"]

    notes: list[str] = []
    if report is not None:
        targets, skipped = read_report(report, name)
        notes += [f"{s.label}: {s.why}; not checked" for s in skipped]
        source = {"report": os.fspath(report)}
        if not targets:
            _say(f"no flagged regression with a step on machine {name!r} in {os.fspath(report)}")
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
        _say(format_line(c))
    return outcome


def write_outputs(outcome: Outcome, *, json_path=None, markdown_path=None) -> str:
    """Write the JSON and Markdown files asked for; return the Markdown."""
    markdown = render_markdown(outcome)
    for flag, path, text in (
        ("--json", json_path, json.dumps(outcome.to_json(), indent=2) + "\n"),
        ("--markdown", markdown_path, markdown),
    ):
        if not path:
            continue
        try:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
        except OSError as e:
            raise ValueError(
                f"{flag} {os.fspath(path)}: cannot write ({e.strerror or e})"
            ) from None
    return markdown
