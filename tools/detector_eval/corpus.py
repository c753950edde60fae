"""Labelled benchmark histories for scoring change-point detectors.

A :class:`Series` is one benchmark cell on one GPU: runs oldest..newest (the
last one is HEAD), each a median with the within-run samples it came from, and
a label: no step, or one step of known size whose first affected run is 0..4
commits before HEAD.

Two sources, built the same way from an explicit seed so that held-out corpora
are one call away (``make_corpus(seed=other)``):

* synthetic GPUs whose between-run noise (0.3%..5%) dwarfs the tight
  within-run spread, as on real runners, with heavy tails (Student t runs, or
  2% of runs 3-5 sigma off) and failed runs (``None``);
* resampled real H200 runs: every run of a series picks one real asv run of
  that cell (all of one commit, so they are A/A repeats) and bootstraps its
  samples, which keeps the real between-run scatter and within-run shape.

Series that share a machine and a metric form a pool (:meth:`Corpus.groups`):
a detector may estimate the machine's noise from all of them at once; each
series records its pool's median true noise (``pool_noise``).
:meth:`Corpus.window` cuts every series to its last runs, as a short history.
"""

from __future__ import annotations

import functools
import math
import tarfile
import tempfile
import zlib
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "docs" / "data"

# A/A sources: (archive, directory inside it, commit prefix). Only runs of one
# commit are mixed, so no run differs from another by a code change.
H200X2_AA = tuple(
    (
        "h200x2-2026-11-29-interference-results.tgz",
        f"interference/results/{cond}",
        "8f189723",
    )
    for cond in ("alone", "alone-repeat", "concurrent-load", "concurrent-suite")
)
# 6686b3df was measured in three lease windows (its cells partly re-run), so
# one cell has two or three distinct runs of the same code.
H200_AA = tuple(
    (name, "results", "6686b3df")
    for name in (
        "h200-2026-11-29b-results-full-run.tgz",
        "h200-2026-11-29b-results-final.tgz",
        "h200-2026-11-29c-results.tgz",
    )
)
REAL_SOURCES = {"h200x2-aa": H200X2_AA, "h200-aa": H200_AA}

CELLS_PER_GPU = 30
# Typical between-run noise of a GPU's cells; machines cycle through them so
# every level is covered whatever the corpus size.
GPU_NOISE = (0.003, 0.006, 0.01, 0.02, 0.03, 0.04)
TAILS = ("normal", "student-t", "outliers")
T_DOF = 4
OUTLIER_RATE = 0.02
MISSING_RATE = 0.03
STEP_SHARE = 0.45
SLOWDOWN_SHARE = 0.75
STEP_RANGE = (0.02, 0.15)
MAX_BEFORE_HEAD = 4
LENGTH_RANGE = (8, 30)
# What makes a step one that a detector must find: big enough to matter and
# well above the series' own noise.
QUALIFY_MIN = 0.03
QUALIFY_SIGMAS = 4.0


@dataclass(frozen=True)
class Series:
    name: str
    source: str  # "synthetic" or "real"
    machine: str
    metric: str
    values: tuple[float | None, ...]
    samples: tuple[tuple[float, ...] | None, ...]
    noise: float  # true relative std of one run's value (between-run noise)
    tail: str
    step_index: int | None = None  # first run on the new level
    step_ratio: float | None = None  # new level / old level
    pool_noise: float | None = None  # median true noise of the series of its pool

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def changed(self) -> bool:
        return self.step_index is not None

    @property
    def step_size(self) -> float:
        return 0.0 if self.step_ratio is None else abs(self.step_ratio - 1.0)

    @property
    def slowdown(self) -> bool:
        return self.step_ratio is not None and self.step_ratio > 1.0

    @property
    def position(self) -> int | None:
        """Commits before HEAD of the first affected run (0: HEAD itself)."""
        return None if self.step_index is None else self.n - 1 - self.step_index

    @property
    def qualifying(self) -> bool:
        return self.changed and self.step_size >= max(QUALIFY_MIN, QUALIFY_SIGMAS * self.noise)

    @property
    def qualifying_pooled(self) -> bool:
        """Big enough against the noise of its GPU's cells of its metric (their median)."""
        noise = self.noise if self.pool_noise is None else self.pool_noise
        return self.changed and self.step_size >= max(QUALIFY_MIN, QUALIFY_SIGMAS * noise)


@dataclass(frozen=True)
class Corpus:
    seed: int
    series: tuple[Series, ...]

    def groups(self) -> dict[tuple[str, str], list[int]]:
        """Indices of the series that share a machine and a metric."""
        out: dict[tuple[str, str], list[int]] = defaultdict(list)
        for i, s in enumerate(self.series):
            out[(s.machine, s.metric)].append(i)
        return dict(out)

    def window(self, before: int) -> Corpus:
        """Every series cut to its last *before* runs and HEAD, as ``ltx2k regress --last``
        sees it: a step whose old level is no longer in the window is no step in it."""
        out = []
        for s in self.series:
            start = max(0, s.n - before - 1)
            index = None if s.step_index is None else s.step_index - start
            keep = index is not None and index >= 1
            out.append(
                replace(
                    s,
                    values=s.values[start:],
                    samples=s.samples[start:],
                    step_index=index if keep else None,
                    step_ratio=s.step_ratio if keep else None,
                )
            )
        return Corpus(seed=self.seed, series=tuple(out))

    def describe(self) -> dict:
        ss = self.series
        return {
            "seed": self.seed,
            "series": len(ss),
            "synthetic": sum(s.source == "synthetic" for s in ss),
            "real": sum(s.source == "real" for s in ss),
            "unchanged": sum(not s.changed for s in ss),
            "steps": sum(s.changed for s in ss),
            "qualifying_steps": sum(s.qualifying for s in ss),
            "slowdowns": sum(s.slowdown for s in ss),
            "machines": len({s.machine for s in ss}),
            "pools": len(self.groups()),
            "missing_runs": sum(v is None for s in ss for v in s.values),
            "runs": sum(s.n for s in ss),
        }


def _label(rng: np.random.Generator, n: int) -> tuple[int | None, float | None]:
    if rng.random() >= STEP_SHARE:
        return None, None
    lo, hi = STEP_RANGE
    size = math.exp(rng.uniform(math.log(lo), math.log(hi)))
    ratio = 1.0 + size if rng.random() < SLOWDOWN_SHARE else 1.0 - size
    k = int(rng.integers(0, MAX_BEFORE_HEAD + 1))
    return n - 1 - k, ratio


def _missing(rng: np.random.Generator, n: int, keep: set[int]) -> np.ndarray:
    # A failed HEAD run is reported as a failure, not analysed; and a failed
    # first-bad run would make "the exact commit" unknowable for every method.
    miss = rng.random(n) < MISSING_RATE
    for i in keep:
        miss[i] = False
    return miss


def _append_run(values: list, samples: list, draw: np.ndarray | None) -> None:
    """One run: its median and samples, or None for both when it failed."""
    values.append(None if draw is None else float(np.median(draw)))
    samples.append(None if draw is None else tuple(float(x) for x in draw))


def _median_std_normal(spread: float, k: int) -> float:
    # Standard error of a sample median of k normal draws (asymptotic pi/2 factor).
    return spread * math.sqrt(math.pi / (2 * k))


def synthetic_gpu(seed: int, index: int, cells: int = CELLS_PER_GPU) -> list[Series]:
    rng = np.random.default_rng([seed, 1, index])
    machine = f"synthetic-gpu{index:02d}"
    level = GPU_NOISE[index % len(GPU_NOISE)] * math.exp(rng.normal(0.0, 0.15))
    tail = TAILS[(index // len(GPU_NOISE)) % len(TAILS)]
    n = int(rng.integers(LENGTH_RANGE[0], LENGTH_RANGE[1] + 1))
    out = []
    for c in range(cells):
        sigma = float(np.clip(level * math.exp(rng.normal(0.0, 0.3)), 0.003, 0.05))
        base = 1e-5 * math.exp(rng.normal(0.0, 1.0))
        k_samples = int(rng.integers(10, 21))
        spread = rng.uniform(0.002, 0.01)
        step_index, ratio = _label(rng, n)
        if tail == "student-t":
            eps = rng.standard_t(T_DOF, n) / math.sqrt(T_DOF / (T_DOF - 2))
        else:
            eps = rng.normal(0.0, 1.0, n)
        if tail == "outliers":
            hit = rng.random(n) < OUTLIER_RATE
            sign = np.where(rng.random(n) < 0.8, 1.0, -1.0)
            eps = np.where(hit, sign * rng.uniform(3.0, 5.0, n), eps)
        miss = _missing(rng, n, {n - 1} | ({step_index} if step_index is not None else set()))
        values: list[float | None] = []
        samples: list[tuple[float, ...] | None] = []
        for t in range(n):
            centre = base * (1.0 + sigma * eps[t])
            if step_index is not None and t >= step_index:
                centre *= ratio
            draw = centre * (1.0 + spread * rng.normal(0.0, 1.0, k_samples))
            _append_run(values, samples, None if miss[t] else draw)
        noise = math.hypot(sigma, _median_std_normal(spread, k_samples))
        out.append(
            Series(
                name=f"{machine}/cell{c:02d}",
                source="synthetic",
                machine=machine,
                metric="time_device",
                values=tuple(values),
                samples=tuple(samples),
                noise=noise,
                tail=tail,
                step_index=step_index,
                step_ratio=ratio,
            )
        )
    return out


@dataclass(frozen=True)
class RealCell:
    metric: str
    key: str
    runs: tuple[np.ndarray, ...]  # samples of each A/A run, normalised to the cell's median
    noise: float


def _extract(archive: Path, into: Path) -> Path:
    dest = into / archive.stem
    if not dest.exists():
        with tarfile.open(archive) as tf:
            # Extraction filters arrived in Python 3.11.4; Debian 12's 3.11.2 has none.
            # The archives are this repository's own measurements.
            if hasattr(tarfile, "data_filter"):
                tf.extractall(dest, filter="data")
            else:
                tf.extractall(dest)  # noqa: S202 - a committed archive, not user input
    return dest


@functools.lru_cache(maxsize=4)
def load_real_cells(data_dir: Path = DATA) -> dict[str, list[RealCell]]:
    """The A/A runs of every time_* cell, per real machine, from the archived asv results."""
    from ltx2k.history.records import load_results

    pools: dict[str, list[RealCell]] = {}
    noise_rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        for machine, sources in REAL_SOURCES.items():
            runs: dict[tuple[str, tuple], list[tuple[float, ...]]] = defaultdict(list)
            for archive, sub, commit in sources:
                path = data_dir / archive
                if not path.exists():
                    continue
                records, _ = load_results(_extract(path, Path(tmp)) / sub)
                for r in records:
                    if not r.commit.startswith(commit) or not r.samples or len(r.samples) < 5:
                        continue
                    if not r.benchmark.split(".")[-1].startswith("time_"):
                        continue
                    # The same run copied into several archives is one run.
                    if r.samples not in runs[(r.benchmark, r.params)]:
                        runs[(r.benchmark, r.params)].append(r.samples)
            cells = []
            for (bench, params), rs in sorted(runs.items()):
                if len(rs) < 2:
                    continue
                scale = float(np.median(np.concatenate([np.asarray(x) for x in rs])))
                normed = tuple(np.asarray(x) / scale for x in rs)
                key = bench + "(" + ",".join(f"{k}={v}" for k, v in params) + ")"
                cells.append(
                    RealCell(
                        metric=bench.split(".")[-1],
                        key=key,
                        runs=normed,
                        noise=_real_noise(normed, noise_rng),
                    )
                )
            if cells:
                pools[machine] = cells
    return pools


def _real_noise(runs: Sequence[np.ndarray], rng: np.random.Generator, draws: int = 400) -> float:
    """Relative std of one resampled run's median: the between-run noise a series carries."""
    meds = np.concatenate(
        [np.median(rng.choice(run, size=(draws, run.size), replace=True), axis=1) for run in runs]
    )
    return float(meds.std() / np.median(meds))


def real_replica(seed: int, machine: str, replica: int, cells: Sequence[RealCell]) -> list[Series]:
    rng = np.random.default_rng([seed, 2, replica, zlib.crc32(machine.encode())])
    name = f"{machine}/r{replica}"
    n = int(rng.integers(LENGTH_RANGE[0], LENGTH_RANGE[1] + 1))
    out = []
    for cell in cells:
        step_index, ratio = _label(rng, n)
        miss = _missing(rng, n, {n - 1} | ({step_index} if step_index is not None else set()))
        values: list[float | None] = []
        samples: list[tuple[float, ...] | None] = []
        for t in range(n):
            run = cell.runs[int(rng.integers(len(cell.runs)))]
            draw = rng.choice(run, size=run.size, replace=True)
            if step_index is not None and t >= step_index:
                draw = draw * ratio
            _append_run(values, samples, None if miss[t] else draw)
        out.append(
            Series(
                name=f"{name}/{cell.key}",
                source="real",
                machine=name,
                metric=cell.metric,
                values=tuple(values),
                samples=tuple(samples),
                noise=cell.noise,
                tail="real",
                step_index=step_index,
                step_ratio=ratio,
            )
        )
    return out


def make_corpus(
    seed: int,
    *,
    small: bool = False,
    n_series: int | None = None,
    real_replicas: int | None = None,
    data_dir: Path = DATA,
) -> Corpus:
    """The labelled corpus: ``n_series`` synthetic series (30 cells per GPU) and
    ``real_replicas`` resampled histories of every real A/A machine.

    ``small`` is the test-suite size (480 synthetic, one real replica);
    the default is the documented corpus (720 synthetic, three real replicas).
    """
    if n_series is None:
        n_series = 480 if small else 720
    if real_replicas is None:
        real_replicas = 1 if small else 3
    series: list[Series] = []
    gpus = math.ceil(n_series / CELLS_PER_GPU)
    for g in range(gpus):
        left = n_series - g * CELLS_PER_GPU
        series.extend(synthetic_gpu(seed, g, min(CELLS_PER_GPU, left)))
    if real_replicas > 0:
        for machine, cells in load_real_cells(data_dir).items():
            for r in range(real_replicas):
                series.extend(real_replica(seed, machine, r, cells))
    pools: dict[tuple[str, str], list[float]] = defaultdict(list)
    for s in series:
        pools[(s.machine, s.metric)].append(s.noise)
    median = {k: float(np.median(v)) for k, v in pools.items()}
    series = [replace(s, pool_noise=median[(s.machine, s.metric)]) for s in series]
    return Corpus(seed=seed, series=tuple(series))
