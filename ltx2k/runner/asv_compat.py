"""Every use of asv's Python internals, in one module.

asv's supported interface is its command line and its file formats. Its Python
modules (``asv.util``, ``asv.results``, ``asv.repo``, ``asv.benchmarks``,
``asv.commands.run``, ``asv.step_detect``) carry no stability promise, and some
of what ltx2k needs is private outright (``asv._stats``, ``Results._env_name``,
``Results._results``, ``Run._setup_arguments``). ltx2k still uses them, so that
it reads and writes asv's files, parses ``asv run``'s options, applies ``asv
compare``'s test and finds regression steps exactly as asv does; routing every
use through here makes an asv upgrade a change to this one file.

Checked against asv 0.6.6 (the version ``pyproject.toml``'s ``bench`` extra
pins). asv is optional for the package (the kernels need only torch and
Triton), so every function imports asv when called, never at import time.

One exception lives elsewhere: ``ltx2k/runner/asv_env.py`` is an environment plugin
that asv itself loads, and a plugin has to subclass
``asv.environment.Environment`` where asv finds it.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

ASV_VERSION_CHECKED = "0.6.6"


# --- files ----------------------------------------------------------------------------------


def user_error() -> type[Exception]:
    """The exception asv raises for a bad file or config (``asv.util.UserError``)."""
    from asv.util import UserError

    return UserError


def load_json(path, js_comments: bool = True):
    """asv's JSON reader (asv.conf.json allows ``//`` comments); raises :func:`user_error`."""
    from asv import util

    return util.load_json(str(path), js_comments=js_comments)


# asv.conf.json keys that name paths (or, for repo, a URL): strings where present.
CONF_PATH_KEYS = ("repo", "results_dir", "html_dir", "env_dir", "benchmark_dir")


def load_conf(path) -> dict:
    """asv.conf.json as a dict; ValueError naming the file where it is not valid JSON, not
    an object, or a path key (:data:`CONF_PATH_KEYS`) is not a string."""
    try:
        conf = load_json(path, js_comments=True)
    except (user_error(), ValueError) as e:  # json5, under asv's reader, raises ValueError
        raise ValueError(f"asv config {str(path)!r} is not valid JSON: {e}") from e
    if not isinstance(conf, dict):
        raise ValueError(
            f"asv config {str(path)!r} must hold a JSON object, got {type(conf).__name__}"
        )
    for key in CONF_PATH_KEYS:
        if key in conf and (not isinstance(conf[key], str) or not conf[key]):
            raise ValueError(
                f"asv config {str(path)!r}: {key!r} must be a non-empty path string, "
                f"got {conf[key]!r}"
            )
    return conf


def write_json(path, data, api_version: int, compact: bool = False) -> None:
    """asv's JSON writer: sorted and formatted as asv writes it, so equal data gives equal bytes."""
    from asv import util

    util.write_json(str(path), data, api_version=api_version, compact=compact)


def load_result(path, machine_name: str | None = None):
    """One result file as :class:`asv.results.Results` (``Results.load``); ValueError if
    asv cannot read it. *machine_name*: the machine directory it must belong to, as
    ``asv publish`` checks."""
    from asv import util
    from asv.results import Results

    try:
        return Results.load(str(path), machine_name=machine_name)
    except util.UserError as e:
        raise ValueError(str(e)) from e


def result_env_name(res) -> str:
    """The environment name of a loaded result (asv 0.6 has no public accessor)."""
    return res._env_name


def result_raw_values(res, benchmark: str):
    """The value list as stored in the file, before asv zips it against the parameter
    product (its accessors would silently truncate a malformed row); None if absent."""
    return res._results.get(benchmark)


def result_filename(machine: str, commit: str, env_name: str) -> str:
    """A result file's path relative to the results folder, as asv names it
    (``machine/<hash[:8]>-<env>.json``; asv hashes a long environment name)."""
    from asv.results import get_filename

    return get_filename(machine, commit, env_name)


def machine_file_path() -> str:
    """Where asv keeps this host's machine file (``~/.asv-machine.json``)."""
    from asv.machine import MachineCollection

    return MachineCollection.get_machine_file_path()


def machine_defaults() -> dict[str, str]:
    """The machine fields ``asv machine`` fills in by itself (os, arch, cpu, num_cpu, ram)."""
    from asv.machine import Machine

    return {k: str(v) for k, v in Machine.get_defaults().items()}


# --- statistics -----------------------------------------------------------------------------


# The exact U distribution's counts, r(m, n, u), kept for the process. asv keeps its own
# in a module-level memo that it clears past 100,000 entries: the sample counts of one
# suite (up to 20 x 20, 401 values of u each) pass that, and a report then recounts
# the same distributions for every cell (seconds per cell). Bounded by asv's own rule
# (exact only up to 20 samples a side): at most 21 x 21 x 401 entries.
_U_COUNTS: dict = {}
# asv's cumulative probabilities P(U <= u), kept too: each is a sum of up to 201 terms
# that asv recomputes on every call, a binomial coefficient from scratch in each term.
# The same sum in the same order, so the same bits; as bounded as _U_COUNTS.
_U_CDF: dict = {}


def _u_cdf(m: int, n: int, u: int) -> float:
    from asv import _stats

    p = _U_CDF.get((m, n, u))
    if p is None:
        p = _U_CDF[(m, n, u)] = _stats.mann_whitney_u_cdf(m, n, u, _U_COUNTS)
    return p


def mann_whitney_u(a: Sequence[float], b: Sequence[float]) -> tuple[float, float]:
    """asv's Mann-Whitney U test (``asv._stats.mann_whitney_u``): (U, two-sided p).

    The same U, tie breaking and p as asv's: its own functions, called as it calls
    them, with memos that are not cleared (``_U_COUNTS``, ``_U_CDF``).
    """
    from asv import _stats

    m, n = len(a), len(b)
    if max(m, n) > 20:  # asv's 'auto': the normal approximation, no memo
        return _stats.mann_whitney_u(a, b)
    u, ties = _stats.mann_whitney_u_u(a, b)
    # asv's conservative tie breaking, as in _stats.mann_whitney_u
    if u <= m * n // 2 and u + ties >= m * n // 2:
        ties = m * n // 2 - u
    ux1 = min(u, m * n - u)
    ux2 = min(u + ties, m * n - (u + ties))
    if ux1 >= ux2:
        ux = ux1
    else:
        u = u + ties
        ux = ux2
    p1 = _u_cdf(m, n, ux)
    p2 = 1.0 - _u_cdf(m, n, max(m * n // 2, m * n - ux - 1))
    return u, p1 + p2


def compute_stats(samples: Sequence[float], number: int = 1) -> tuple[float, dict]:
    """(median, stats) as asv computes them for a timing benchmark's samples."""
    from asv_runner.statistics import compute_stats as _compute

    return _compute(list(samples), number)


def is_different(a, b, stats_a: Mapping, stats_b: Mapping, p_threshold: float) -> bool:
    """``asv compare``'s significance rule (samples if any, else 99% CI overlap)."""
    from asv import _stats

    return bool(_stats.is_different(a, b, stats_a, stats_b, p_threshold=p_threshold))


def regression_positions(values: Sequence[float | None], threshold: float) -> list[tuple]:
    """The upward steps asv's regressions page shows for one series (``asv.step_detect``):
    (last index before, first index after, value before, best value after) each; None
    values are gaps. *threshold* is relative (asv's ``regressions_thresholds``)."""
    from asv import step_detect

    steps = step_detect.detect_steps(list(values))
    _, _, positions = step_detect.detect_regressions(steps, threshold=threshold)
    return list(positions or ())


# --- asv run ----------------------------------------------------------------------------------


class _RaisingParser(argparse.ArgumentParser):
    def error(self, message):
        raise ValueError(f"asv run arguments: {message}")


def run_parser() -> argparse.ArgumentParser:
    """A parser with ``asv run``'s own option table, raising ValueError on bad arguments."""
    from asv.commands.run import Run

    p = _RaisingParser(prog="asv run", add_help=False)
    Run._setup_arguments(p)  # asv's own table, so parsing matches `asv run`
    return p


def load_config(path):
    """asv.conf.json as asv reads it (:class:`asv.config.Config`), its relative paths
    resolved against the file's folder: asv's command line changes into that folder
    first (``asv.main``), so ``"repo": "."`` is the config's checkout, not the caller's
    current directory."""
    from asv.config import Config

    conf = Config.load(str(path))
    base = Path(os.fspath(path)).resolve().parent
    for key in CONF_PATH_KEYS:
        value = getattr(conf, key, None)
        if not isinstance(value, str) or not value or os.path.isabs(value) or "://" in value:
            continue
        # results_dir and html_dir need not exist yet; a repo that is not a folder there
        # is a URL ("git@host:repo.git") and stays one.
        if key != "repo" or (base / value).exists():
            setattr(conf, key, str(base / value))
    return conf


def config_from_dict(conf: Mapping):
    """asv.conf.json's contents, already read and edited, as asv's config
    (``asv.config.Config.from_json``)."""
    from asv.config import Config

    return Config.from_json(dict(conf))


def load_benchmarks(conf):
    """The benchmarks.json in *conf*'s results_dir as asv reads it
    (``asv.benchmarks.Benchmarks.load``); ValueError if asv refuses it."""
    from asv import util
    from asv.benchmarks import Benchmarks

    try:
        return Benchmarks.load(conf)
    except util.UserError as e:
        raise ValueError(str(e)) from e


def open_repo(conf):
    """*conf*'s repository as asv opens it (``asv.repo.get_repo``); asv raises bare
    Exceptions when git fails."""
    from asv.repo import get_repo

    return get_repo(conf)


def select_benchmarks(benchmarks: Iterable[Mapping], regex: Sequence[str]) -> list[str]:
    """Names ``asv run -b regex...`` selects among benchmarks.json entries, parameters included."""
    from asv.benchmarks import Benchmarks

    conf = argparse.Namespace(benchmark_dir="benchmarks")
    return sorted(Benchmarks(conf, list(benchmarks), regex=list(regex) or None).keys())


def resolve_range(conf, spec: str | None, results_dir, date_period=None, steps=None):
    """Commits ``asv run SPEC`` would benchmark, in asv's order (Run.run's switch).

    *spec* is a git range or one of asv's words (ALL, NEW, EXISTING, TAGS, HEAD,
    HASHFILE:path, ``-`` for stdin); None means the configured branches.
    ValueError names an unknown commit or branch.
    """
    import sys
    from pathlib import Path

    from asv import util
    from asv.repo import NoSuchNameError, get_repo
    from asv.results import get_existing_hashes

    repo = get_repo(conf)
    old = None
    try:
        if spec is None:
            commits = [repo.get_hash_from_name(b) for b in conf.branches]
        elif spec == "EXISTING":
            commits = get_existing_hashes(str(results_dir))
        elif spec == "NEW":
            old = get_existing_hashes(str(results_dir))
            commits = repo.get_new_branch_commits(conf.branches, old)
        elif spec == "TAGS":
            commits = list(reversed(list(repo.get_tags().values())))
        elif spec == "ALL":
            commits = repo.get_new_branch_commits(conf.branches, [])
        elif spec == "HEAD":
            commits = [repo.get_hash_from_name("HEAD")]
        elif spec.startswith("HASHFILE:"):
            path = spec[len("HASHFILE:") :]
            text = sys.stdin.read() if path == "-" else Path(path).read_text()
            commits = [repo.get_hash_from_name(h.strip()) for h in text.splitlines() if h.strip()]
        else:
            commits = repo.get_hashes_from_range(spec)  # git rev-list --first-parent SPEC
    except NoSuchNameError as e:
        raise ValueError(f"range {spec!r}: unknown commit or branch {e}") from e
    if date_period is not None:
        commits = repo.filter_date_period(commits, date_period, old)
    if steps is not None:
        commits = util.pick_n(commits, steps)
    return list(dict.fromkeys(repo.get_hash_from_name(c) for c in commits))


def has_results(results_dir, machine: str, commit: str) -> bool:
    """Whether *results_dir* holds any result file of *commit* on *machine*."""
    from asv.results import iter_results_for_machine_and_hash

    return any(True for _ in iter_results_for_machine_and_hash(str(results_dir), machine, commit))
