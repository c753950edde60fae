"""What ``ltx2k confirm`` checks: the flagged cells of a regress report, or one step named
on the command line, with their commits resolved in git (:class:`Plan`).

A target's step runs from ``last_good`` to ``first_bad``; its plan lists the first-parent
commits in between and says whether the range needs a bisection.
"""

from __future__ import annotations

import math
import os
import re
import reprlib
from collections.abc import Sequence
from dataclasses import dataclass, replace

from ltx2k import git
from ltx2k.history.jsonfile import parse_json

_FULL_SHA = re.compile(r"[0-9a-f]{40}")
# What a user may pass as --good/--bad: a revision, never an option.
_REVISION = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/~^@{}-]*")


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


# --- from a report or the command line -------------------------------------------------------


def report_machines(path) -> set[str] | None:
    """The machines a ``ltx2k regress --json`` report judged; None where it does not say
    (:func:`read_report` names what is wrong with the file)."""
    try:
        with open(os.fspath(path), encoding="utf-8") as f:
            data = parse_json(f.read())
    except (OSError, ValueError, RecursionError):
        return None
    machines = data.get("machines") if isinstance(data, dict) else None
    if not isinstance(machines, list) or not all(isinstance(m, str) for m in machines):
        return None
    return set(machines)


def read_report(path, machine: str) -> tuple[list[Target], list[Skipped]]:
    """The flagged regression cells of *machine* that carry a step, and those skipped."""
    p = os.fspath(path)
    where = f"--report {p}"
    try:
        with open(p, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        raise ValueError(f"{where}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"{where}: cannot be read ({e})") from None
    try:
        # Bounded in depth and digits: json.loads turns either into an error that
        # names no file (a RecursionError, or a ValueError about int digits).
        data = parse_json(text)
    except (ValueError, RecursionError) as e:
        raise ValueError(f"{where}: not valid JSON ({e})") from None
    rows = data.get("rows") if isinstance(data, dict) else None
    if not isinstance(rows, list):
        raise ValueError(f"{where}: not an `ltx2k regress --json` report (no 'rows' list)")

    targets: list[Target] = []
    skipped: list[Skipped] = []
    flagged_without_key = 0
    for i, row in enumerate(rows):
        what = f"{where}: rows[{i}]"
        cells = (row.get("cells") or {}) if isinstance(row, dict) else {}
        if not isinstance(cells, dict):
            raise ValueError(f"{what}: 'cells' is not an object")
        cell = cells.get(machine)
        if cell is not None and not isinstance(cell, dict):
            # skipped, a regression it may flag would go unconfirmed without a word
            raise ValueError(f"{what}: cells[{machine!r}] is not an object")
        if cell is None or cell.get("flag") != "regression":
            continue
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
            why = cell.get("why")
            # A benchmark that failed at head has no values to time against each other;
            # regress's reason says so (one short printable line, as regress writes it).
            shown = isinstance(why, str) and why.isprintable() and 0 < len(why) <= 200
            reason = f"flagged: {why}" if shown else "flagged, but no step was found in its history"
            skipped.append(Skipped(label, reason))
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
        # regress writes finite numbers or null here (its JSON has no NaN). A NaN ratio
        # would sort anywhere in --max-cells' worst-first order, and 10**400 would be an
        # OverflowError: either means the file is not what regress wrote.
        thr = _report_number(row.get("threshold"), f"{what}.threshold", low=1.0)
        ratio = _report_number(cell.get("ratio"), f"{what}.cells[{machine!r}].ratio")
        targets.append(
            Target(
                benchmark=bench,
                params=params,
                last_good=good,
                first_bad=bad,
                range=rng,
                higher_is_better=higher if isinstance(higher, bool) else None,
                threshold=thr,
                exact=True,
                flagged_ratio=ratio,
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


def _report_number(value, what: str, low: float = 0.0) -> float | None:
    """A report's number as a float (None: absent or null); ValueError naming *what*
    for anything else: a string, a boolean, NaN, an infinity, one below *low*."""
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            x = float(value)
        except OverflowError:  # an int past a float's range
            x = math.inf
        if math.isfinite(x) and x >= low:
            return x
    shown = reprlib.repr(value)
    raise ValueError(f"{what}: expected a finite number >= {low:g} or null, got {shown}")


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
        seen = dict(pairs)
        if name in seen and seen[name] != value:
            # A cell has one value per parameter: both would select nothing.
            raise ValueError(
                f"--param {name}: given twice ({seen[name]!r} and {value!r}); "
                "a benchmark cell has one value per parameter"
            )
        if name not in seen:
            pairs.append((name, value))
    return Target(
        benchmark=benchmark.strip(),
        params=tuple(pairs) if pairs else None,
        last_good=good,
        first_bad=bad,
        exact=False,
    )


# --- in git ------------------------------------------------------------------------------------


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
