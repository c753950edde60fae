"""Partial, uneven asv histories built from one real H200 run, for the property tests.

Test data, not product. ``tests/data/h200-results`` is what one ``asv run`` of the
whole suite wrote on an H200 runner; :func:`histories` is a Hypothesis strategy of
what runners leave over time, and :func:`write` lays one out as asv would have:

- any subset of benchmarks per commit (``asv run -b REGEX``: a PR gate, a bisect, a
  quick check), or of parameter cells (failed ones stored as ``null``, skipped ones as
  ``NaN``, as asv writes them);
- a derived metric (% of copy bandwidth) absent at head, at base or in between;
- 1 to 25 commits, 1 to 3 machines, each with its own commits and benchmark sets;
- a shape added or removed mid-history;
- a benchmark whose code changed mid-history (a new asv version hash, its values scaled);
- missing ``samples`` or ``stats``, zero variance;
- steps in any metric, an allocation count from 0 included.

Values are the real run's, scaled per machine, with lognormal noise per commit, so
each kernel, metric and parameter keeps its real size. The commits are those of one
shared throwaway git repository (:func:`shared_repo`), so ``--repo`` works.
"""

from __future__ import annotations

import datetime
import functools
import hashlib
import itertools
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from hypothesis import strategies as st

from ltx2k import git

TEMPLATE = Path(__file__).parent / "data" / "h200-results"
TEMPLATE_MACHINE = "h200"
MAX_COMMITS = 25
# Machine name -> (speed factor of device time, of host time): other GPUs of the fleet.
MACHINES = {
    "h200": (1.0, 1.0),
    "h100-80gb-hbm3": (1.35, 1.05),
    "a100-sxm4-80gb": (2.2, 1.2),
}
DERIVED = "track_pct_copy_bandwidth"
SOURCE = "time_device_cold"


@dataclass(frozen=True)
class Template:
    benchmarks: dict  # benchmarks.json
    header: dict  # the result file without its results
    columns: tuple[str, ...]
    results: dict  # benchmark -> {column: value}
    machine: dict  # machine.json

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(sorted(self.results))

    def metric_names(self, metric: str) -> tuple[str, ...]:
        return tuple(n for n in self.names if n.rsplit(".", 1)[1] == metric)

    @property
    def metrics(self) -> tuple[str, ...]:
        return tuple(sorted({n.rsplit(".", 1)[1] for n in self.names}))

    def shapes(self, name: str) -> tuple[str, ...]:
        meta = self.benchmarks[name]
        return tuple(meta["params"][meta["param_names"].index("shape")])


@functools.lru_cache(maxsize=1)
def template() -> Template:
    benchmarks = json.loads((TEMPLATE / "benchmarks.json").read_text())
    machine = json.loads((TEMPLATE / TEMPLATE_MACHINE / "machine.json").read_text())
    (path,) = [p for p in (TEMPLATE / TEMPLATE_MACHINE).glob("*.json") if p.name != "machine.json"]
    data = json.loads(path.read_text())
    columns = tuple(data["result_columns"])
    results = {n: dict(zip(columns, row, strict=False)) for n, row in data["results"].items()}
    header = {k: v for k, v in data.items() if k not in ("results", "durations", "ltx2k_shard")}
    return Template(benchmarks, header, columns, results, machine)


# --- the plan of a history -------------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    """From *commit* on, *benchmark*'s cells (all, or the one of index *cell*) times *factor*.
    ``from_zero``: the cell was 0 before (an allocation count that appears)."""

    benchmark: str
    cell: int | None
    commit: int
    factor: float
    from_zero: bool = False


@dataclass(frozen=True)
class Run:
    """One machine's result file for one commit."""

    commit: int
    benchmarks: tuple[str, ...]
    failed: float = 0.0  # share of cells stored as null (failed)
    skipped: float = 0.0  # share of cells stored as NaN (skipped)
    no_samples: bool = False
    no_stats: bool = False


@dataclass(frozen=True)
class History:
    n_commits: int
    runs: dict[str, tuple[Run, ...]]  # machine -> its result files
    steps: tuple[Step, ...] = ()
    noise: float = 0.01  # relative, per commit; 0: zero variance
    added: tuple[str, int] | None = None  # (shape, first commit that has it)
    removed: tuple[str, int] | None = None  # (shape, first commit without it)
    seed: int = 0
    labels: tuple[str, ...] = field(default=(), compare=False)  # the cases drawn, for reading
    # (benchmark, first commit of its new code, factor on its values from there): asv
    # stores another version hash, and the new code measures other work.
    recoded: tuple[str, int, float] | None = None

    @property
    def machines(self) -> tuple[str, ...]:
        return tuple(self.runs)

    def measured(self, machine: str) -> tuple[int, ...]:
        return tuple(r.commit for r in self.runs[machine])


_FACTORS = (0.5, 0.8, 0.92, 0.97, 1.015, 1.03, 1.05, 1.08, 1.12, 1.3, 2.0)


@st.composite
def histories(
    draw, max_commits: int = MAX_COMMITS, max_machines: int = 3, recoded: bool | None = None
) -> History:
    """What runners leave: see the module docstring. *recoded*: whether a benchmark's
    code changes mid-history (None: drawn)."""
    t = template()
    names = t.names
    n = draw(st.integers(2 if recoded else 1, max_commits))
    machines = draw(
        st.lists(st.sampled_from(sorted(MACHINES)), min_size=1, max_size=max_machines, unique=True)
    )
    labels = []
    runs = {}
    for m in machines:
        # Which commits this machine measured: all, a random subset, or all but head.
        how = draw(st.sampled_from(("all", "all", "subset", "not-head")))
        if how == "all" or n == 1:
            commits = list(range(n))
        elif how == "not-head":
            commits = list(range(n - 1))
        else:
            commits = sorted(draw(st.sets(st.integers(0, n - 1), min_size=1, max_size=n)))
        labels.append(f"{m}:{how}")
        # What each run measured: the whole suite, the cold time only (the PR gate's
        # subset), a set of metrics, or any benchmarks; the first run is often whole.
        pattern = draw(st.sampled_from(("full", "full-then-cold", "mixed", "metrics")))
        labels.append(f"{m}:{pattern}")
        metric_set = draw(st.sets(st.sampled_from(t.metrics), min_size=1))
        machine_runs = []
        for i, c in enumerate(commits):
            if pattern == "full":
                chosen = names
            elif pattern == "full-then-cold":
                chosen = names if i == 0 else t.metric_names(SOURCE)
            elif pattern == "metrics":
                chosen = tuple(x for x in names if x.rsplit(".", 1)[1] in metric_set)
            else:
                kind = draw(st.sampled_from(("full", "cold", "no-derived", "any")))
                if kind == "full":
                    chosen = names
                elif kind == "cold":
                    chosen = t.metric_names(SOURCE)
                elif kind == "no-derived":
                    chosen = tuple(x for x in names if not x.endswith(DERIVED))
                else:
                    chosen = tuple(sorted(draw(st.sets(st.sampled_from(names), min_size=1))))
            defects = draw(st.sampled_from(("", "", "", "failed", "skipped", "samples", "stats")))
            machine_runs.append(
                Run(
                    c,
                    chosen,
                    failed=0.3 if defects == "failed" else 0.0,
                    skipped=0.3 if defects == "skipped" else 0.0,
                    no_samples=defects == "samples",
                    no_stats=defects == "stats",
                )
            )
        runs[m] = tuple(machine_runs)
    steps = []
    for _ in range(draw(st.integers(0, 3))):
        name = draw(st.sampled_from(names))
        cell = draw(st.one_of(st.none(), st.integers(0, 200)))
        commit = draw(st.integers(0, n - 1))
        zero = name.endswith("track_allocations") and draw(st.booleans())
        steps.append(
            Step(name, cell, commit, 1.0 if zero else draw(st.sampled_from(_FACTORS)), zero)
        )
    noise = draw(st.sampled_from((0.0, 0.005, 0.01, 0.025, 0.05)))
    kernels_shapes = sorted({s for x in names for s in t.shapes(x)})
    added = removed = None
    if n > 1 and draw(st.booleans()):
        added = (draw(st.sampled_from(kernels_shapes)), draw(st.integers(1, n - 1)))
    if n > 1 and draw(st.booleans()):
        removed = (draw(st.sampled_from(kernels_shapes)), draw(st.integers(1, n - 1)))
    recode = None
    if n > 1 and (draw(st.booleans()) if recoded is None else recoded):
        recode = (
            draw(st.sampled_from(names)),
            draw(st.integers(1, n - 1)),
            draw(st.sampled_from((0.5, 1.0, 1.5, 3.0))),
        )
        labels.append(f"recoded:{recode[0]}@{recode[1]}x{recode[2]}")
    seed = draw(st.integers(0, 2**32 - 1))
    return History(
        n, runs, tuple(steps), noise, added, removed, seed, tuple(labels), recoded=recode
    )


# --- the repository and the files ------------------------------------------------------------

_IDENTITY = ("user.name=ltx2k histories", "user.email=histories@ltx2k.invalid")


@dataclass(frozen=True)
class Repo:
    path: Path
    commits: tuple[str, ...]  # oldest first
    dates: tuple[int, ...]  # ms since epoch, as asv stores them


@functools.cache
def shared_repo(root: str) -> Repo:
    """A repository of :data:`MAX_COMMITS` commits under *root*, made once per process.
    History *k* commits long is its first *k* commits."""
    path = Path(root) / "repo"
    if not (path / ".git").is_dir():
        path.mkdir(parents=True, exist_ok=True)
        git.output(path, "init", "-q", "-b", "main")
        t0 = int(datetime.datetime(2026, 1, 5, tzinfo=datetime.timezone.utc).timestamp())
        for i in range(MAX_COMMITS):
            stamp = f"{t0 + 3600 * 7 * i} +0000"
            (path / "file.txt").write_text(f"commit {i}\n")
            git.output(path, "add", "file.txt")
            git.output(
                path,
                "commit",
                "-q",
                "-m",
                f"commit {i}",
                config=_IDENTITY,
                env={"GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp},
            )
    log = git.output(path, "log", "--reverse", "--format=%H %at", "main").split("\n")
    pairs = [line.split() for line in log if line.strip()]
    return Repo(path, tuple(p[0] for p in pairs), tuple(int(p[1]) * 1000 for p in pairs))


def _shape_kept(h: History, shape: str, commit: int) -> bool:
    if h.added and h.added[0] == shape and commit < h.added[1]:
        return False
    return not (h.removed and h.removed[0] == shape and commit >= h.removed[1])


def _factor(h: History, machine: str, name: str, cell: int, commit: int) -> tuple[float, bool]:
    """The steps' product for one cell at *commit*, and whether the cell is still 0."""
    f, zero = 1.0, False
    for s in h.steps:
        if s.benchmark != name or (s.cell is not None and s.cell != cell):
            continue
        if s.from_zero:
            zero = zero or commit < s.commit
        elif commit >= s.commit:
            f *= s.factor
    if h.recoded and h.recoded[0] == name and commit >= h.recoded[1]:
        f *= h.recoded[2]
    return f, zero


def version_at(h: History, name: str, commit: int) -> str:
    """The asv version hash of benchmark *name*'s code at *commit*."""
    version = template().results[name]["version"]
    if h.recoded and h.recoded[0] == name and commit >= h.recoded[1]:
        return hashlib.sha256(f"{version} recoded".encode()).hexdigest()
    return version


def _entry(h: History, machine: str, run: Run, name: str, rng) -> dict:
    t = template()
    tpl = t.results[name]
    unit = t.benchmarks[name]["unit"]
    param_names = t.benchmarks[name]["param_names"]
    shape_axis = param_names.index("shape")
    # The cells of the template's product that this commit's suite still declares.
    old = list(itertools.product(*tpl["params"]))
    params = [list(p) for p in tpl["params"]]
    params[shape_axis] = [s for s in params[shape_axis] if _shape_kept(h, s, run.commit)]
    device, host = MACHINES[machine]
    speed = host if "host" in name else device
    out = {c: None for c in t.columns}
    out.update({k: tpl[k] for k in ("version", "started_at", "duration") if k in tpl})
    out["version"] = version_at(h, name, run.commit)
    out["params"] = params
    cols = {c: [] for c in ("result", *[c for c in t.columns if c.startswith("stats_")], "samples")}
    for combo in itertools.product(*params):
        i = old.index(combo)
        v0 = tpl["result"][i]
        f, zero = _factor(h, machine, name, i, run.commit)
        if v0 is None or (isinstance(v0, float) and math.isnan(v0)):
            v = v0
        elif zero:
            v = 0.0
        else:
            if unit == "%":
                scale = 1.0 / speed
            elif unit in ("seconds",):
                scale = speed
            else:
                scale = 1.0
            jitter = (
                float(np.exp(rng.normal(0.0, h.noise)))
                if h.noise and unit != "allocations"
                else 1.0
            )
            v = v0 * scale * f * jitter
            if unit == "allocations":
                v = float(round(v))
        r = rng.random()
        if r < run.failed:
            v = None
        elif r < run.failed + run.skipped:
            v = math.nan
        cols["result"].append(v)
        for c in cols:
            if c in ("result",):
                continue
            src = tpl.get(c)
            x = src[i] if isinstance(src, list) else None
            if c == "samples":
                if x is not None and isinstance(v, float) and math.isfinite(v) and v0:
                    x = [s * v / v0 for s in x] if h.noise else [v] * len(x)
                else:
                    x = None
            elif c in ("stats_ci_99_a", "stats_ci_99_b", "stats_q_25", "stats_q_75"):
                if x is not None and isinstance(v, float) and math.isfinite(v) and v0:
                    x = x * v / v0 if h.noise else v
                else:
                    x = None
            cols[c].append(x)
    out["result"] = cols["result"]
    for c in cols:
        if c == "result" or c not in t.columns:
            continue
        present = tpl.get(c) is not None
        if c == "samples" and run.no_samples:
            present = False
        if c.startswith("stats_") and run.no_stats:
            present = False
        out[c] = cols[c] if present else None
    return out


def write(h: History, root, repo: Repo) -> Path:
    """Lay *h* out under *root* (created): ``results/`` and an ``asv.conf.json`` whose
    repository is *repo*. Returns the results folder."""
    t = template()
    root = Path(root)
    results = root / "results"
    results.mkdir(parents=True)
    bench = json.loads(json.dumps(t.benchmarks))
    if h.removed:  # the newest suite no longer declares the removed shape
        for meta in bench.values():
            if isinstance(meta, dict) and "shape" in meta.get("param_names", ()):
                axis = meta["param_names"].index("shape")
                meta["params"][axis] = [s for s in meta["params"][axis] if s != h.removed[0]]
    if h.recoded:  # the newest suite describes the new code
        bench[h.recoded[0]]["version"] = version_at(h, h.recoded[0], h.n_commits - 1)
    (results / "benchmarks.json").write_text(json.dumps(bench))
    rng = np.random.default_rng(h.seed)
    for machine, runs in h.runs.items():
        d = results / machine
        d.mkdir()
        info = dict(t.machine, machine=machine)
        (d / "machine.json").write_text(json.dumps(info))
        for run in runs:
            sha = repo.commits[run.commit]
            data = dict(t.header)
            data.update(
                commit_hash=sha, date=repo.dates[run.commit], result_columns=list(t.columns)
            )
            data["params"] = dict(data["params"], machine=machine)
            entries = {name: _entry(h, machine, run, name, rng) for name in run.benchmarks}
            data["results"] = {name: [e[c] for c in t.columns] for name, e in entries.items()}
            data["durations"] = {}
            name = f"{sha[:8]}-{data['env_name']}.json"
            # asv writes NaN for a skipped cell: json's default allow_nan does too.
            (d / name).write_text(json.dumps(data))
    conf = {
        "version": 1,
        "project": "ltx2k-histories",
        "project_url": "https://example.invalid/ltx2k",
        "repo": os.fspath(repo.path),
        "branches": ["main"],
        "environment_type": "existing",
        "benchmark_dir": "benchmarks",
        "results_dir": "results",
        "html_dir": "html",
    }
    (root / "asv.conf.json").write_text(json.dumps(conf, indent=2))
    return results
