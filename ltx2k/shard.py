"""``ltx2k shard-run``: one commit range, one asv process per GPU of the host.

How a run goes (:func:`shard_run`):

1. **Split.** The range is resolved the way ``asv run RANGE`` resolves it
   (``git rev-list --first-parent``, or ALL/NEW/EXISTING/TAGS/HASHFILE:) and
   dealt out round-robin (commit i to GPU i mod N), not in contiguous blocks:
   if two GPUs of one model differ by a constant, a block split turns that
   offset into a step at the block boundary that ``ltx2k regress`` would call a
   regression; round-robin turns it into commit-to-commit scatter, and each
   GPU covers the whole range, so a real step shows up on every GPU.
2. **Isolate.** Each shard gets a private work directory: its own asv config
   (``results_dir`` and ``env_dir`` inside it), so concurrent asv processes never
   write the same file, and ``asv run HASHFILE:<its commits>``. Result files the
   destination already holds for the shard's commits are copied in first,
   so ``asv run`` merges into them exactly as it would in place and
   ``--skip-existing*`` keep their meaning.
3. **Pin.** ``CUDA_VISIBLE_DEVICES`` holds the GPU's UUID, not its index: CUDA
   numbers devices fastest-first unless ``CUDA_DEVICE_ORDER=PCI_BUS_ID``, so an
   index could name a different GPU than nvidia-smi's. GPUs are listed with
   ``nvidia-smi`` (never torch), so the parent never creates a CUDA context.
4. **Phases** (the :class:`Policy`). Benchmarks whose name matches an
   *exclusive* regex run in a second phase, one GPU at a time while the others
   idle; all other benchmarks run on every GPU at once. The default keeps host
   latency exclusive, because it is the metric that shares the host's CPU
   cores, memory bandwidth and PCIe with the neighbours (docs/runners.md).
5. **Tag.** Every benchmark a shard measured gets its GPU identity and phase in
   the result file, under the top-level key :data:`TAG_KEY`::

       "ltx2k_shard": {"version": 1, "benchmarks": {"bench_kernels.SplitRope.time_host_latency":
           {"gpu_index": 1, "gpu_uuid": "GPU-...", "gpu_name": "NVIDIA H200",
            "mode": "exclusive", "concurrent_gpus": 1}}}

   Not in the machine fields and not in asv's ``env_vars``: ``asv publish``
   keys its graphs on every machine parameter and env var (a ``gpu_index``
   there would split each GPU type's history into one series per GPU index),
   an env var also changes the env name and so the result file name (``ltx2k
   regress`` could no longer compare two commits measured on different GPUs),
   and ``machine.json`` has one value per machine, not per GPU. asv ignores
   keys it does not know, and the file travels byte for byte through the
   store, so the tag survives; if asv itself rewrites the file later (a plain
   ``asv run`` of the same commit), the tag is dropped and the benchmark reads
   as "GPU unknown", never as the wrong GPU.
6. **Merge** (:func:`merge_results`), after each phase, into the one results
   directory (so a run stopped in its second phase keeps the first's): a result
   file is per machine x commit x env, so merging is a copy; a file the
   destination changed since it was copied in is a conflict, reported and never
   overwritten, and the shard's copy is kept in the work directory.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

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

TAG_KEY = "ltx2k_shard"
TAG_VERSION = 1
MODE_CONCURRENT = "concurrent"
MODE_EXCLUSIVE = "exclusive"

# asv run options shard-run consumes itself instead of passing them through.
_RANGE_OPTIONS = ("--bench", "--steps", "--date-period", "--machine")
_COMMIT_LINE = re.compile(r"For \S+ commit ([0-9a-f]{8})")

RunOne = Callable[[Sequence[str], Mapping[str, str], Path, Sequence[str]], int]


# --- GPUs ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Gpu:
    index: int  # nvidia-smi's index (PCI bus order)
    uuid: str
    name: str  # "NVIDIA H200"

    @property
    def label(self) -> str:
        return f"gpu{self.index}"


_QUERY = ["nvidia-smi", "--query-gpu=index,uuid,name", "--format=csv,noheader"]


def _nvidia_smi() -> str:
    try:
        proc = subprocess.run(_QUERY, capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        return ""  # no driver on this machine: no GPU
    except (OSError, subprocess.SubprocessError) as e:
        raise RuntimeError(f"{' '.join(_QUERY)} failed: {e}") from e
    if proc.returncode != 0:
        raise RuntimeError(
            f"{' '.join(_QUERY)} exited {proc.returncode}: {(proc.stderr or proc.stdout).strip()}"
        )
    return proc.stdout


def parse_gpu_query(text: str) -> list[Gpu]:
    """Parse ``nvidia-smi --query-gpu=index,uuid,name --format=csv,noheader``."""
    gpus = []
    for row in csv.reader(io.StringIO(text), skipinitialspace=True):
        if not row or not "".join(row).strip():
            continue
        if len(row) != 3 or not row[0].strip().isdigit() or not row[1].startswith("GPU-"):
            raise ValueError(f"unexpected nvidia-smi line {','.join(row)!r}")
        gpus.append(Gpu(int(row[0]), row[1].strip(), row[2].strip()))
    return gpus


def visible_gpus(gpus: Sequence[Gpu], environ: Mapping[str, str]) -> list[Gpu]:
    """The GPUs a CUDA process started with *environ* would see, in its order."""
    cvd = environ.get("CUDA_VISIBLE_DEVICES")
    if cvd is None:
        return list(gpus)
    entries = [e.strip() for e in cvd.split(",") if e.strip()]
    by_index = {g.index: g for g in gpus}
    mixed = len({g.name for g in gpus}) > 1
    out: list[Gpu] = []
    for e in entries:
        if e.lstrip("-").isdigit():
            if mixed and environ.get("CUDA_DEVICE_ORDER") != "PCI_BUS_ID":
                # CUDA's default order is fastest first: with different GPU
                # models, index e need not be nvidia-smi's GPU e.
                raise ValueError(
                    f"CUDA_VISIBLE_DEVICES={cvd!r} uses indices on a host with different GPU "
                    "models; set CUDA_DEVICE_ORDER=PCI_BUS_ID or list GPU UUIDs"
                )
            g = by_index.get(int(e))
        else:
            hits = [g for g in gpus if g.uuid.startswith(e)]  # CUDA accepts unique prefixes
            g = hits[0] if len(hits) == 1 else None
        if g is None:
            raise ValueError(
                f"CUDA_VISIBLE_DEVICES={cvd!r}: entry {e!r} matches no single GPU of "
                f"nvidia-smi ({', '.join(f'{x.index}:{x.uuid}' for x in gpus) or 'none'})"
            )
        if g not in out:
            out.append(g)
    return out


def list_gpus(environ: Mapping[str, str] | None = None, query: Callable[[], str] | None = None):
    """Visible GPUs, from nvidia-smi: no CUDA context is created in this process."""
    environ = os.environ if environ is None else environ
    return visible_gpus(parse_gpu_query((query or _nvidia_smi)()), environ)


def select_gpus(gpus: Sequence[Gpu], count) -> list[Gpu]:
    """``count``: "auto" (all of them) or a positive int (the first ``count``)."""
    if count == "auto":
        chosen = list(gpus)
    else:
        n = int(count) if isinstance(count, str) and count.isdigit() else count
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"gpus must be 'auto' or an int >= 1, got {count!r}")
        if n > len(gpus):
            raise ValueError(f"gpus={n} but only {len(gpus)} GPU(s) are visible")
        chosen = list(gpus[:n])
    if not chosen:
        raise ValueError(
            "no GPU visible (nvidia-smi lists none, or CUDA_VISIBLE_DEVICES hides them all); "
            "shard-run needs GPUs -- use `ltx2k run` on a CPU"
        )
    models = sorted({g.name for g in chosen})
    if len(models) > 1:
        # One machine name (the GPU model) for all shards: mixed models would
        # file one model's numbers under the other's history.
        raise ValueError(
            f"the selected GPUs are of different models {models}; pick one model with "
            "CUDA_VISIBLE_DEVICES"
        )
    return chosen


# --- commits ------------------------------------------------------------------------------


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
class AsvArgs:
    """``asv run`` arguments split into what shard-run consumes and what it passes on."""

    range_spec: str | None
    bench: tuple[str, ...]
    steps: int | None
    date_period: float | None
    skip_existing_commits: bool
    passthrough: tuple[str, ...]


class _ArgError(argparse.ArgumentParser):
    def error(self, message):
        raise ValueError(f"asv run arguments: {message}")


def _asv_run_parser() -> argparse.ArgumentParser:
    from asv.commands.run import Run

    p = _ArgError(prog="asv run", add_help=False)
    Run._setup_arguments(p)  # asv's own option table, so parsing matches `asv run`
    return p


def parse_asv_args(asv_args: Sequence[str]) -> AsvArgs:
    args = list(asv_args)
    if args and args[0] == "--":
        args = args[1:]
    parser = _asv_run_parser()
    ns = parser.parse_args(args)
    if ns.machine is not None:
        raise ValueError(
            f"asv run --machine {ns.machine!r}: shard-run names the machine after the GPU"
        )
    actions = {s: a for a in parser._actions for s in a.option_strings}
    keep: list[str] = []
    positional: list[str] = []
    i = 0
    while i < len(args):
        tok = args[i]
        i += 1
        if not tok.startswith("-") or tok == "-":
            positional.append(tok)
            continue
        opt, eq, _ = tok.partition("=")
        action = actions.get(opt)
        attached = bool(eq)
        if action is None and not tok.startswith("--") and tok[:2] in actions:
            action, attached = actions[tok[:2]], True  # -bREGEX
        if action is None:
            raise ValueError(f"asv run arguments: cannot place {tok!r}")
        tokens = [tok]
        # Consume the option's value the way argparse just did (it parsed these
        # same tokens without error above, so a required value is present).
        takes = action.nargs in (None, 1) or (
            action.nargs == "?" and i < len(args) and not args[i].startswith("-")
        )
        if takes and not attached:
            tokens.append(args[i])
            i += 1
        if set(action.option_strings) & set(_RANGE_OPTIONS):
            continue
        keep.extend(tokens)
    if len(positional) > 1 or (positional[:1] or [None])[0] != ns.range:
        raise ValueError(f"asv run arguments: expected at most one range, got {positional}")
    return AsvArgs(
        range_spec=ns.range,
        bench=tuple(ns.bench or ()),
        steps=ns.steps,
        date_period=ns.date_period,
        skip_existing_commits=bool(ns.skip_existing_commits),
        passthrough=tuple(keep),
    )


def resolve_commits(conf, args: AsvArgs, results_dir, machine: str) -> list[str]:
    """Full hashes ``asv run`` would benchmark for *args* (asv.commands.run.Run.run's switch)."""
    from asv import util
    from asv.repo import NoSuchNameError, get_repo
    from asv.results import get_existing_hashes, iter_results_for_machine_and_hash

    repo = get_repo(conf)
    spec = args.range_spec
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
    if args.date_period is not None:
        commits = repo.filter_date_period(commits, args.date_period, old)
    if args.steps is not None:
        commits = util.pick_n(commits, args.steps)
    commits = list(dict.fromkeys(repo.get_hash_from_name(c) for c in commits))
    if args.skip_existing_commits and Path(results_dir, machine).is_dir():
        # The shards' results dirs start (almost) empty, so asv's own check there
        # would skip nothing: decide here, against the destination.
        commits = [
            c
            for c in commits
            if not any(
                True for _ in iter_results_for_machine_and_hash(str(results_dir), machine, c)
            )
        ]
    return commits


# --- policy -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Policy:
    """Which benchmarks run one GPU at a time: regexes searched in the benchmark name."""

    exclusive: tuple[str, ...] = DEFAULT_EXCLUSIVE

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
        return cls(tuple(data["exclusive"]))


def partition(benchmarks: Iterable[Mapping], bench: Sequence[str], policy: Policy):
    """(concurrent, exclusive) benchmark names that ``asv run -b bench`` would run.

    *benchmarks* are the entries of asv's benchmarks.json; the ``-b`` filter is
    applied by asv's own :class:`asv.benchmarks.Benchmarks`, parameters included.
    """
    from asv.benchmarks import Benchmarks

    conf = argparse.Namespace(benchmark_dir="benchmarks")
    selected = Benchmarks(conf, list(benchmarks), regex=list(bench) or None)
    names = sorted(selected.keys())
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


# --- results: copy in, tag, merge ---------------------------------------------------------


def _result_files(results_dir: Path, machine: str) -> list[Path]:
    d = results_dir / machine
    if not d.is_dir():
        return []
    return sorted(p for p in d.glob("*.json") if p.name != "machine.json")


def copy_in(dest: Path, shard_results: Path, machine: str, commits: Iterable[str]) -> dict:
    """Copy *dest*'s result files of *commits* into the shard; {relative path: bytes}."""
    copied = {}
    for c in commits:
        for src in sorted((dest / machine).glob(f"{c[:8]}-*.json")):
            rel = f"{machine}/{src.name}"
            data = src.read_bytes()
            (shard_results / machine).mkdir(parents=True, exist_ok=True)
            (shard_results / rel).write_bytes(data)
            copied[rel] = data
    return copied


def _started(data: Mapping) -> dict[str, object]:
    cols = data.get("result_columns") or []
    if "started_at" not in cols:
        return {}
    i = cols.index("started_at")
    return {
        k: (v[i] if isinstance(v, list) and len(v) > i else None)
        for k, v in data.get("results", {}).items()
    }


def read_tags(path) -> dict[str, dict]:
    """Per-benchmark GPU identity of one result file ({} if it carries none)."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    tag = data.get(TAG_KEY) if isinstance(data, dict) else None
    return dict(tag.get("benchmarks", {})) if isinstance(tag, dict) else {}


def tag_results(
    shard_results: Path,
    machine: str,
    gpu: Gpu,
    modes: Mapping[str, tuple[str, int]],
    copied_in: Mapping[str, bytes],
) -> list[Path]:
    """Write the GPU identity of every benchmark measured by this shard into its files.

    A benchmark counts as measured here when its ``started_at`` differs from the
    copied-in file's; the others keep the tag they had (asv drops unknown keys
    when it rewrites a file, so old tags are carried over from the copied-in file).
    *modes* maps benchmark name -> (mode, GPUs running at the same time).
    """
    from asv import util

    tagged = []
    for path in _result_files(shard_results, machine):
        rel = f"{machine}/{path.name}"
        data = json.loads(path.read_text(encoding="utf-8"))
        old = json.loads(copied_in[rel]) if rel in copied_in else {}
        old_tags = (old.get(TAG_KEY) or {}).get("benchmarks", {}) if isinstance(old, dict) else {}
        before = _started(old) if old else {}
        now = _started(data)
        tags = {}
        for name in data.get("results", {}):
            if name in before and before[name] == now.get(name):
                if name in old_tags:
                    tags[name] = old_tags[name]
                continue
            mode, n = modes.get(name, (MODE_EXCLUSIVE, 1))
            tags[name] = {
                "gpu_index": gpu.index,
                "gpu_uuid": gpu.uuid,
                "gpu_name": gpu.name,
                "mode": mode,
                "concurrent_gpus": n,
            }
        tag = {"version": TAG_VERSION, "benchmarks": tags}
        if data.get(TAG_KEY) == tag or (not tags and TAG_KEY not in data):
            continue  # nothing measured here and nothing to carry: leave the bytes alone
        data[TAG_KEY] = tag
        version = data.pop("version", 2)
        util.write_json(str(path), data, api_version=version, compact=True)  # asv's own writer
        tagged.append(path)
    return tagged


@dataclass(frozen=True)
class Conflict:
    path: str  # relative to the results dir
    kept: str  # where the shard's copy still is
    reason: str


@dataclass
class MergeReport:
    copied: list[str] = field(default_factory=list)  # new in the destination
    replaced: list[str] = field(default_factory=list)  # updated by asv (copied in, unchanged since)
    unchanged: list[str] = field(default_factory=list)
    conflicts: list[Conflict] = field(default_factory=list)


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)  # readers see the old file or the new one, never half of one
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _merge_benchmarks(dest: Path, shard_dirs: Sequence[Path], report: MergeReport) -> None:
    from asv import util

    merged: dict = {}
    owner: dict[str, Path] = {}
    for d in shard_dirs:
        p = d / "benchmarks.json"
        if not p.exists():
            continue
        data = json.loads(p.read_text(encoding="utf-8"))
        for name, entry in data.items():
            if name == "version":
                continue
            if name in merged and merged[name] != entry:
                # The suite changed between two shards' discoveries.
                report.conflicts.append(
                    Conflict(
                        "benchmarks.json",
                        str(p),
                        f"shards describe {name} differently ({owner[name]} vs {p})",
                    )
                )
                continue
            merged[name], owner[name] = entry, p
    if not merged:
        return
    target = dest / "benchmarks.json"
    current = json.loads(target.read_text(encoding="utf-8")) if target.exists() else {}
    current.pop("version", None)
    # asv rewrites benchmarks.json on every run (it describes the current
    # suite); keep names only the destination knows, as the store does.
    new = {**current, **merged}
    if new == current:
        report.unchanged.append("benchmarks.json")
        return
    tmp = target.parent / f".benchmarks.json.{os.getpid()}.tmp"
    util.write_json(str(tmp), new, api_version=2)
    os.replace(tmp, target)
    (report.replaced if current else report.copied).append("benchmarks.json")


def _accumulate(total: MergeReport, rep: MergeReport) -> None:
    """Fold one landing's report into the run's: a file counts once, as its strongest change.

    Copied (new in dest) beats replaced beats unchanged: a file a first landing copied
    and a second one updated is still new to whoever reads the report. A conflict is
    kept once per path, its latest reason.
    """
    rank = {"copied": 2, "replaced": 1, "unchanged": 0}
    where = {rel: kind for kind in rank for rel in getattr(total, kind)}
    for kind in rank:
        for rel in getattr(rep, kind):
            old = where.get(rel)
            if old is None or rank[kind] > rank[old]:
                if old is not None:
                    getattr(total, old).remove(rel)
                getattr(total, kind).append(rel)
                where[rel] = kind
    paths = {c.path for c in rep.conflicts}
    total.conflicts[:] = [c for c in total.conflicts if c.path not in paths] + rep.conflicts


def merge_results(
    dest: Path, shard_dirs: Sequence[Path], copied_in: Mapping[str, bytes] | None = None
) -> MergeReport:
    """Merge shard results dirs into *dest*; never overwrite a file changed behind our back.

    A result file is copied if *dest* lacks it, left alone if identical, and
    replaced only if *dest*'s copy is byte-identical to the one copied into the
    shard (asv updated it, as an in-place ``asv run`` would). Anything else is a
    :class:`Conflict`: reported, *dest* untouched, the shard's copy kept.
    ``machine.json`` follows asv (every run rewrites it) unless shards disagree.
    """
    copied_in = dict(copied_in or {})
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    report = MergeReport()
    _merge_benchmarks(dest, shard_dirs, report)
    seen: dict[str, tuple[bytes, Path]] = {}
    for d in shard_dirs:
        for src in sorted(d.glob("*/*.json")):
            rel = f"{src.parent.name}/{src.name}"
            data = src.read_bytes()
            if rel in seen:
                if seen[rel][0] != data:
                    report.conflicts.append(
                        Conflict(
                            rel, str(src), f"two shards wrote different {rel} ({seen[rel][1]})"
                        )
                    )
                continue
            seen[rel] = (data, src)
            target = dest / rel
            if not target.exists():
                _atomic_write(target, data)
                report.copied.append(rel)
                continue
            current = target.read_bytes()
            if current == data:
                report.unchanged.append(rel)
            elif src.name == "machine.json" or copied_in.get(rel) == current:
                _atomic_write(target, data)
                report.replaced.append(rel)
            else:
                why = (
                    "the destination changed since it was copied into the shard"
                    if rel in copied_in
                    else "the destination already holds a different file"
                )
                report.conflicts.append(Conflict(rel, str(src), why))
    return report


# --- running ------------------------------------------------------------------------------


class _Log:
    def __init__(self, stream):
        self.stream = stream
        self.lock = threading.Lock()

    def __call__(self, msg: str) -> None:
        stream = sys.stderr if self.stream is True else self.stream
        if stream:
            with self.lock:
                print(f"ltx2k shard-run: {msg}", file=stream, flush=True)


@dataclass(frozen=True)
class Shard:
    gpu: Gpu
    commits: tuple[str, ...]
    work: Path

    @property
    def results(self) -> Path:
        return self.work / "results"


@dataclass
class ShardOutcome:
    gpu: Gpu
    commits: tuple[str, ...]
    returncodes: dict[str, int | None] = field(default_factory=dict)  # phase -> asv exit
    errors: list[str] = field(default_factory=list)


@dataclass
class ShardRunResult:
    commits: tuple[str, ...]
    concurrent: tuple[str, ...]
    exclusive: tuple[str, ...]
    shards: list[ShardOutcome]
    merge: MergeReport
    work_dir: Path | None  # kept (conflicts or errors), else None

    @property
    def exit_code(self) -> int:
        if self.merge.conflicts or any(o.errors for o in self.shards):
            return 1
        codes = [c for o in self.shards for c in o.returncodes.values()]
        return max((c for c in codes if c is not None), default=0)


MACHINE_FILE = ".asv-machine.json"


def shard_home(base: Mapping[str, str], home: Path) -> dict[str, str]:
    """Environment entries that give one shard's asv a HOME of its own.

    Every ``asv run`` rewrites ``~/.asv-machine.json`` in place as it starts
    (``asv.machine.Machine.load`` saves, non-atomically), so concurrent shards
    sharing a HOME can read a half-written file and fail. Each shard gets a copy
    in its own HOME; the caches that default under HOME keep pointing at the
    real ones (Triton's kernels, ltx2k's measured bandwidth), and so do packages
    installed with ``pip install --user``.
    """
    real = Path(base.get("HOME") or os.path.expanduser("~"))
    home.mkdir(parents=True, exist_ok=True)
    src = real / MACHINE_FILE
    if src.exists():
        shutil.copyfile(src, home / MACHINE_FILE)
    return {
        "HOME": str(home),
        "TRITON_CACHE_DIR": base.get("TRITON_CACHE_DIR") or str(real / ".triton" / "cache"),
        "XDG_CACHE_HOME": base.get("XDG_CACHE_HOME") or str(real / ".cache"),
        "PYTHONUSERBASE": base.get("PYTHONUSERBASE") or str(real / ".local"),
    }


def shard_env(
    base: Mapping[str, str], gpu: Gpu, cpu: bool = False, home: Path | None = None
) -> dict[str, str]:
    env = dict(base)
    if home is not None:
        env.update(shard_home(base, home))
    env["CUDA_VISIBLE_DEVICES"] = gpu.uuid
    # Informational, for logs and benchmark code; asv never records os.environ.
    env["LTX2K_GPU_INDEX"] = str(gpu.index)
    env["LTX2K_GPU_UUID"] = gpu.uuid
    env.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")  # as `ltx2k run` (asv_run.py)
    if cpu:
        env["TRITON_INTERPRET"] = "1"
    return env


def _discover(run_one: RunOne, shard: Shard, env, work: Path) -> list[dict]:
    results = work / "discover" / "results"
    rc = run_one(shard.commits[:1], env, results, ["just-discover"])
    path = results / "benchmarks.json"
    if not path.exists():
        raise RuntimeError(
            f"benchmark discovery on {shard.gpu.label} (commit {shard.commits[0][:8]}) "
            f"exited {rc} and wrote no benchmarks.json; see asv's output above"
        )
    data = json.loads(path.read_text(encoding="utf-8"))
    return [v for k, v in data.items() if k != "version" and isinstance(v, dict)]


def shard_run(
    commits: Sequence[str],
    gpus: Sequence[Gpu],
    results_dir,
    run_one: RunOne,
    *,
    machine: str,
    policy: Policy | None = None,
    bench: Sequence[str] = (),
    base_env: Mapping[str, str] | None = None,
    cpu: bool = False,
    work_dir=None,
    log=True,
) -> ShardRunResult:
    """Run *commits* across *gpus* with *run_one* and merge into *results_dir*.

    ``run_one(commits, env, results_dir, bench)`` runs asv (or a fake) for
    *commits* with environment *env* (``CUDA_VISIBLE_DEVICES`` pinned), writing
    into *results_dir* with ``-b`` values *bench*, and returns asv's exit status.
    It is called once with ``bench=["just-discover"]`` to list the suite, then
    per shard and phase. The work directory is removed unless something needs
    a human (a conflict or a launcher error); its path is in the result then.
    """
    say = _Log(log)
    policy = Policy() if policy is None else policy
    commits = tuple(commits)
    if not commits:
        raise ValueError("commits is empty: the range selects nothing to benchmark")
    if not gpus:
        raise ValueError("gpus is empty")
    uuids = [g.uuid for g in gpus]
    if len(set(uuids)) != len(uuids):
        raise ValueError(f"gpus names one GPU twice: {uuids}")
    if not isinstance(machine, str) or not machine or "/" in machine:
        raise ValueError(f"machine must be a machine directory name, got {machine!r}")
    dest = Path(os.fspath(results_dir))
    base_env = dict(os.environ if base_env is None else base_env)
    work = Path(tempfile.mkdtemp(prefix="ltx2k-shard-", dir=work_dir))
    shards = [
        Shard(g, c, work / f"shard{i}-{g.label}")
        for i, (g, c) in enumerate(zip(gpus, split_commits(commits, len(gpus)), strict=True))
    ]
    active = [s for s in shards if s.commits]
    if len(active) < len(shards):
        idle = ", ".join(s.gpu.label for s in shards if not s.commits)
        say(f"{len(commits)} commit(s) for {len(shards)} GPUs: {idle} stay idle")
    outcomes = {s.gpu: ShardOutcome(s.gpu, s.commits) for s in shards}
    envs = {
        s.gpu: shard_env(base_env, s.gpu, cpu, home=work / f"home{i}") for i, s in enumerate(shards)
    }
    copied_in: dict[str, bytes] = {}
    for s in active:
        s.results.mkdir(parents=True)
        copied_in.update(copy_in(dest, s.results, machine, s.commits))
        say(
            f"{s.gpu.label} ({s.gpu.uuid}): {len(s.commits)} commit(s) "
            + " ".join(c[:8] for c in s.commits)
        )

    try:
        suite = _discover(run_one, active[0], envs[active[0].gpu], work)
        concurrent, exclusive = partition(suite, bench, policy)
        if not concurrent and not exclusive:
            raise ValueError(f"-b {list(bench)} selects no benchmark of the suite")
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)  # nothing measured yet
        raise
    say(
        f"{len(concurrent)} benchmark(s) on all GPUs at once, {len(exclusive)} one GPU at a "
        f"time (exclusive: {', '.join(policy.exclusive) or 'none'})"
    )
    modes = {n: (MODE_CONCURRENT, len(active)) for n in concurrent}
    modes.update({n: (MODE_EXCLUSIVE, 1) for n in exclusive})

    def one(s: Shard, phase: str, names) -> None:
        say(f"[{phase}] {s.gpu.label} starts on {len(s.commits)} commit(s)")
        try:
            rc = run_one(s.commits, envs[s.gpu], s.results, phase_regexes(names, bench))
        except Exception as e:  # one broken shard must not lose the others' results
            outcomes[s.gpu].errors.append(f"{phase}: {type(e).__name__}: {e}")
            say(f"[{phase}] {s.gpu.label} failed: {e}")
            return
        outcomes[s.gpu].returncodes[phase] = rc
        say(f"[{phase}] {s.gpu.label} done (asv exit {rc})")

    merge = MergeReport()
    handed_over = dict(copied_in)  # what dest held when each file was last handed to a shard

    def land() -> None:
        # Tag and merge after every phase, not once at the end: a run stopped later (a
        # timeout, a cancelled job) keeps what the finished phases measured. Seen on a
        # 2-GPU H200: a job time limit killed a run in its exclusive phase, and the device
        # times both GPUs had finished were never merged.
        for s in active:  # always against the first copies: asv drops our tag on rewrite
            tag_results(s.results, machine, s.gpu, modes, copied_in)
        rep = merge_results(dest, [s.results for s in active], handed_over)
        _accumulate(merge, rep)
        for rel in rep.copied + rep.replaced + rep.unchanged:
            handed_over[rel] = (dest / rel).read_bytes()  # ours now: the next landing may replace

    try:
        if concurrent:
            with ThreadPoolExecutor(max_workers=len(active)) as pool:
                list(pool.map(lambda s: one(s, MODE_CONCURRENT, concurrent), active))
            land()
        if exclusive:
            for s in active:  # one GPU at a time; the others idle
                one(s, MODE_EXCLUSIVE, exclusive)
            land()
    except BaseException:
        # Interrupted or broken after measuring: what the shards wrote is still on disk.
        landed = f"; merged before the stop: {len(merge.copied) + len(merge.replaced)} file(s)"
        say(f"stopped before the merge finished{landed}; shard results kept in {work}")
        raise
    for c in merge.conflicts:
        say(f"CONFLICT {c.path}: {c.reason}; the shard's copy is kept at {c.kept}")
    keep = bool(merge.conflicts) or any(o.errors for o in outcomes.values())
    say(
        f"merged into {dest}: {len(merge.copied)} new, {len(merge.replaced)} updated, "
        f"{len(merge.unchanged)} unchanged, {len(merge.conflicts)} conflict(s)"
    )
    if keep:
        say(f"work directory kept for inspection: {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return ShardRunResult(
        commits,
        concurrent,
        exclusive,
        [outcomes[s.gpu] for s in shards],
        merge,
        work if keep else None,
    )


class AsvLauncher:
    """The real ``run_one``: ``asv run HASHFILE:`` with a private config per shard.

    The config is asv.conf.json with ``results_dir`` and ``env_dir`` moved into
    the shard's work directory. asv changes into the config file's directory
    and resolves relative paths there, so the copy's paths are made absolute,
    and a plugin imported relative to it (``".ltx2k.asv_env"``) gets a symlink
    to its package next to the copy.
    """

    _PATH_KEYS = ("repo", "benchmark_dir", "html_dir")

    def __init__(self, config, machine: str, passthrough: Sequence[str] = (), log=True):
        from asv import util

        self.root = Path(os.fspath(config)).resolve().parent
        self.conf = util.load_json(os.fspath(config), js_comments=True)
        for key in self._PATH_KEYS:
            value = self.conf.get(key)
            if isinstance(value, str) and (self.root / value).exists():
                self.conf[key] = str((self.root / value).resolve())
        self.machine = machine
        self.passthrough = list(passthrough)
        self.say = _Log(log)
        self._n = itertools.count()
        self._lock = threading.Lock()

    def _link_plugins(self, work: Path) -> None:
        for plugin in self.conf.get("plugins") or ():
            if isinstance(plugin, str) and plugin.startswith("."):
                top = plugin[1:].split(".")[0]
                link = work / top
                if not link.exists():
                    link.symlink_to(self.root / top, target_is_directory=True)

    def command(self, commits: Sequence[str], results_dir: Path, bench: Sequence[str]):
        from ltx2k import asv_run

        work = Path(results_dir).parent
        work.mkdir(parents=True, exist_ok=True)
        with self._lock:
            n = next(self._n)
        conf = dict(self.conf)
        conf["results_dir"] = str(Path(results_dir).resolve())
        conf["env_dir"] = str((work / "env").resolve())
        conf["html_dir"] = str((work / "html").resolve())
        self._link_plugins(work)
        conf_path = work / f"asv.conf.{n}.json"
        conf_path.write_text(json.dumps(conf, indent=4))
        hashfile = work / f"commits.{n}.txt"
        hashfile.write_text("".join(c + "\n" for c in commits))
        args = [*self.passthrough]
        for b in bench:
            args += ["-b", b]
        return asv_run.build_command([*args, f"HASHFILE:{hashfile}"], str(conf_path), self.machine)

    def __call__(self, commits, env, results_dir, bench) -> int:
        cmd = self.command(commits, Path(results_dir), bench)
        label = f"gpu{env.get('LTX2K_GPU_INDEX', '?')}"
        self.say(f"[{label}] + {' '.join(cmd)}")
        order = {c[:8]: i for i, c in enumerate(commits, 1)}
        proc = subprocess.Popen(
            cmd,
            env=dict(env),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
        )
        assert proc.stdout is not None
        for line in proc.stdout:
            m = _COMMIT_LINE.search(line)
            if m and m.group(1) in order:
                self.say(f"[{label}] commit {order[m.group(1)]}/{len(commits)} {m.group(1)}")
            print(f"[{label}] {line.rstrip()}", file=sys.stderr, flush=True)
        return proc.wait()


def identify_machine(gpu: Gpu, environ: Mapping[str, str], cwd=None) -> str:
    """``ltx2k machine --write`` in a child pinned to *gpu*, so the parent never touches CUDA."""
    env = dict(environ)
    env["CUDA_VISIBLE_DEVICES"] = gpu.uuid
    env.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
    proc = subprocess.run(
        [sys.executable, "-m", "ltx2k.cli", "machine", "--write", "--name-only"],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"ltx2k machine failed on {gpu.label}: {proc.stderr.strip()}")
    return proc.stdout.strip().splitlines()[-1]


@contextlib.contextmanager
def sigterm_as_interrupt():
    """Turn SIGTERM into KeyboardInterrupt while a run is in flight.

    Python's default SIGTERM handling exits at once, without ``except``/``finally``:
    a `timeout` or a cancelled CI job would then skip the "shard results kept in
    ..." report. As an exception, the stop takes shard_run's interrupted path.
    """
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may install handlers
        return

    def handler(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    old = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def run(
    asv_args: Sequence[str],
    *,
    gpus="auto",
    results=None,
    config="asv.conf.json",
    policy: Policy | None = None,
    dry_run: bool = False,
    gpu_list: Sequence[Gpu] | None = None,
    machine: str | None = None,
) -> int:
    """``ltx2k shard-run``: everything from the command line to merged results.

    *gpu_list* and *machine* replace nvidia-smi and ``ltx2k machine`` (tests
    run fake GPUs on the CPU interpreter with them).
    """
    from asv.config import Config

    if not os.path.exists(config):
        raise FileNotFoundError(f"--config {config!r} does not exist (run from the repo root)")
    policy = Policy() if policy is None else policy
    args = parse_asv_args(asv_args)
    from ltx2k.asv_run import check_range

    check_range(asv_args, config)
    conf = Config.load(config)
    dest = Path(results or conf.results_dir)
    chosen = select_gpus(list_gpus() if gpu_list is None else gpu_list, gpus)
    if machine is None:
        machine = identify_machine(chosen[0], os.environ)
    commits = resolve_commits(conf, args, dest, machine)
    if not commits:
        print("ltx2k shard-run: nothing to benchmark in this range", file=sys.stderr)
        return 0
    if dry_run:
        for g, c in zip(chosen, split_commits(commits, len(chosen)), strict=True):
            print(f"{g.label} {g.uuid}: {' '.join(x[:8] for x in c) or '(idle)'}")
        print(f"exclusive: {list(policy.exclusive)}; asv args: {list(args.passthrough)}")
        return 0
    from ltx2k import machine as machine_mod
    from ltx2k import runtime

    launcher = AsvLauncher(config, machine, args.passthrough)
    cpu = machine == machine_mod.CPU_MACHINE
    # One keeper holds a context on every GPU of the host (see asv_run.run).
    with sigterm_as_interrupt(), runtime.context_keeper(not cpu):
        res = shard_run(
            commits,
            chosen,
            dest,
            launcher,
            machine=machine,
            policy=policy,
            bench=args.bench,
            cpu=cpu,
        )
    for o in res.shards:
        print(
            f"{o.gpu.label} {o.gpu.uuid}: {len(o.commits)} commit(s), asv exit "
            f"{o.returncodes or '-'}{'; ' + '; '.join(o.errors) if o.errors else ''}"
        )
    return res.exit_code
