"""The detectors under test, behind one batch interface.

Every method sees a series cut at ``end`` (runs ``0..end-1``, the last one is
its HEAD) and reports steps as ``Found(index, last_good_index)``: the first
run on the new level and the last run on the old one.

* ``ltx2k``: :mod:`ltx2k.analysis.changepoint`, with its noise prior pooled
  over the machine's series of one metric, cut at the same ``end``; its
  suspect, if any, is reported too, marked ``suspected``.
* ``asv``: ``asv publish``'s regression detection as its regressions page uses
  it: ``detect_steps(y, w)`` with asv's weights (2 / width of each run's 99%
  CI, from the samples) then ``detect_regressions(steps, threshold)`` with the
  project's ``regressions_thresholds`` (0.05) and asv's ``min_size`` (2). asv
  reports increases only; ``asv-both`` also runs it on 1/value to see speedups,
  ``asv-both-min`` lowers the threshold to ltx2k's minimum step (MIN_EFFECT).
* ``otava``: Apache Otava's ``compute_change_points`` in an isolated venv
  (:mod:`tools.detector_eval.otava_runner`); ``otava`` matches ltx2k's minimum
  effect (3%), ``otava-default`` is ``otava analyze``'s defaults.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from .corpus import REPO, Corpus

# ltx2k regress's default minimum step for device time (thresholds.DEFAULT_STEPS);
# Otava's min_magnitude gets the same, so both report the same sizes of change.
MIN_EFFECT = 0.02
ASV_THRESHOLD = 0.05  # asv.conf.json "regressions_thresholds": {".*": 0.05}, also asv's default
ASV_MIN_SIZE = 2  # detect_regressions' default, which asv's regressions page keeps
OTAVA_VERSION = "0.8.0"
OTAVA_VENV = REPO / ".asv" / "otava-venv"


@dataclass(frozen=True)
class Found:
    index: int
    last_good_index: int
    suspected: bool = False  # ltx2k's step seen on one run, not flagged (Detection.suspect)


@dataclass(frozen=True)
class Job:
    series: int  # index into Corpus.series
    end: int  # the method sees runs [0, end)


@dataclass
class Method:
    name: str
    settings: dict = field(default_factory=dict)

    def run(self, corpus: Corpus, jobs: Sequence[Job], workers: int = 1) -> list[list[Found]]:
        raise NotImplementedError


def _chunks(items: list, n: int) -> list[list]:
    size = max(1, -(-len(items) // n))
    return [items[i : i + size] for i in range(0, len(items), size)]


def _parallel(fn, corpus: Corpus, jobs: Sequence[Job], workers: int, *args) -> list[list[Found]]:
    jobs = list(jobs)
    if workers <= 1 or len(jobs) < 50:
        return fn(corpus, jobs, *args)
    # Chunks keep a pool's jobs together so each worker pools its noise once.
    order = sorted(range(len(jobs)), key=lambda k: (jobs[k].series, jobs[k].end))
    parts = _chunks(order, workers * 4)
    out: list[list[Found]] = [[] for _ in jobs]
    with ProcessPoolExecutor(workers) as ex:
        futures = [ex.submit(fn, corpus, [jobs[k] for k in part], *args) for part in parts]
        for part, fut in zip(parts, futures, strict=True):
            for k, found in zip(part, fut.result(), strict=True):
                out[k] = found
    return out


# -- ltx2k -------------------------------------------------------------------


def _ltx2k_batch(corpus: Corpus, jobs: list[Job], min_effect: float) -> list[list[Found]]:
    from ltx2k.analysis import changepoint as cp

    pool_of = {}
    for key, members in corpus.groups().items():
        for i in members:
            pool_of[i] = key
    groups = corpus.groups()
    priors: dict = {}
    out = []
    for job in jobs:
        s = corpus.series[job.series]
        key = (pool_of[job.series], job.end)
        if key not in priors:
            priors[key] = cp.pooled_noise(
                [corpus.series[j].values[: job.end] for j in groups[pool_of[job.series]]]
            )
        res = cp.detect(
            list(s.values[: job.end]),
            samples=list(s.samples[: job.end]),
            prior=priors[key],
            min_effect=min_effect,
        )
        found = [Found(int(st.index), int(st.last_good_index)) for st in res.steps]
        if res.suspect is not None:
            found.append(Found(int(res.suspect.index), int(res.suspect.last_good_index), True))
        out.append(found)
    return out


@dataclass
class Ltx2k(Method):
    name: str = "ltx2k"
    min_effect: float = MIN_EFFECT

    def __post_init__(self):
        self.settings = {
            "call": "cp.detect(values, samples=samples, prior=cp.pooled_noise(pool), "
            f"min_effect={self.min_effect})",
            "pool": "values of every series of the same machine and metric, cut at the same run",
        }

    def run(self, corpus, jobs, workers=1):
        return _parallel(_ltx2k_batch, corpus, jobs, workers, self.min_effect)


# -- asv ---------------------------------------------------------------------


def _asv_weight(samples) -> float | None:
    from asv._stats import get_weight
    from asv_runner.statistics import compute_stats

    if not samples:
        return None
    _, stats = compute_stats(list(samples), 1)
    return get_weight(stats)


def _asv_regressions(values, samples, threshold: float) -> list[Found]:
    from asv.step_detect import detect_regressions, detect_steps

    if sum(v is not None for v in values) < 2:
        return []
    weights = [_asv_weight(s) for s in samples]
    steps = detect_steps(list(values), weights)
    _, _, jumps = detect_regressions(steps, threshold)
    # (before, after): the last run at the best level and the first run of the worse one
    return [Found(int(after), int(before)) for before, after, _, _ in jumps or []]


def _asv_batch(corpus: Corpus, jobs: list[Job], threshold: float, both: bool) -> list[list[Found]]:
    out = []
    for job in jobs:
        s = corpus.series[job.series]
        values, samples = s.values[: job.end], s.samples[: job.end]
        found = _asv_regressions(values, samples, threshold)
        if both:
            inv_v = [None if v is None else 1.0 / v for v in values]
            inv_s = [None if x is None else [1.0 / y for y in x] for x in samples]
            found += _asv_regressions(inv_v, inv_s, threshold)
            found.sort(key=lambda f: f.index)
        out.append(found)
    return out


@dataclass
class Asv(Method):
    name: str = "asv"
    threshold: float = ASV_THRESHOLD
    both: bool = False

    def __post_init__(self):
        import asv

        self.settings = {
            "asv": asv.__version__,
            "call": "detect_regressions(detect_steps(y, w), threshold="
            f"{self.threshold})  # min_size={ASV_MIN_SIZE} (default)",
            "weights": "asv._stats.get_weight(compute_stats(samples, 1)[1]), "
            "i.e. 2 / |ci_99_b - ci_99_a|",
            "directions": "increases and, on 1/value, decreases" if self.both else "increases only",
        }

    def run(self, corpus, jobs, workers=1):
        return _parallel(_asv_batch, corpus, jobs, workers, self.threshold, self.both)


# -- Otava -------------------------------------------------------------------


def _venv_python(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def ensure_otava(venv: Path = OTAVA_VENV) -> Path:
    """The isolated venv's python, creating the venv and installing Otava when absent.

    Otava pins its own numpy and brings cloud clients, so it never shares a
    venv with ltx2k; the runner talks to it through JSON on a pipe.
    """
    py = _venv_python(venv)
    probe = [str(py), "-c", "import otava.analysis"]
    if py.exists() and subprocess.run(probe, capture_output=True).returncode == 0:
        return py
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
    subprocess.run(
        [str(py), "-m", "pip", "install", "-q", f"apache-otava=={OTAVA_VERSION}"], check=True
    )
    subprocess.run(probe, check=True)
    return py


@dataclass
class Otava(Method):
    name: str = "otava"
    max_pvalue: float = 0.001
    min_magnitude: float = MIN_EFFECT
    window_len: int = 50
    venv: Path = OTAVA_VENV

    def __post_init__(self):
        self.settings = {
            "otava": OTAVA_VERSION,
            "call": "otava.analysis.compute_change_points(series, "
            f"window_len={self.window_len}, max_pvalue={self.max_pvalue}, "
            f"min_magnitude={self.min_magnitude})",
            "missing runs": "left out (otava analyze forward-fills them)",
        }

    def run(self, corpus, jobs, workers=1):
        py = ensure_otava(self.venv)
        runner = Path(__file__).with_name("otava_runner.py")
        options = {
            "window_len": self.window_len,
            "max_pvalue": self.max_pvalue,
            "min_magnitude": self.min_magnitude,
        }
        jobs = list(jobs)
        parts = _chunks(list(range(len(jobs))), max(1, workers))
        procs = []
        for part in parts:
            payload = {
                "options": options,
                "series": [list(corpus.series[jobs[k].series].values[: jobs[k].end]) for k in part],
            }
            p = subprocess.Popen(
                [str(py), str(runner)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                # Otava's own imports must not see this process's packages.
                env={k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")},
            )
            procs.append((part, p, json.dumps(payload)))
        out: list[list[Found]] = [[] for _ in jobs]
        for part, p, text in procs:
            stdout, _ = p.communicate(text)
            if p.returncode != 0:
                raise RuntimeError(f"otava runner exited {p.returncode}")
            for k, found in zip(part, json.loads(stdout), strict=True):
                out[k] = [Found(int(f["index"]), int(f["last_good_index"])) for f in found]
        return out


def all_methods(otava_venv: Path = OTAVA_VENV) -> dict[str, Method]:
    return {
        "ltx2k": Ltx2k(),
        "asv": Asv(),
        "asv-both": Asv(name="asv-both", both=True),
        # The project's threshold is 5%; this asks whether asv's fit finds the
        # 3-5% steps when allowed to report them.
        "asv-both-min": Asv(name="asv-both-min", both=True, threshold=MIN_EFFECT),
        "otava": Otava(venv=otava_venv),
        "otava-default": Otava(name="otava-default", min_magnitude=0.0, venv=otava_venv),
    }
