"""Load an asv results directory into flat records, reporting what is broken.

asv's own loader (:meth:`asv.results.Results.load`) decodes each result
file; this module adds what asv leaves to log warnings: every file or
benchmark that cannot be used becomes a :class:`Problem` with a sentence a
human can act on, and nothing is fatal. A GPU whose files are all broken
still shows up, as Problems naming that machine, so a dashboard can say
"no data from a100-sxm4-80gb" instead of quietly drawing two GPUs.

Machine information (``results/<machine>/machine.json``) is attached to
every record as ``Record.machine_info``: one read-only mapping per machine,
shared by all of its records and excluded from equality and hashing.

The physical GPU that measured a record is ``Record.gpu_uuid``, from the tag
``ltx2k shard-run`` writes into the result file (:mod:`ltx2k.history.tags`);
None for results a plain ``asv run`` wrote, which name only the GPU model.
"""

from __future__ import annotations

import ast
import functools
import itertools
import json
import math
import os
import re
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from ltx2k import asv_compat
from ltx2k.history import names
from ltx2k.history.tags import tags_of

# asv stores the API version in every file; these are the versions asv 0.6 writes.
RESULTS_API_VERSION = 2
MACHINE_API_VERSION = 1
BENCHMARKS_API_VERSION = 2

# asv's default benchmark timeout (seconds), used when benchmarks.json is unreadable.
DEFAULT_TIMEOUT_S = 60.0

_EMPTY: Mapping = MappingProxyType({})

# Bounds on what is read at all. A result file of the whole suite is well under
# a megabyte; asv's files nest five levels deep and hold no integer longer than
# a millisecond date. Past these, a file is hostile or broken, and parsing it
# would exhaust memory, the parser's recursion, or Python's int-digit limit.
MAX_FILE_BYTES = 64 * 2**20
MAX_JSON_DEPTH = 64
MAX_INT_DIGITS = 40

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


@dataclass(frozen=True)
class Record:
    """One value: machine x commit x env x benchmark x parameter combination."""

    machine: str
    commit: str
    date: int  # commit date, ms since epoch, as asv stores it
    benchmark: str  # "bench_kernels.SplitRope.time_device_cold"
    params: tuple[tuple[str, str], ...]  # (("variant", "blocked"), ("shape", "B1_...")), unquoted
    value: float | None  # None: failed / skipped / timed out
    ci_99: tuple[float, float] | None
    q_25: float | None
    q_75: float | None
    samples: tuple[float, ...] | None
    number: int | None
    repeat: int | None
    unit: str  # from results/benchmarks.json ("seconds", "allocations", "%"), "" if unknown
    env: str
    machine_info: Mapping = field(
        default_factory=lambda: _EMPTY, compare=False, hash=False, repr=False
    )
    gpu_uuid: str | None = None  # "GPU-..." from shard-run's tag; None if the file has none
    path: str = field(default="", compare=False, hash=False, repr=False)  # its result file

    @property
    def param_dict(self) -> dict[str, str]:
        return dict(self.params)

    @property
    def stats(self) -> dict | None:
        """The stats dict in asv's own shape, as :func:`asv._stats.is_different` wants it."""
        if self.ci_99 is None:
            return None
        return {
            "ci_99_a": self.ci_99[0],
            "ci_99_b": self.ci_99[1],
            "q_25": self.q_25,
            "q_75": self.q_75,
            "number": self.number,
            "repeat": self.repeat,
        }


# Benchmarks without a value for these reasons are expected (a shape a GPU does
# not run, warm L2 beyond twice the L2): counted apart from the problems, which
# they would drown if listed one by one.
QUIET_KINDS = ("skipped",)


@dataclass(frozen=True)
class Problem:
    """Something in the results directory that could not be used.

    ``kind`` is one of: ``"corrupt"`` (not JSON, or JSON of the wrong shape),
    ``"truncated"`` (JSON that stops early, including an empty file),
    ``"unreadable"`` (the OS refused to read it), ``"not-a-file"`` (a symlink,
    FIFO or device where a file or folder was expected: never followed or read),
    ``"too-large"`` (over MAX_FILE_BYTES), ``"bad-value"`` (a field of the wrong
    type, non-finite, out of range, or an absurd date), ``"bad-name"`` (a benchmark,
    parameter or environment name asv's pages cannot show safely, see
    :mod:`ltx2k.history.names`), ``"bad-machine-name"``, ``"wrong-version"`` (an asv
    file format this asv does not read), ``"missing-machine-json"``,
    ``"bad-machine-json"``, ``"machine-mismatch"`` (a file filed under another
    machine's directory), ``"empty-machine"`` (a machine directory with no
    result files), ``"no-usable-results"`` (a machine whose every file is
    broken), ``"missing-benchmarks-json"``, ``"unknown-benchmark"`` (a result
    for a benchmark benchmarks.json does not describe), ``"failed"``,
    ``"timeout"`` and ``"skipped"`` (benchmarks without a value).
    """

    path: str
    machine: str | None
    kind: str
    message: str
    # The one benchmark of the file at *path* that is unusable; None: the whole file.
    # Where it applies, not what the problem is: left out of equality, so a Problem
    # read back from a report's JSON (which does not carry it) equals the original.
    benchmark: str | None = field(default=None, compare=False)


# JSON literals asv writes (Python's json writes NaN and Infinity for float specials).
_LITERALS = ("true", "false", "null", "NaN", "Infinity", "-Infinity")


def _cut_short(text: str, pos: int) -> bool:
    """Whether a JSON error at ``pos`` means the text stops early: the parser ran off the
    end, or what is left from ``pos`` is one token cut mid-way (the parser reports a cut
    literal or string at its first character and a cut number at its "." or "e")."""
    rest = text[pos:].rstrip()
    if not rest:
        return True
    if any(lit.startswith(rest) for lit in _LITERALS):
        return True
    # a number cut after its "." or exponent mark: the parser stops at that character
    if re.fullmatch(r"[-+.eE0-9]+", rest):
        return True
    # an unterminated string: no unescaped closing quote after the opening one
    return rest.startswith('"') and re.search(r'(?<!\\)"', rest[1:]) is None


# What a window is chosen from: (machine, commit) -> (commit date, env names) of every
# result file whose commit and date could be read.
FileIndex = Mapping[tuple[str, str], tuple[int, frozenset]]


def load_results(
    results_dir, *, select: Callable[[FileIndex], set[tuple[str, str]]] | None = None
) -> tuple[list[Record], list[Problem]]:
    """Read every ``<machine>/*.json`` under *results_dir*.

    Returns all records (failed ones too, with ``value=None``) sorted by
    machine, date, benchmark and params, and every problem found. Only a
    *results_dir* that is not a directory raises (``ValueError``).

    *select* bounds the work by a window of commits: it is called once with the
    :data:`FileIndex` of the whole history and returns the (machine, commit) pairs
    to load. Files of other pairs are parsed once for their commit and date and
    dropped, unchecked; a file whose commit or date cannot be read is always
    loaded, so that its problem is reported. Memory then follows the window, and
    time grows with the history by one JSON parse per file.
    """
    root = Path(os.fspath(results_dir))
    if not root.is_dir():
        raise ValueError(f"results_dir={os.fspath(results_dir)!r} is not a directory")

    problems: list[Problem] = []
    benchmarks = _load_benchmarks_json(root, problems)
    records: list[Record] = []
    unknown: dict[str, str] = {}
    machine_dirs = []
    for machine_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        if machine_dir.name.startswith("."):
            continue  # .git of a store checkout, editor folders
        if machine_dir.is_symlink():
            problems.append(
                Problem(
                    str(machine_dir),
                    None,
                    "not-a-file",
                    f"{machine_dir} is a symbolic link, not a machine directory; it is "
                    "not followed (it could point anywhere on this host).",
                )
            )
            continue
        why = names.file_name(machine_dir.name, "machine name")
        if why:
            problems.append(
                Problem(
                    str(machine_dir),
                    None,
                    "bad-machine-name",
                    f"{why}; the directory {machine_dir} is not loaded or published.",
                )
            )
            continue
        machine_dirs.append(machine_dir)
    keep = None
    if select is not None:
        peeked = {d.name: {p: _peek(p) for p in _result_files(d)} for d in machine_dirs}
        index: dict[tuple[str, str], tuple[int, frozenset]] = {}
        for machine, files in peeked.items():
            for head in files.values():
                if head is not None:
                    date, envs = index.get((machine, head[0]), (head[1], frozenset()))
                    index[(machine, head[0])] = (date, envs | {head[2]})
        chosen = set(select(MappingProxyType(index)))
        keep = {
            p
            for machine, files in peeked.items()
            for p, head in files.items()
            if head is None or (machine, head[0]) in chosen
        }
    for machine_dir in machine_dirs:
        records.extend(_load_machine(machine_dir, benchmarks, problems, unknown, keep))
    for name, path in sorted(unknown.items()):
        problems.append(
            Problem(
                path,
                None,
                "unknown-benchmark",
                f"Benchmark {name!r} has results but is not described in "
                "benchmarks.json, so its unit and parameter names are unknown "
                "(re-run `asv run` or push an up-to-date benchmarks.json).",
            )
        )
    records.sort(key=lambda r: (r.machine, r.date, r.commit, r.benchmark, r.params, r.env))
    return records, problems


# --- files ---------------------------------------------------------------------------


def _file_type(mode: int) -> str:
    for test, name in (
        (stat.S_ISLNK, "symbolic link"),
        (stat.S_ISFIFO, "FIFO"),
        (stat.S_ISSOCK, "socket"),
        (stat.S_ISCHR, "character device"),
        (stat.S_ISBLK, "block device"),
        (stat.S_ISDIR, "directory"),
    ):
        if test(mode):
            return name
    return "special file"


def _read_bytes(path: Path) -> bytes:
    """A regular file's bytes, never through a link and never blocking on a FIFO.

    Raises _NotRegular (its file type) or _TooLarge (its size), or OSError.
    """
    mode = path.lstat().st_mode
    if not stat.S_ISREG(mode):
        raise _NotRegular(_file_type(mode))
    # O_NONBLOCK and O_NOFOLLOW: swapped for a FIFO or a link since the lstat, the
    # open neither waits for a writer nor follows; fstat then tells what was opened.
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, "rb") as f:
        mode = os.fstat(f.fileno()).st_mode
        if not stat.S_ISREG(mode):
            raise _NotRegular(_file_type(mode))
        data = f.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise _TooLarge(path.stat().st_size)
    return data


class _NotRegular(Exception):
    pass


class _TooLarge(Exception):
    pass


_JSON_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"')
_BRACKET = re.compile(r"[\[\]{}]")


def _nesting(text: str) -> int:
    """How deep the JSON nests, counted before parsing (the parser recurses per level)."""
    depth = deepest = 0
    for m in _BRACKET.finditer(_JSON_STRING.sub("", text)):
        if m.group() in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > MAX_JSON_DEPTH:
                    break
        else:
            depth -= 1
    return deepest


def _bounded_int(digits: str) -> int:
    if len(digits.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError(
            f"an integer of {len(digits.lstrip('-'))} digits (at most {MAX_INT_DIGITS})"
        )
    return int(digits)


def parse_json(text: str):
    """``json.loads`` with nesting depth and integer size bounded (ValueError past them)."""
    depth = _nesting(text)
    if depth > MAX_JSON_DEPTH:
        raise ValueError(f"JSON nested more than {MAX_JSON_DEPTH} levels deep")
    return json.loads(text, parse_int=_bounded_int)


def _read_json(path: Path, machine: str | None, problems: list[Problem], what: str):
    """Parse one JSON file, or record why it cannot be parsed and return None."""
    try:
        text = _read_bytes(path).decode("utf-8")
    except _NotRegular as e:
        problems.append(
            Problem(
                str(path),
                machine,
                # a directory is what the OS itself refuses to read (EISDIR)
                "unreadable" if str(e) == "directory" else "not-a-file",
                f"{what.capitalize()} {path} is a {e}, not a regular file; it is not read "
                "(a link could point anywhere on this host, a FIFO would block).",
            )
        )
        return None
    except _TooLarge as e:
        problems.append(
            Problem(
                str(path),
                machine,
                "too-large",
                f"{what.capitalize()} {path} is {e} bytes, over the {MAX_FILE_BYTES} bytes "
                "an asv file can reasonably hold; it is not read.",
            )
        )
        return None
    except OSError as e:
        problems.append(
            Problem(str(path), machine, "unreadable", f"Cannot read {what} {path}: {e}.")
        )
        return None
    except UnicodeDecodeError as e:
        problems.append(
            Problem(
                str(path),
                machine,
                "corrupt",
                f"{what.capitalize()} {path} is not text (invalid UTF-8 at byte {e.start}); "
                "it is not an asv file or was overwritten with binary data.",
            )
        )
        return None
    if not text.strip():
        problems.append(
            Problem(
                str(path),
                machine,
                "truncated",
                f"{what.capitalize()} {path} is empty (0 bytes of JSON); the run that "
                "wrote it was probably interrupted.",
            )
        )
        return None
    try:
        return parse_json(text)
    except json.JSONDecodeError as e:
        # The parser ran off the end of the input: the file was cut short
        # (disk full, killed runner, partial copy), not scrambled.
        if _cut_short(text, e.pos):
            problems.append(
                Problem(
                    str(path),
                    machine,
                    "truncated",
                    f"{what.capitalize()} {path} is truncated: its JSON stops after "
                    f"{len(text)} bytes ({e.msg}); the run that wrote it was probably "
                    "interrupted.",
                )
            )
        else:
            problems.append(
                Problem(
                    str(path),
                    machine,
                    "corrupt",
                    f"{what.capitalize()} {path} is not valid JSON ({e.msg} at line "
                    f"{e.lineno}, column {e.colno}).",
                )
            )
        return None
    except (ValueError, RecursionError) as e:
        problems.append(
            Problem(
                str(path),
                machine,
                "corrupt",
                f"{what.capitalize()} {path} is not an asv file: {e}; it is not read.",
            )
        )
        return None


def _check_version(data, path: Path, machine, expected: int, problems, what: str) -> bool:
    if not isinstance(data, dict):
        problems.append(
            Problem(
                str(path),
                machine,
                "corrupt",
                f"{what.capitalize()} {path} holds a JSON {type(data).__name__}, not an object.",
            )
        )
        return False
    version = data.get("version")
    if version != expected:
        problems.append(
            Problem(
                str(path),
                machine,
                "wrong-version",
                f"{what.capitalize()} {path} has format version {version!r}; this asv "
                f"reads version {expected} (run `asv update`, or use a matching asv).",
            )
        )
        return False
    return True


def _load_benchmarks_json(root: Path, problems: list[Problem]) -> dict:
    path = root / "benchmarks.json"
    if not os.path.lexists(path):
        problems.append(
            Problem(
                str(path),
                None,
                "missing-benchmarks-json",
                f"{path} is missing: units and parameter names are unknown, and "
                "`asv publish` will not run (copy it from any runner's results).",
            )
        )
        return {}
    data = _read_json(path, None, problems, "benchmarks file")
    if data is None or not _check_version(
        data, path, None, BENCHMARKS_API_VERSION, problems, "benchmarks file"
    ):
        return {}
    out = {}
    for name, meta in data.items():
        if name == "version" or not isinstance(meta, dict):
            continue
        why = names.benchmark(name) or _bad_meta(meta)
        if why:
            problems.append(
                Problem(
                    str(path),
                    None,
                    "bad-name",
                    f"Benchmark {name[:200]!r} in {path}: {why}; it is left out of the "
                    "dashboard and the regression check.",
                    benchmark=name,
                )
            )
            continue
        out[name] = meta
    return out


def _bad_machine_fields(data: dict) -> str | None:
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


def _bad_meta(meta: dict) -> str | None:
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
    if meta.get("timeout") is not None and _number(meta["timeout"], 0.0, MAX_SECONDS) is None:
        return f"field 'timeout' is {meta['timeout']!r}, not a number of seconds"
    return None


def _load_machine_json(machine_dir: Path, problems: list[Problem]) -> Mapping:
    path = machine_dir / "machine.json"
    name = machine_dir.name
    if not path.exists():
        problems.append(
            Problem(
                str(path),
                name,
                "missing-machine-json",
                f"Machine {name!r} has no machine.json: its results (if any) are loaded, but "
                "`asv publish` skips this machine until a runner writes one "
                "(`asv machine` or `ltx2k machine --write`).",
            )
        )
        return _EMPTY
    sink: list[Problem] = []
    data = _read_json(path, name, sink, "machine file")
    if data is not None and _check_version(
        data, path, name, MACHINE_API_VERSION, sink, "machine file"
    ):
        why = _bad_machine_fields(data)
        if why:
            sink.append(Problem(str(path), name, "bad-machine-json", f"{path}: {why}."))
        elif data.get("machine") == name:
            return MappingProxyType({k: v for k, v in data.items() if k != "version"})
        else:
            sink.append(
                Problem(
                    str(path),
                    name,
                    "bad-machine-json",
                    f"{path} names machine {data.get('machine')!r}, not {name!r}.",
                )
            )
    for p in sink:
        problems.append(
            Problem(
                p.path,
                name,
                "bad-machine-json",
                f"{p.message} Results of {name!r} are loaded without machine information, "
                "and `asv publish` skips this machine.",
            )
        )
    return _EMPTY


def _result_files(machine_dir: Path) -> list[Path]:
    return sorted(
        p for p in machine_dir.iterdir() if p.suffix == ".json" and p.name != "machine.json"
    )


def _peek(path: Path) -> tuple[str, int, str] | None:
    """(commit, date, env name) of a result file, or None where any of them is unusable."""
    try:
        data = parse_json(_read_bytes(path).decode("utf-8"))
    except Exception:  # any reason: the full load reports it
        return None
    if not isinstance(data, dict):
        return None
    commit, date, env = data.get("commit_hash"), data.get("date"), data.get("env_name")
    if not isinstance(commit, str) or not _HEX.fullmatch(commit):
        return None
    if _number(date, MIN_DATE_MS, MAX_DATE_MS) is None:
        return None
    return commit, int(date), env if isinstance(env, str) else ""


def _load_machine(
    machine_dir: Path,
    benchmarks: dict,
    problems: list[Problem],
    unknown: dict[str, str],
    keep: set[Path] | None = None,
) -> list[Record]:
    """The records of one machine's result files (of those in *keep*, when given)."""
    name = machine_dir.name
    info = _load_machine_json(machine_dir, problems)
    files = _result_files(machine_dir)
    if not files:
        problems.append(
            Problem(
                str(machine_dir),
                name,
                "empty-machine",
                f"Machine {name!r} has a results directory but no result files; its "
                "runner never finished `asv run` or never pushed its results.",
            )
        )
        return []

    records: list[Record] = []
    usable = 0
    if keep is not None:
        files = [p for p in files if p in keep]
        if not files:
            return []  # none in the window: nothing to say about this machine
    for path in files:
        n_before = len(problems)
        data = _read_json(path, name, problems, "result file")
        if data is None or not _check_version(
            data, path, name, RESULTS_API_VERSION, problems, "result file"
        ):
            continue
        try:
            res = asv_compat.load_result(path)
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            del problems[n_before:]
            problems.append(
                Problem(
                    str(path),
                    name,
                    "corrupt",
                    f"Result file {path} is JSON but not an asv result: {e}.",
                )
            )
            continue
        file_machine = (res.params or {}).get("machine") if isinstance(res.params, dict) else None
        if file_machine != name:
            problems.append(
                Problem(
                    str(path),
                    name,
                    "machine-mismatch",
                    f"Result file {path} says it was measured on {file_machine!r} but sits "
                    f"in the directory of {name!r}; it is ignored rather than credited "
                    "to the wrong GPU.",
                )
            )
            continue
        why = _bad_file_fields(res)
        if why:
            problems.append(Problem(str(path), name, "bad-value", f"Result file {path}: {why}."))
            continue
        usable += 1
        gpus = _gpu_uuids(data)
        records.extend(_records_of(res, path, name, info, benchmarks, problems, unknown, gpus))

    if usable == 0:
        problems.append(
            Problem(
                str(machine_dir),
                name,
                "no-usable-results",
                f"Machine {name!r} has {len(files)} result file(s) and none could be "
                "loaded; see the other problems for this machine.",
            )
        )
    return records


# --- values ----------------------------------------------------------------------------


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


_HEX = re.compile(r"[0-9a-fA-F]{4,64}")


def _number(x, low: float, high: float) -> float | None:
    """*x* as a float when it is a JSON number in [low, high], else None."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    x = float(x)
    return x if low <= x <= high else None


def _bad_file_fields(res) -> str | None:
    """Why the fields that hold for the whole result file are unusable, or None."""
    if not isinstance(res.commit_hash, str) or not _HEX.fullmatch(res.commit_hash):
        return f"field 'commit_hash' is {str(res.commit_hash)[:80]!r}, not a git commit hash"
    if _number(res.date, MIN_DATE_MS, MAX_DATE_MS) is None:
        return (
            f"field 'date' is {str(res.date)[:80]!r}, not a commit date in ms since the "
            "epoch (1970 to 2200)"
        )
    why = names.file_name(asv_compat.result_env_name(res), "field 'env_name'")
    if why:
        return why
    return None


class _BadField(ValueError):
    """One field of one benchmark in a result file, and why it cannot be used."""

    def __init__(self, field: str, why: str):
        super().__init__(f"field {field!r} {why}")


def _field_float(st: Mapping, key: str, low: float, high: float, nan_ok: bool = True):
    x = st.get(key)
    if x is None or (nan_ok and isinstance(x, float) and math.isnan(x)):
        return None
    out = _number(x, low, high)
    if out is None:
        raise _BadField(f"stats_{key}", f"is {str(x)[:80]!r}, not a number in [{low:g}, {high:g}]")
    return out


def _field_int(st: Mapping, key: str) -> int | None:
    x = st.get(key)
    if x is None:
        return None
    if _number(x, 1, MAX_COUNT) is None or float(x) != int(x):
        raise _BadField(f"stats_{key}", f"is {str(x)[:80]!r}, not a whole number >= 1")
    return int(x)


def _value_range(unit: str) -> tuple[float, float]:
    """Values a metric of *unit* can take: a time is positive and bounded."""
    if unit == "seconds":
        return (math.ulp(0.0), MAX_SECONDS)
    return (0.0, MAX_COUNT)


def _opt_float(x) -> float | None:
    if x is None:
        return None
    x = float(x)
    return None if math.isnan(x) else x


def _gpu_uuids(data) -> dict[str, str]:
    """benchmark -> GPU UUID from the file's shard-run tag; a malformed entry is no GPU."""
    out = {}
    for name, tag in tags_of(data).items():
        uuid = tag.get("gpu_uuid") if isinstance(tag, Mapping) else None
        if isinstance(uuid, str) and uuid:
            out[name] = uuid
    return out


def _records_of(
    res, path: Path, machine, info, benchmarks, problems, unknown, gpus: Mapping[str, str]
) -> list[Record]:
    out: list[Record] = []
    env = asv_compat.result_env_name(res)
    where = str(path)  # one string shared by the file's records
    for name in sorted(res.get_all_result_keys()):
        why = names.benchmark(name) if isinstance(name, str) else "not a string"
        if why:
            problems.append(
                Problem(
                    str(path),
                    machine,
                    "bad-name",
                    f"Benchmark {str(name)[:200]!r} in {path}: {why}; it is left out of the "
                    "dashboard and the regression check.",
                    benchmark=str(name),
                )
            )
            continue
        meta = benchmarks.get(name)
        if meta is None and benchmarks:
            unknown.setdefault(name, str(path))
        meta = meta or {}
        try:
            rows = _rows_of(res, name, meta)
            cell_records, failed = _cells(res, name, meta, rows, machine, info, env, gpus, where)
        except _BadField as e:
            problems.append(
                Problem(
                    str(path),
                    machine,
                    "bad-value",
                    f"Benchmark {name} in {path}: {e}; this benchmark of this file is left "
                    "out of the dashboard and the regression check.",
                    benchmark=name,
                )
            )
            continue
        except (TypeError, ValueError, IndexError, AttributeError, OverflowError) as e:
            problems.append(
                Problem(
                    str(path),
                    machine,
                    "corrupt",
                    f"Benchmark {name} in {path} has malformed data and is ignored: {e}.",
                    benchmark=name,
                )
            )
            continue
        out.extend(cell_records)
        for kind, labels in failed.items():
            problems.append(
                Problem(
                    str(path),
                    machine,
                    kind,
                    _missing_message(kind, name, res, meta, labels, len(rows)),
                    benchmark=name,
                )
            )
    return out


def _cells(res, name, meta, rows, machine, info, env, gpus, path: str):
    """The records of one benchmark, every field checked; raises _BadField on the first bad one."""
    unit = str(meta.get("unit") or "")
    low, high = _value_range(unit)
    failed: dict[str, list[str]] = {}
    out = []
    for (params, raw_value), value, stats, samples in rows:
        for _, v in params:
            why = _param_value_problem(v)  # a str: _unquote made it
            if why:
                raise _BadField("params", why)
        if value is None:
            kind = _why_missing(res, name, meta, raw_value)
            failed.setdefault(kind, []).append(_label(params))
        elif not low <= value <= high:
            raise _BadField(
                "result", f"is {value!r} for {_label(params)}, not in [{low:g}, {high:g}]"
            )
        st = stats or {}
        ci = None
        # asv stores -inf/inf for a bound its few samples cannot give.
        a = _field_float(st, "ci_99_a", -math.inf, math.inf)
        b = _field_float(st, "ci_99_b", -math.inf, math.inf)
        if a is not None and b is not None:
            if a > b:
                raise _BadField("stats_ci_99_a", f"is {a!r}, above stats_ci_99_b {b!r}")
            ci = (a, b)
        if samples is not None and not isinstance(samples, list):
            raise _BadField("samples", f"is {str(samples)[:80]!r}, not a list of numbers")
        checked = []
        for x in samples or ():
            xf = _number(x, low, high)
            if xf is None:
                raise _BadField(
                    "samples", f"holds {str(x)[:80]!r}, not a number in [{low:g}, {high:g}]"
                )
            checked.append(xf)
        out.append(
            Record(
                machine=machine,
                commit=str(res.commit_hash),
                date=int(res.date),
                benchmark=name,
                params=params,
                value=value,
                ci_99=ci,
                q_25=_field_float(st, "q_25", low, high),
                q_75=_field_float(st, "q_75", low, high),
                samples=tuple(checked) or None,
                number=_field_int(st, "number"),
                repeat=_field_int(st, "repeat"),
                unit=unit,
                env=str(env),
                machine_info=info,
                gpu_uuid=gpus.get(name),
                path=path,
            )
        )
    return out, failed


def _rows_of(res, name: str, meta: dict):
    """Yield ((params, raw_value), value, stats, samples) per parameter combination."""
    bparams = res.get_result_params(name) or []
    if not isinstance(bparams, list) or not all(isinstance(p, list) for p in bparams):
        raise ValueError(f"parameter lists {bparams!r} are not lists")
    names = list(meta.get("param_names") or [])
    if len(names) != len(bparams):
        # Without benchmarks.json asv itself cannot name parameters either.
        names = [f"param{i + 1}" for i in range(len(bparams))]
    combos = list(itertools.product(*bparams))
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
            raise TypeError(f"value {v!r} for {_label(params)} is not a number")
        if st is not None and not isinstance(st, dict):
            raise TypeError(f"stats {st!r} for {_label(params)} are not a mapping")
        value = None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)
        rows.append(((params, v), value, st if value is not None else None, sm))
    return rows


def _why_missing(res, name: str, meta: dict, value_raw) -> str:
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
    return _number(durations.get(name), 0.0, math.inf)


def _label(params: tuple[tuple[str, str], ...]) -> str:
    return ", ".join(f"{k}={v}" for k, v in params) or "(no parameters)"


def _missing_message(kind, name, res, meta, labels: list[str], total: int) -> str:
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
