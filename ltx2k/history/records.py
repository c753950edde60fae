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

Reading a file without trusting it is :mod:`ltx2k.history.jsonfile`; what each of
its fields may hold, :mod:`ltx2k.history.fields`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from ltx2k.history import fields, jsonfile, names
from ltx2k.history.jsonfile import (
    BENCHMARKS_API_VERSION,
    MACHINE_API_VERSION,
    RESULTS_API_VERSION,
)
from ltx2k.runner import asv_compat

_EMPTY: Mapping = MappingProxyType({})


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
    # The benchmark's version asv stores with the result (a hash of its code, or the
    # benchmark's own ``version``): results of two versions measure different code, and
    # asv compares and draws only results of one version. None: the file stores none.
    bench_version: str | None = None
    path: str = field(default="", compare=False, hash=False, repr=False)  # its result file
    # Why ``value`` is None: "failed" (asv stored null: the benchmark raised, or the commit
    # did not build), "timeout" or "skipped" (NaN: not selected, or NotImplementedError),
    # as :func:`ltx2k.history.fields.why_missing` tells them apart. None with a value.
    missing: str | None = None

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
    ``"too-large"`` (over jsonfile.MAX_FILE_BYTES), ``"bad-value"`` (a field of the wrong
    type, non-finite, out of range, or an absurd date), ``"bad-name"`` (a benchmark,
    parameter or environment name asv's pages cannot show safely, see
    :mod:`ltx2k.history.names`), ``"bad-machine-name"``, ``"wrong-version"`` (an asv
    file format this asv does not read), ``"missing-machine-json"``,
    ``"bad-machine-json"``, ``"machine-mismatch"`` (a file filed under another
    machine's directory, or measured on another GPU than its machine.json names),
    ``"empty-machine"`` (a machine directory with no
    result files), ``"no-usable-results"`` (a machine whose every file is
    broken), ``"no-results"`` (a result file of a run stopped before its first
    benchmark finished), ``"commit-mismatch"`` (a result file whose name and
    ``commit_hash`` field disagree, or whose field is not a full commit hash: its
    records keep the field's commit, as asv files them), ``"missing-benchmarks-json"``,
    ``"unknown-benchmark"`` (a result for a benchmark benchmarks.json does not
    describe), ``"failed"``,
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
    benchmarks = load_benchmarks_json(root, problems)
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
    # Read before the window is chosen (a file of another GPU is no measurement of this
    # machine); its problems are filed in _load_machine, in the order they always were.
    infos = {}
    for d in machine_dirs:
        sink: list[Problem] = []
        infos[d.name] = (_load_machine_json(d, sink), sink)
    keep = None
    if select is not None:
        peeked = {
            d.name: {
                p: jsonfile.peek(p, d.name, infos[d.name][0].get("gpu")) for p in _result_files(d)
            }
            for d in machine_dirs
        }
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
        # Files left out unchecked still say when their name and commit disagree: a
        # head whose file carries another commit is otherwise just "not measured".
        for machine, files in peeked.items():
            for p, head in files.items():
                if p not in keep:
                    _check_commit_name(p, machine, head[0], problems)
    for machine_dir in machine_dirs:
        info, info_problems = infos[machine_dir.name]
        problems.extend(info_problems)
        records.extend(_load_machine(machine_dir, info, benchmarks, problems, unknown, keep))
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


def _read(path: Path, machine: str | None, problems: list[Problem], what: str, version: int):
    """The JSON object of asv format *version* in *path*, or None with its Problem filed."""
    try:
        return jsonfile.read_asv_file(path, what, version)
    except jsonfile.Unusable as e:
        problems.append(Problem(str(path), machine, e.kind, e.message))
        return None


def load_benchmarks_json(root: Path, problems: list[Problem]) -> dict:
    """Benchmark name -> its description in *root*'s benchmarks.json ({} when it is missing
    or unusable, said in *problems*)."""
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
    data = _read(path, None, problems, "benchmarks file", BENCHMARKS_API_VERSION)
    if data is None:
        return {}
    out = {}
    not_objects = []
    for name, meta in data.items():
        if name == "version":
            continue
        if not isinstance(meta, dict):
            not_objects.append((name, meta))
            continue
        why = names.benchmark(name) or fields.bad_meta(meta)
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
    if not_objects:
        shown = "; ".join(f"{n[:80]!r} is {_shown(m)}" for n, m in not_objects[:3])
        more = f"; and {len(not_objects) - 3} more" if len(not_objects) > 3 else ""
        problems.append(
            Problem(
                str(path),
                None,
                "corrupt",
                f"{len(not_objects)} benchmark entr{'y' if len(not_objects) == 1 else 'ies'} "
                f"of {path} {'is' if len(not_objects) == 1 else 'are'} not a JSON object "
                f"({shown}{more}): their units and parameter names are unknown (re-run "
                "`asv run` or push an up-to-date benchmarks.json).",
            )
        )
    if not any(k != "version" for k in data):
        problems.append(
            Problem(
                str(path),
                None,
                "corrupt",
                f"{path} describes no benchmark (it holds only its version): units and "
                "parameter names of every result are unknown (re-run `asv run` or push an "
                "up-to-date benchmarks.json).",
            )
        )
    return out


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
    data = _read(path, name, sink, "machine file", MACHINE_API_VERSION)
    if data is not None:
        why = fields.bad_machine_fields(data)
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


def _check_commit_name(path: Path, machine: str, commit: str, problems: list[Problem]) -> None:
    """File a "commit-mismatch" Problem when result file *path*'s name does not start with
    its ``commit_hash`` field's first 8 characters, or the field is not a full hash.

    asv names a result file ``<commit_hash[:8]>-<env>.json`` and, reading it back, takes
    the commit from the field alone (``Results.load``; ``asv publish`` files the values
    under it); only ``asv run --skip-existing``, ``asv show`` and ``asv compare`` look a
    commit up by the name. The records keep the field's commit, as asv's pages would show
    them; the disagreement is said, since a commit named in full then finds no result in
    this file.
    """
    stem = path.name[: -len(".json")] if path.name.endswith(".json") else path.name
    prefix = stem.split("-", 1)[0]
    full = len(commit) in (40, 64)  # SHA-1 or SHA-256 git hash, as asv writes it
    if prefix == commit[:8] and full:
        return
    if prefix != commit[:8]:
        what = (
            f"Result file {path} is named for commit {prefix[:80]!r} but its field "
            f"'commit_hash' is {commit!r}"
        )
        if not full:
            what += ", not a full git commit hash (asv writes all 40 characters)"
    else:
        what = (
            f"Result file {path} has field 'commit_hash' {commit!r}, not a full git commit "
            "hash (asv writes all 40 characters)"
        )
    problems.append(
        Problem(
            str(path),
            machine,
            "commit-mismatch",
            f"{what}. "
            f"Its results are loaded under commit {commit[:12]!r}, from the field, as asv "
            "reads them; a commit named otherwise finds none in this file (rename the file "
            "or correct the field).",
        )
    )


def _result_files(machine_dir: Path) -> list[Path]:
    return sorted(
        p for p in machine_dir.iterdir() if p.suffix == ".json" and p.name != "machine.json"
    )


def _load_machine(
    machine_dir: Path,
    info: Mapping,
    benchmarks: dict,
    problems: list[Problem],
    unknown: dict[str, str],
    keep: set[Path] | None = None,
) -> list[Record]:
    """The records of one machine's result files (of those in *keep*, when given);
    *info* is its machine.json (:func:`_load_machine_json`)."""
    name = machine_dir.name
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
        data = _read(path, name, problems, "result file", RESULTS_API_VERSION)
        if data is None:
            continue
        try:
            res = asv_compat.load_result(path)
        except (KeyError, TypeError, ValueError, AttributeError) as e:
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
        gpu = fields.other_gpu(res.params, info.get("gpu"))
        if gpu is not None:
            problems.append(
                Problem(
                    str(path),
                    name,
                    "machine-mismatch",
                    f"Result file {path} was measured on GPU {gpu[:80]!r}, but the "
                    f"machine.json of {name!r} names GPU {str(info.get('gpu'))[:80]!r}: two "
                    "runners with different GPUs share one machine name (LTX2K_MACHINE). "
                    "It is ignored rather than mixed into another GPU's history; give each "
                    "GPU its own machine name.",
                )
            )
            continue
        why = fields.bad_file_fields(res)
        if why:
            problems.append(Problem(str(path), name, "bad-value", f"Result file {path}: {why}."))
            continue
        _check_commit_name(path, name, res.commit_hash, problems)
        if not res.get_all_result_keys():
            problems.append(
                Problem(
                    str(path),
                    name,
                    "no-results",
                    f"Result file {path} holds no benchmark results: its run stopped before "
                    "the first benchmark finished; its commit counts as not measured.",
                )
            )
            continue
        usable += 1
        gpus = fields.gpu_uuids(data)
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


# --- records ---------------------------------------------------------------------------


def _records_of(
    res, path: Path, machine, info, benchmarks, problems, unknown, gpus: Mapping[str, str]
) -> list[Record]:
    out: list[Record] = []
    env = asv_compat.result_env_name(res)
    where = str(path)  # one string shared by the file's records
    versions = res.benchmark_version if isinstance(res.benchmark_version, Mapping) else {}
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
            _check_values(res, name)
            rows = fields.rows_of(res, name, meta)
            version = versions.get(name)
            version = version if isinstance(version, str) and version else None
            cell_records, failed = _cells(
                res, name, meta, rows, machine, info, env, gpus, where, version
            )
        except fields.BadField as e:
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
                    fields.missing_message(kind, name, res, meta, labels, len(rows)),
                    benchmark=name,
                )
            )
    return out


def _cells(res, name, meta, rows, machine, info, env, gpus, path: str, version: str | None):
    """The records of one benchmark, every field checked; raises BadField on the first bad one."""
    unit = str(meta.get("unit") or "")
    low, high = fields.value_range(unit)
    failed: dict[str, list[str]] = {}
    out = []
    for (params, raw_value), value, stats, samples in rows:
        fields.check_params(params)
        kind = None
        if value is None:
            kind = fields.why_missing(res, name, meta, raw_value)
            failed.setdefault(kind, []).append(fields.label(params))
        elif not low <= value <= high:
            raise fields.BadField(
                "result", f"is {value!r} for {fields.label(params)}, not in [{low:g}, {high:g}]"
            )
        st = stats or {}
        ci = None
        # asv stores -inf/inf for a bound its few samples cannot give.
        a = fields.field_float(st, "ci_99_a", -math.inf, math.inf)
        b = fields.field_float(st, "ci_99_b", -math.inf, math.inf)
        if a is not None and b is not None:
            if a > b:
                raise fields.BadField("stats_ci_99_a", f"is {a!r}, above stats_ci_99_b {b!r}")
            ci = (a, b)
        if samples is not None and not isinstance(samples, list):
            raise fields.BadField("samples", f"is {str(samples)[:80]!r}, not a list of numbers")
        if samples and _floats_within(samples, low, high):
            checked = samples  # what the loop below would build, at C speed (most files)
        else:
            checked = []
            for x in samples or ():
                xf = fields.number(x, low, high)
                if xf is None:
                    raise fields.BadField(
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
                q_25=fields.field_float(st, "q_25", low, high),
                q_75=fields.field_float(st, "q_75", low, high),
                samples=tuple(checked) or None,
                number=fields.field_int(st, "number"),
                repeat=fields.field_int(st, "repeat"),
                unit=unit,
                env=str(env),
                machine_info=info,
                gpu_uuid=gpus.get(name),
                bench_version=version,
                path=path,
                missing=kind,
            )
        )
    return out, failed


_NUMBER_OR_NULL = frozenset({int, float, type(None)})


def _check_values(res, name: str) -> None:
    """Raise BadField when benchmark *name*'s stored values hold anything but numbers and
    nulls. JSON ``true``/``false`` come back as Python bools, which are ints: without this
    asv's accessors and ``float()`` would read them as 1.0 and 0.0."""
    raw = asv_compat.result_raw_values(res, name)
    items = raw if isinstance(raw, list) else [raw]
    if set(map(type, items)) <= _NUMBER_OR_NULL:
        return  # most files: every type checked at C speed (type(True) is bool, not int)
    for i, x in enumerate(items):
        if x is None or (isinstance(x, (int, float)) and not isinstance(x, bool)):
            continue
        raise fields.BadField(
            "result",
            f"holds {_shown(x)} as value {i + 1} of {len(items)}, not a number",
        )


def _shown(x) -> str:
    """*x* as a sentence names it: JSON's spelling for true/false, else a short repr."""
    if isinstance(x, bool):
        return f"JSON {str(x).lower()}"
    kind = {str: "string", list: "list", dict: "object"}.get(type(x))
    return f"{'a JSON ' + kind + ' ' if kind else ''}{repr(x)[:80]}"


def _floats_within(xs: list, low: float, high: float) -> bool:
    """Whether every item of *xs* is a float in [low, high] (NaN is not): then
    :func:`fields.number` would return each one unchanged."""
    return (
        set(map(type, xs)) == {float}
        and all(map(float(low).__le__, xs))
        and all(map(float(high).__ge__, xs))
    )
