"""How a shard run divides its work: commits over GPUs, benchmarks into phases.

Commits are dealt round-robin (:func:`split_commits`), not in contiguous
blocks: if two GPUs of one model differ by a constant, a block split turns
that offset into a step at the block boundary that ``ltx2k regress`` would call
a regression; round-robin turns it into commit-to-commit scatter, and each GPU
covers the whole range, so a real step shows up on every GPU.

Benchmarks whose name matches an *exclusive* regex of the :class:`Policy` run
in a second phase, one GPU at a time while the others idle; all others run on
every GPU at once (:func:`partition`, :func:`phase_regexes`). ``ltx2k
interference`` measures which families need to wait and writes a policy file.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ltx2k.runner import asv_compat

# Benchmark-name regexes (re.search on e.g. "bench_kernels.SplitRope.time_host_latency")
# that run one GPU at a time.
#
# The prior, for a host nobody has measured: host latency shares the host's CPU and
# PCIe with every neighbour, device time (events around a CUDA graph) does not.
# ltx2k interference starts from it, so a family it cannot decide stays exclusive.
CONSERVATIVE_EXCLUSIVE: tuple[str, ...] = (r"\.time_host_latency$",)
# The default, from the measurement (scripts/interference.sh on 2x H200 of one KVM
# host, 32 vCPUs; docs/data/h200x2-2026-11-29-interference-results.tgz, and
# tests/test_interference.py re-derives it from those files). Next to a looping suite,
# cold device time moved -0.05% (95% CI -0.10..-0.01%, band 0.28%) and host latency
# -2.3% (CI -10.2..-0.6%): both within noise, neither slower. Host latency's scatter
# between any two runs of one commit (median |shift| 13-18%) is the same with or
# without a neighbour: it is per-process noise (docs/measurement.md), not
# interference. So nothing waits for an idle host; every result still records
# how many GPUs were busy (the tag's concurrent_gpus). A host of another shape (more
# GPUs per CPU core, another CPU) should be measured and given --policy.
DEFAULT_EXCLUSIVE: tuple[str, ...] = ()


def split_commits(commits: Sequence[str], n: int) -> list[tuple[str, ...]]:
    """Deal *commits* round-robin into *n* shards (order within a shard kept)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be an int >= 1, got {n!r}")
    commits = list(commits)
    dupes = sorted({c for c in commits if commits.count(c) > 1})
    if dupes:
        raise ValueError(f"commits contains duplicates {dupes}")
    return [tuple(commits[i::n]) for i in range(n)]


@dataclass(frozen=True)
class Policy:
    """Which benchmarks run one GPU at a time: regexes searched in the benchmark name.

    *machine* and *commit*: where ``ltx2k interference`` measured it (None for a policy
    given on the command line or the default). Interference is a property of a host, so
    a policy measured on one machine says little about another's.
    """

    exclusive: tuple[str, ...] = DEFAULT_EXCLUSIVE
    machine: str | None = None
    commit: str | None = None

    def __post_init__(self):
        if isinstance(self.exclusive, str) or not all(isinstance(x, str) for x in self.exclusive):
            raise TypeError(
                f"exclusive must be a sequence of regex strings, got {self.exclusive!r}"
            )
        for rx in self.exclusive:
            try:
                re.compile(rx)
            except re.error as e:
                raise ValueError(f"exclusive regex {rx!r} does not compile: {e}") from e

    def is_exclusive(self, benchmark: str) -> bool:
        return any(re.search(rx, benchmark) for rx in self.exclusive)

    @classmethod
    def load(cls, path) -> Policy:
        """Read ``{"exclusive": [...]}`` (e.g. the policy.json ``ltx2k interference`` writes)."""
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise ValueError(f"policy file {os.fspath(path)!r} is unreadable: {e}") from e
        if not isinstance(data, dict) or not isinstance(data.get("exclusive"), list):
            raise ValueError(
                f"policy file {os.fspath(path)!r} must hold an object with an 'exclusive' list"
            )
        where = {}
        for field in ("machine", "commit"):
            value = data.get(field)
            if value is not None and not (isinstance(value, str) and value):
                raise ValueError(
                    f"policy file {os.fspath(path)!r}: {field!r} must be a non-empty string, "
                    f"got {value!r}"
                )
            where[field] = value
        exclusive = tuple(data["exclusive"])
        bad = [x for x in exclusive if not isinstance(x, str)]
        if bad:  # the constructor's TypeError would be a traceback on the command line
            raise ValueError(
                f"policy file {os.fspath(path)!r}: 'exclusive' must list regex strings, "
                f"got {bad[0]!r}"
            )
        try:
            return cls(exclusive, **where)
        except ValueError as e:  # a regex that does not compile: say which file holds it
            raise ValueError(f"policy file {os.fspath(path)!r}: {e}") from None

    def mismatch(self, machine: str) -> str | None:
        """Why this policy may not describe *machine* (measured on another), or None."""
        if self.machine is None or self.machine == machine:
            return None
        at = f" at commit {self.commit[:8]}" if self.commit else ""
        return (
            f"the policy was measured on machine {self.machine!r}{at}, this runner is "
            f"{machine!r}: interference is a property of the host; run `ltx2k interference` "
            f"on this runner for its own policy"
        )


def policy_from_options(
    policy_file: str | os.PathLike | None = None,
    exclusive: Sequence[str] | None = None,
    no_exclusive: bool = False,
) -> Policy:
    """The :class:`Policy` that ``shard-run``'s ``--policy``, ``--exclusive`` and
    ``--no-exclusive`` ask for; none of them: the measured default.

    At most one may be given: each one alone says the whole exclusive list, so
    combining them has no meaning. An empty *exclusive* counts as not given.
    """
    given = [
        flag
        for flag, value in (
            ("--policy", policy_file),
            ("--exclusive", exclusive),
            ("--no-exclusive", no_exclusive),
        )
        if value
    ]
    if len(given) > 1:
        raise ValueError(f"{' and '.join(given)} cannot be combined: each sets the whole list")
    if policy_file:
        return Policy.load(policy_file)
    if no_exclusive:
        return Policy(())
    if exclusive:
        return Policy(tuple(exclusive))
    return Policy()


def partition(benchmarks: Iterable[Mapping], bench: Sequence[str], policy: Policy):
    """(concurrent, exclusive) benchmark names that ``asv run -b bench`` would run.

    *benchmarks* are the entries of asv's benchmarks.json; the ``-b`` filter is
    applied by asv's own selection, parameters included.
    """
    names = asv_compat.select_benchmarks(benchmarks, bench)
    return (
        tuple(n for n in names if not policy.is_exclusive(n)),
        tuple(n for n in names if policy.is_exclusive(n)),
    )


def phase_regexes(names: Sequence[str], bench: Sequence[str]) -> list[str]:
    """``asv run -b`` values selecting *names* and, within them, what *bench* selects.

    asv ORs its ``-b`` regexes and searches ``name(param, ...)``: each user regex
    gets a lookahead that pins the name (its own groups keep their numbers).
    """
    if not names:
        raise ValueError("names must not be empty (a phase without benchmarks is skipped)")
    pinned = "(?:" + "|".join(re.escape(n) for n in names) + r")(?:\(|$)"
    if not bench:
        return ["^" + pinned]
    return [f"^(?={pinned}).*?(?:{b})" for b in bench]
