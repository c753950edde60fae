"""Checks on the fields of asv's files: what each may hold, and why a value is refused.

A check returns the sentence saying why a field cannot be used (None: it can) or
raises :class:`BadField`; :mod:`ltx2k.history.records` files either as a Problem.
"""

from __future__ import annotations

import ast
import functools
import itertools
import math
import re
from collections.abc import Mapping

from ltx2k.history import names
from ltx2k.history.tags import tags_of
from ltx2k.runner import asv_compat

# asv's default benchmark timeout (seconds), used when benchmarks.json is unreadable.
DEFAULT_TIMEOUT_S = 60.0

# Bounds on values, so the detector, the plots and asv publish only ever get
# numbers they can take (a log axis needs a positive time; exp() of 1e308
# overflows; asv's step detection never ends on an infinity). A benchmark
# taking over MAX_SECONDS (11.6 days) per call, or a count over MAX_COUNT, is
# a broken file, not a measurement.
MAX_SECONDS = 1e6
MAX_COUNT = 1e15
# Commit dates in ms since the epoch: before it (negative) or past 2200 no git commit
# is dated, and the page's date formatting overflows on them.
MIN_DATE_MS = 0
MAX_DATE_MS = 7258118400000

COMMIT_HASH = re.compile(r"[0-9a-fA-F]{4,64}")


def number(x, low: float, high: float) -> float | None:
    """*x* as a float when it is a JSON number in [low, high], else None."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    x = float(x)
    return x if low <= x <= high else None


# --- whole files -----------------------------------------------------------------------


def bad_file_fields(res) -> str | None:
    """Why the fields that hold for the whole result file are unusable, or None."""
    if not isinstance(res.commit_hash, str) or not COMMIT_HASH.fullmatch(res.commit_hash):
        return f"field 'commit_hash' is {str(res.commit_hash)[:80]!r}, not a git commit hash"
    if number(res.date, MIN_DATE_MS, MAX_DATE_MS) is None:
        return (
            f"field 'date' is {str(res.date)[:80]!r}, not a commit date in ms since the "
            "epoch (1970 to 2200)"
        )
    why = names.file_name(asv_compat.result_env_name(res), "field 'env_name'")
    if why:
        return why
    return None


def other_gpu(params, machine_gpu) -> str | None:
    """The GPU a result file's *params* name where it is not *machine_gpu*, the one its
    machine's machine.json names (None: the same GPU, or either does not say).

    The machine name is a slug of the GPU model unless LTX2K_MACHINE sets it: two runners
    with different GPUs under one name write into one directory, and their values in one
    series are a step at every change of runner. Case, spaces and punctuation are not
    compared (the slug does not keep them either)."""
    gpu = params.get("gpu") if isinstance(params, Mapping) else None
    if not isinstance(gpu, str) or not isinstance(machine_gpu, str):
        return None
    return None if _gpu_key(gpu) == _gpu_key(machine_gpu) else gpu


def _gpu_key(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "", name.lower())


def bad_machine_fields(data: dict) -> str | None:
    """Why machine.json cannot go to asv's pages, whose machine tooltip is HTML built
    from its keys and values."""
    for key, value in data.items():
        why = names.text(key, "a key")
        if why is None and not (value is None or isinstance(value, (str, int, float))):
            why = f"field {key!r} is a JSON {type(value).__name__}, not a string"
        if why is None and isinstance(value, str):
            why = names.text(value, f"field {key!r}")
        if why:
            return why
    return None


def param_value_problem(value, what: str) -> str | None:
    """Why a stored parameter value (asv keeps its repr: "'blocked'") cannot be shown."""
    if isinstance(value, str) and len(value) >= 2 and value[0] == value[-1] == "'":
        value = value[1:-1]  # the quotes of repr(), not part of the text
    return names.text(value, what)


def bad_meta(meta: dict) -> str | None:
    """Why a benchmarks.json entry's fields that asv's pages show cannot be shown."""
    for key in ("unit", "pretty_name", "type"):
        if meta.get(key) is not None:
            why = names.text(meta[key], f"field {key!r}")
            if why:
                return why
    pnames = meta.get("param_names", [])
    params = meta.get("params", [])
    if not isinstance(pnames, list) or not isinstance(params, list):
        return "fields 'param_names' and 'params' must be lists"
    for n in pnames:
        why = names.identifier(n, "a name in 'param_names'")
        if why:
            return why
    for values in params:
        if not isinstance(values, list):
            return f"field 'params' holds {values!r}, not a list of values"
        for v in values:
            why = param_value_problem(v, "a value in 'params'")
            if why:
                return why
    if meta.get("timeout") is not None and number(meta["timeout"], 0.0, MAX_SECONDS) is None:
        return f"field 'timeout' is {meta['timeout']!r}, not a number of seconds"
    return None


def gpu_uuids(data) -> dict[str, str]:
    """benchmark -> GPU UUID from the file's shard-run tag; a malformed entry is no GPU."""
    out = {}
    for name, tag in tags_of(data).items():
        uuid = tag.get("gpu_uuid") if isinstance(tag, Mapping) else None
        if isinstance(uuid, str) and uuid:
            out[name] = uuid
    return out


# --- one benchmark's cells -------------------------------------------------------------


class BadField(ValueError):
    """One field of one benchmark in a result file, and why it cannot be used."""

    def __init__(self, field: str, why: str):
        super().__init__(f"field {field!r} {why}")


# Every result file repeats the same few parameter values: checking and unquoting
# each once, not once per cell of every file, is a third of a long history's load.
@functools.lru_cache(maxsize=4096)
def _param_value_problem(value: str) -> str | None:
    return param_value_problem(value, "parameter value")


def _unquote(value) -> str:
    """asv stores parameter values as repr() strings ("'blocked'"); return the plain text."""
    if not isinstance(value, str):
        return str(value)
    return _unquote_text(value)


@functools.lru_cache(maxsize=4096)
def _unquote_text(value: str) -> str:
    try:
        parsed = ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return value
    return parsed if isinstance(parsed, str) else value


def check_params(params: tuple[tuple[str, str], ...]) -> None:
    """Raise BadField for a parameter value (unquoted by :func:`rows_of`) that cannot be shown."""
    for _, v in params:
        why = _param_value_problem(v)  # a str: _unquote made it
        if why:
            raise BadField("params", why)


def field_float(st: Mapping, key: str, low: float, high: float, nan_ok: bool = True):
    x = st.get(key)
    if x is None or (nan_ok and isinstance(x, float) and math.isnan(x)):
        return None
    out = number(x, low, high)
    if out is None:
        raise BadField(f"stats_{key}", f"is {str(x)[:80]!r}, not a number in [{low:g}, {high:g}]")
    return out


def field_int(st: Mapping, key: str) -> int | None:
    x = st.get(key)
    if x is None:
        return None
    if number(x, 1, MAX_COUNT) is None or float(x) != int(x):
        raise BadField(f"stats_{key}", f"is {str(x)[:80]!r}, not a whole number >= 1")
    return int(x)


def value_range(unit: str) -> tuple[float, float]:
    """Values a metric of *unit* can take: a time is positive and bounded."""
    if unit == "seconds":
        return (math.ulp(0.0), MAX_SECONDS)
    return (0.0, MAX_COUNT)


def rows_of(res, name: str, meta: dict):
    """Yield ((params, raw_value), value, stats, samples) per parameter combination."""
    bparams = res.get_result_params(name) or []
    if not isinstance(bparams, list) or not all(isinstance(p, list) for p in bparams):
        raise ValueError(f"parameter lists {bparams!r} are not lists")
    names = list(meta.get("param_names") or [])
    if len(names) != len(bparams):
        # Without benchmarks.json asv itself cannot name parameters either.
        names = [f"param{i + 1}" for i in range(len(bparams))]
    combos = list(itertools.product(*bparams))
    # Two values for one cell: records keyed by their parameters would keep either.
    seen: set[str] = set()
    for combo in combos:
        if repr(combo) in seen:
            raise BadField("params", f"holds the combination {combo!r} more than once")
        seen.add(repr(combo))
    # The raw stored list (asv's accessors zip it against the parameter
    # product and would silently truncate a malformed row).
    raw = asv_compat.result_raw_values(res, name)
    if raw is not None and not isinstance(raw, list):
        raw = [raw]  # very old unparameterized layout: a bare number
    if raw is not None and len(raw) != len(combos):
        raise ValueError(
            f"{len(raw)} values for {len(combos)} parameter combinations of {bparams!r}"
        )
    values = res.get_result_value(name, bparams)
    stats = res.get_result_stats(name, bparams)
    samples = res.get_result_samples(name, bparams)
    rows = []
    for combo, v, st, sm in zip(combos, values, stats, samples, strict=True):
        params = tuple((n, _unquote(x)) for n, x in zip(names, combo, strict=True))
        if v is not None and not isinstance(v, (int, float)):
            raise TypeError(f"value {v!r} for {label(params)} is not a number")
        if st is not None and not isinstance(st, dict):
            raise TypeError(f"stats {st!r} for {label(params)} are not a mapping")
        value = None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)
        rows.append(((params, v), value, st if value is not None else None, sm))
    return rows


def label(params: tuple[tuple[str, str], ...]) -> str:
    return ", ".join(f"{k}={v}" for k, v in params) or "(no parameters)"


# --- cells without a value ---------------------------------------------------------------


def why_missing(res, name: str, meta: dict, value_raw) -> str:
    """asv writes NaN for a skipped combination and None for a failure.

    asv does not save the exit code, so a timeout is recognised the way a
    human would: the benchmark's recorded duration reached its timeout.
    """
    if isinstance(value_raw, float) and math.isnan(value_raw):
        return "skipped"
    duration = _duration(res, name)
    timeout = float(meta.get("timeout") or DEFAULT_TIMEOUT_S)
    if duration is not None and duration >= 0.99 * timeout:
        return "timeout"
    return "failed"


def _duration(res, name: str) -> float | None:
    durations = res.duration if isinstance(res.duration, Mapping) else {}
    return number(durations.get(name), 0.0, math.inf)


def missing_message(kind, name, res, meta, labels: list[str], total: int) -> str:
    commit = str(res.commit_hash)[:8]
    shown = "; ".join(labels[:4]) + (f"; and {len(labels) - 4} more" if len(labels) > 4 else "")
    head = f"Benchmark {name} at commit {commit}: {len(labels)} of {total} parameter combination(s)"
    if kind == "skipped":
        # asv stores NaN both for a setup that raised NotImplementedError and
        # for a combination that `--bench` left out: the file cannot tell which.
        return f"{head} were skipped or not selected: {shown}."
    if kind == "timeout":
        duration = _duration(res, name) or 0.0
        timeout = float(meta.get("timeout") or DEFAULT_TIMEOUT_S)
        return (
            f"{head} have no value and the benchmark ran {duration:.1f} s against a "
            f"{timeout:g} s timeout, so it most likely timed out: {shown}."
        )
    return f"{head} failed (asv stored no value; see the runner's log): {shown}."
