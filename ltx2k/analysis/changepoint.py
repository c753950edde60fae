"""Change points in one benchmark series, judged against the noise of its own history.

A series is one benchmark cell on one GPU: a run's median per commit, oldest
first, ``None`` where the run failed or is missing. :func:`detect` answers
"where did the level move, by how much, and could run-to-run noise have done
it?".

Why not a library. asv's :mod:`asv.step_detect` (an L1 piecewise-constant
fit with a BIC-like penalty) has no significance test: its penalty is scaled
by a noise estimate, but nothing bounds how often an unchanged noisy series
gets a step, and it reports increases only. Apache Otava's
``compute_change_points`` proposes splits by E-divisive means and keeps those
whose two sides differ by a Student t-test at ``max_pvalue``: the noise comes
from the two sides alone (one run after a split gives it none), nothing pays
for having tried every split, and the noise of the GPU's other cells is not
used. Both are scored against this module on one labelled corpus in
``docs/detectors.md``. What is written here is the part neither does: a
scan statistic calibrated for the exact number of runs, with the noise
learned from the series itself and, where given, from the other series of
the same GPU and metric.

The method:

1. **Scale.** Values are compared on a log scale (a 5% step is the same
   size at 2 us and at 400 us); series with zeros or negatives stay linear,
   in units of their median.
2. **Noise.** The between-run noise ``sigma`` is a robust spread of the
   run-to-run differences: their root mean square with the largest left out
   (a step makes one large difference, an odd run two), scaled to estimate
   the standard deviation of one run. With few runs that
   estimate is itself noisy, so a :class:`NoisePrior` (the same estimate,
   pooled over the other series of that GPU and metric, see
   :func:`pooled_noise`) is combined with it as ``PRIOR_WEIGHT`` runs'
   worth of evidence. The within-run confidence of each run's median
   (from its samples) is a floor: a run whose own samples are wide is not
   a precise point, however quiet its neighbours were.
3. **Scan.** For every split ``k`` of a segment, ``T_k`` is the difference
   of the mean levels after and before ``k`` in units of its standard
   error. The largest ``|T_k|`` is the candidate step. Every segment but
   the newest needs two runs on each side (a single odd run in the middle
   of the history is an outlier, not a step); the newest may have one run
   after the split, so a step at HEAD is seen on its first run.
4. **Significance.** The null distribution of ``max |T_k|`` depends on the
   number of runs, on how the noise was estimated and on which splits were
   scanned, none of which a textbook table covers. It is simulated here for
   the exact case (Gaussian noise, the same run count, the same estimator
   and prior weight) and cached; the p-value is the share of simulated
   unchanged series whose statistic reaches the observed one. A split is
   kept when ``p < alpha``; binary segmentation then looks for further
   steps on each side.
5. **Size.** A step is *reported* when it is significant and its size
   reaches the practical minimum (``min_effect``, configurable per
   benchmark in :mod:`ltx2k.analysis.thresholds`). Smaller significant
   steps still split the series, so they never pollute another step's
   baseline.

Each :class:`Step` says where the old level was last seen and the new one
first seen (positions into the input, so missing runs in between make a
range), its ratio with a 95% confidence interval, and whether the new level
persists (two or more runs on it, not undone by a later step).

**Short histories** (fewer than ``SHORT_HISTORY`` runs: a new runner, a new
shape). The series' own estimate is too noisy to lean on, so the pool's
spread of noise across its cells (:class:`NoisePrior` ``spread``) sets how
much it counts where it lies above the pooled noise (:func:`_own_weight`),
and the calibration draws every simulated series' noise from that spread. A
window of at most ``RECENT + 1`` runs may split after its first run. Steps
are flagged at ``_SHORT_FLAG_SHARE`` of alpha only; weaker ones, and a step
seen on one run that reaches ``SUSPECT_ALPHA``, are returned as
``Detection.suspect``: a re-measurement decides (docs/history.md).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

# The family-wise false-flag rate per series and evaluation. Gaussian noise
# alone would flag 0.5% of unchanged series; with the heavier tails of real
# runs (outlier runs, Student-t noise, resampled H200 runs) the labelled
# corpora of docs/detectors.md saw 0.6-0.8%, inside the 1% budget (0.01 saw
# up to 1.6%).
DEFAULT_ALPHA = 0.005

# How many runs' worth of evidence the pooled noise of the GPU's other
# series counts for, against the series' own estimate. A median-based spread
# of n differences is worth about 0.37 n runs of a standard deviation, so a
# 12-run series and the prior weigh about the same.
PRIOR_WEIGHT = 12.0
_ESTIMATOR_EFFICIENCY = 0.8
_MAD_TO_SIGMA = 1.4826

# Simulated unchanged series per calibration: the p-value's resolution is
# 1 / _NULL_DRAWS, well below DEFAULT_ALPHA.
_NULL_DRAWS = 20000
_MIN_RUNS = 3

# The segment that ends at HEAD is tested twice: every split at _WHOLE_SHARE
# of alpha (old steps, so they never sit in a recent step's baseline), then
# only the splits with at most RECENT runs after them, at the rest of alpha.
# Together the two tests keep the false-flag rate at alpha (Bonferroni), and
# the second has fewer candidates to pay for, so a step at HEAD or up to four
# commits before it needs a smaller statistic.
RECENT = 5
_WHOLE_SHARE = 0.1
# A series whose own noise estimate lies outside this central band of what
# the pooled noise predicts is judged on its own estimate (see _own_band).
_OWN_BAND = (0.02, 0.9)
# Below SHORT_HISTORY runs the series' own estimate rests on a handful of
# differences: one in ten unremarkable cells would fall outside _OWN_BAND and
# be judged on that poor estimate, losing most of the pooled noise's power.
# There only an estimate far above what the pool predicts (a bimodal or
# host-bound cell) sets a cell apart; one below it is not trusted at all,
# since a cell that happened to repeat one level for a few runs looks quiet.
SHORT_HISTORY = 8
_OWN_BAND_SHORT = (0.0, 0.99)
# In a short history a step is flagged at this share of alpha only: its noise
# is mostly the pool's, whose tails (and cells that alternate between two
# levels) a few runs cannot show. A step significant at alpha but not at this
# share is *suspected*.
_SHORT_FLAG_SHARE = 0.2
# A step seen on one run (at HEAD, or the window's first run as the old level)
# but not flagged is also suspected when that one run, against the level on
# its other side, reaches this level. For a suspect the report names
# ``ltx2k confirm`` (an interleaved re-measurement of the two commits) as the
# next step, instead of a flag that the next run may undo.
SUSPECT_ALPHA = 0.02


@dataclass(frozen=True)
class NoisePrior:
    """Between-run noise pooled over several series (relative, log scale)."""

    sigma: float
    n_series: int
    # How much the series' true noise varies around sigma: the standard deviation
    # of log(noise) across them, net of what estimating each from its runs adds.
    spread: float = 0.0


@dataclass(frozen=True)
class Noise:
    """The noise a series was judged against."""

    sigma: float  # between-run noise used, relative (0.01 = 1%)
    own: float | None  # the series' own estimate, None with fewer than 3 runs
    prior: float | None  # the pooled estimate, if one was given
    within: float | None  # median within-run standard error of a run's median
    runs: int  # runs with a value


@dataclass(frozen=True)
class Step:
    """A change of level between two runs of a series."""

    index: int  # position of the first run on the new level
    last_good_index: int  # position of the last run on the old level
    ratio: float  # new level / old level
    ci: tuple[float, float]  # 95% confidence interval of the ratio
    p_value: float
    runs_before: int  # runs in the old level's segment
    runs_after: int  # runs in the new level's segment
    persists: bool  # >= 2 runs on the new level and no later step undoing it
    significant_only: bool = False  # below the practical minimum size: not reported
    suspected: bool = False  # short history, not significant enough to flag (SUSPECT_ALPHA)


@dataclass(frozen=True)
class Detection:
    steps: tuple[Step, ...]  # reported: significant and at least min_effect
    changes: tuple[Step, ...]  # every significant change, reported or not
    noise: Noise
    # The most significant suspected step (see _SHORT_FLAG_SHARE, SUSPECT_ALPHA),
    # at least min_effect; None when there is none.
    suspect: Step | None = None

    @property
    def latest(self) -> Step | None:
        return self.steps[-1] if self.steps else None


# --- noise ---------------------------------------------------------------------------------


def _scale(values: Sequence[float]) -> tuple[np.ndarray, float | None]:
    """Values on the scale the detector works in, and the linear unit (None: log scale)."""
    v = np.asarray(values, dtype=float)
    if np.all(v > 0):
        return np.log(v), None
    unit = float(np.median(np.abs(v))) or 1.0
    return v / unit, unit


def _trim(n_diffs: int) -> int:
    # A step makes one large difference and an outlier run two; they are left out.
    return 1 if n_diffs < 6 else max(2, math.ceil(0.15 * n_diffs))


def _trimmed_rms(d: np.ndarray) -> np.ndarray:
    """Root mean square of the smallest differences along the last axis (no consistency factor)."""
    keep = d.shape[-1] - _trim(d.shape[-1])
    sq = np.sort(d * d, axis=-1)[..., :keep]
    return np.sqrt(sq.mean(axis=-1))


@functools.lru_cache(maxsize=256)
def _consistency(n_diffs: int) -> float:
    """Factor that makes the trimmed RMS of n_diffs unit-noise differences estimate 1."""
    rng = np.random.default_rng(n_diffs)
    d = np.diff(rng.standard_normal((_NULL_DRAWS, n_diffs + 1)), axis=1)
    return float(1.0 / np.sqrt(np.mean(_trimmed_rms(d) ** 2)))


def _diff_sigma(y: np.ndarray) -> float | None:
    """Between-run noise from the run-to-run differences, robust to a step and an outlier.

    A trimmed root mean square rather than a median absolute deviation: with
    8 to 20 runs the median wastes most of the little information there is
    (it is worth ~0.37 runs per run, the trimmed RMS ~0.8), and every run
    of precision is detection power at HEAD.
    """
    if len(y) < _MIN_RUNS:
        return None
    d = np.diff(y)
    return float(_trimmed_rms(d) * _consistency(len(d)))


def _median_of_sorted(v: list[float]) -> float:
    """np.median of a sorted list, to the bit for the non-negative values it is given here:
    the middle value, or the two middle ones' sum halved."""
    h = len(v) // 2
    return v[h] if len(v) % 2 else (v[h - 1] + v[h]) / 2


def _within_se(samples, value: float, unit: float | None) -> float | None:
    """Standard error of one run's median from its samples, on the detector's scale.

    In plain Python: it runs for every run of every cell, on a few dozen samples, where
    numpy's per-call overhead is most of the cost. The spread is numpy's median
    absolute deviation to the bit (the deviations are >= 0; the centre's median can
    differ from numpy's only in the sign of a zero, which no deviation keeps).
    """
    s = sorted(float(x) for x in samples or () if x is not None and math.isfinite(x))
    if len(s) < 3 or not value:
        return None
    centre = _median_of_sorted(s)
    spread = _MAD_TO_SIGMA * _median_of_sorted(sorted(abs(x - centre) for x in s))
    # The median of n normal draws has ~1.25x the standard error of the mean.
    se = 1.2533 * spread / math.sqrt(len(s))
    return se / abs(value) if unit is None else se / unit


def _present(values) -> tuple[list[int], list[float]]:
    idx, vals = [], []
    for i, v in enumerate(values):
        if v is None:
            continue
        fv = float(v)
        if math.isfinite(fv):
            idx.append(i)
            vals.append(fv)
    return idx, vals


def pooled_noise(series: Sequence[Sequence[float | None]]) -> NoisePrior | None:
    """The typical between-run noise of several series (e.g. one GPU's cells of one metric).

    The median of the series' own estimates, so one bimodal or broken cell
    does not set the noise of the rest. ``None`` with fewer than 3 usable series.

    The spread is how far the cells' true noise lies from that median: the
    robust variance of the log estimates (1.4826 x their median absolute
    deviation, squared) less the variance that estimating each from its few
    runs adds by itself (:func:`_log_sd`), so a pool of short series does not
    look more varied than it is.
    """
    own, runs = [], []
    for values in series:
        _, vals = _present(values)
        if len(vals) < _MIN_RUNS:
            continue
        y, _ = _scale(vals)
        s = _diff_sigma(y)
        if s is not None:
            own.append(s)
            runs.append(len(vals))
    if len(own) < 3:
        return None
    logs = np.log([s for s in own if s > 0])
    spread = 0.0
    if len(logs) >= 3:
        observed = (_MAD_TO_SIGMA * float(np.median(np.abs(logs - np.median(logs))))) ** 2
        estimation = float(np.mean([_log_sd(n) ** 2 for n in runs]))
        spread = math.sqrt(max(0.0, observed - estimation))
    return NoisePrior(float(np.median(own)), len(own), spread)


@functools.lru_cache(maxsize=256)
def _log_sd(n_runs: int) -> float:
    """Spread of log(own noise estimate) of n_runs runs of unit Gaussian noise, measured
    as pooled_noise measures the pool's (1.4826 x median absolute deviation)."""
    rng = np.random.default_rng(2000 + n_runs)
    d = np.diff(rng.standard_normal((_NULL_DRAWS, n_runs)), axis=1)
    logs = np.log(_trimmed_rms(d))
    return float(_MAD_TO_SIGMA * np.median(np.abs(logs - np.median(logs))))


@functools.lru_cache(maxsize=256)
def _own_band(n_runs: int) -> tuple[float, float]:
    """Where a series' own noise estimate falls (quantiles _OWN_BAND) when its noise is the prior's.

    Outside it the series is not like the GPU's other cells of its metric: far
    above, a bimodal autotuner or a host-bound cell, whose noise the prior
    would understate (false flags); far below, a quiet cell in a noisy pool,
    whose steps the prior would hide. Either way it is judged on its own.
    """
    rng = np.random.default_rng(1000 + n_runs)
    d = np.diff(rng.standard_normal((_NULL_DRAWS, n_runs)), axis=1)
    band = _OWN_BAND if n_runs >= SHORT_HISTORY else _OWN_BAND_SHORT
    lo, hi = np.quantile(_trimmed_rms(d) * _consistency(n_runs - 1), band)
    return float(lo) if band[0] > 0 else 0.0, float(hi)


def _own_weight(n_runs: int, spread: float) -> float | None:
    """The weight of a short series' own log noise estimate, where it is above the pool's.

    The pool says the cell's log noise lies around log(prior.sigma) with
    standard deviation ``spread``; the cell's own estimate measures it with
    standard deviation _log_sd(n_runs). Weighting each by its precision (the
    normal-normal posterior mean) trusts a varied pool less and a long series
    more; never less than the weight runs get in a long history. It applies
    only to an estimate above the pool's: below it, a few runs that happened to
    repeat one level (a cell that alternates between two) would look quiet, so
    the long-history rule stays. None: that rule applies (8 or more runs, or a
    pool of one noise).
    """
    if n_runs >= SHORT_HISTORY or spread <= 0:
        return None
    dof = _ESTIMATOR_EFFICIENCY * (n_runs - 1)
    return max(dof / (dof + PRIOR_WEIGHT), spread**2 / (spread**2 + _log_sd(n_runs) ** 2))


def _combine(
    own: float | None, n_runs: int, prior: NoisePrior | None, spread: float = 0.0
) -> float | None:
    if prior is None:
        return own
    if own is None:
        return prior.sigma
    lo, hi = _own_band(n_runs)
    if not lo * prior.sigma <= own <= hi * prior.sigma:
        return own
    w = _own_weight(n_runs, spread)
    if w is not None and own > prior.sigma:
        return math.exp(w * math.log(own) + (1.0 - w) * math.log(prior.sigma))
    dof = _ESTIMATOR_EFFICIENCY * (n_runs - 1)
    return math.sqrt((PRIOR_WEIGHT * prior.sigma**2 + dof * own**2) / (PRIOR_WEIGHT + dof))


# --- the scan statistic and its null distribution -------------------------------------------


def _min_before(n: int, m: int, head_end: bool) -> int:
    """Runs a split needs before it: two, or one in a series no longer than RECENT + 1.

    There every split is recent, and the window's first run is all it holds of
    the old level (a runner's first week, a shape the suite just gained):
    a step right after it is judged as a step at HEAD is, on its one run.
    """
    return 1 if head_end and m == n and n <= RECENT + 1 else 2


def _scan(y: np.ndarray, lo: int, hi: int, head_end: bool):
    """Splits k in (lo, hi) with their standardized mean differences (per unit sigma)."""
    seg = y[lo:hi]
    m = len(seg)
    min_after = 1 if head_end else 2
    ks = np.arange(_min_before(len(y), m, head_end), m - min_after + 1)
    if len(ks) == 0:
        return ks, ks.astype(float)
    c = np.cumsum(seg)
    left = c[ks - 1] / ks
    right = (c[-1] - c[ks - 1]) / (m - ks)
    t = (right - left) / np.sqrt(1.0 / ks + 1.0 / (m - ks))
    return ks + lo, t


@functools.lru_cache(maxsize=512)
def _null_max(
    n: int, m: int, head_end: bool, prior: bool, floor_ratio: float, recent: int, spread: float
) -> np.ndarray:
    """Sorted draws of max|T| for an unchanged segment of m runs in a series of n.

    ``recent`` > 0 keeps only the splits with at most that many runs after them.
    Simulated with the same noise estimator as the real series: the sigma of
    the whole n-run series (own estimate, combined with an exact prior when
    the real series had one), floored at ``floor_ratio`` (the within-run floor
    relative to the prior, rounded so the cache stays small). With ``spread``
    each simulated series' true noise is the prior's times a log-normal factor
    of that spread: a cell of the pool may be noisier than its median.
    """
    if spread == 0.0 and 0.0 <= floor_ratio <= 1.0:
        # Unit noise at least the floor is unit noise: the floor changes no draw, only
        # the final sigma, so every such floor shares the draws' statistics.
        tmax, sigma = _null_draws_unfloored(n, m, head_end, prior, recent)
    else:
        tmax, sigma = _null_draws(n, m, head_end, prior, floor_ratio, recent, spread)
    sigma = np.maximum(sigma, floor_ratio)
    if tmax is None:
        return np.zeros(1)
    stat = tmax / np.maximum(sigma, 1e-12)
    return np.sort(stat)


@functools.lru_cache(maxsize=256)
def _null_draws_unfloored(n: int, m: int, head_end: bool, prior: bool, recent: int):
    return _null_draws(n, m, head_end, prior, 1.0, recent, 0.0)


def _null_draws(
    n: int, m: int, head_end: bool, prior: bool, floor_ratio: float, recent: int, spread: float
) -> tuple[np.ndarray | None, np.ndarray]:
    """:func:`_null_max`'s simulated series: each one's max|T| over the splits (None
    where there is no split) and its noise estimate before the floor."""
    rng = np.random.default_rng(20261201 + 7919 * n + 31 * m + 2 * head_end + prior + 5 * recent)
    scale = np.ones((_NULL_DRAWS, 1))
    if spread > 0:
        scale = np.exp(spread * rng.standard_normal((_NULL_DRAWS, 1)))
    # Medians no more precise than their own samples say: noise at least the floor.
    z = rng.standard_normal((_NULL_DRAWS, n)) * np.maximum(scale, floor_ratio)
    own = _trimmed_rms(np.diff(z, axis=1)) * _consistency(n - 1)
    if prior:
        dof = _ESTIMATOR_EFFICIENCY * (n - 1)
        pooled = np.sqrt((PRIOR_WEIGHT + dof * own**2) / (PRIOR_WEIGHT + dof))
        w = _own_weight(n, spread)
        if w is not None:
            pooled = np.where(own > 1.0, np.exp(w * np.log(np.maximum(own, 1e-300))), pooled)
        lo, hi = _own_band(n)
        sigma = np.where((own < lo) | (own > hi), own, pooled)
    else:
        sigma = own
    seg = z[:, n - m :] if head_end else z[:, :m]
    min_after = 1 if head_end else 2
    ks = np.arange(_min_before(n, m, head_end), m - min_after + 1)
    if recent:
        ks = ks[ks >= m - recent]
    if len(ks) == 0:
        return None, sigma
    c = np.cumsum(seg, axis=1)
    at = c[:, ks - 1]  # a copy (fancy indexing), so the arithmetic below runs in place in it:
    left = at / ks  # the same operations in the same order, without a temporary per step
    t = np.subtract(c[:, -1:], at, out=at)
    t /= m - ks
    t -= left
    np.abs(t, out=t)
    t /= np.sqrt(1.0 / ks + 1.0 / (m - ks))
    return t.max(axis=1), sigma


def _p_value(
    stat: float,
    n: int,
    m: int,
    head_end: bool,
    prior: bool,
    floor_ratio: float,
    recent: int,
    spread: float = 0.0,
):
    null = _null_max(n, m, head_end, prior, floor_ratio, recent, spread)
    above = len(null) - int(np.searchsorted(null, stat, side="left"))
    return (above + 1) / (len(null) + 1)


# --- detection ---------------------------------------------------------------------------------

# How far (in noise units) a run must lie from both of its neighbours to be an
# outlier: a difference of two Gaussian runs is that large (3.5 of its standard
# deviations) in 5 of 10^4 pairs, and it must happen on both sides at once.
_OUTLIER_SIGMAS = 5.0


def _not_outliers(y: np.ndarray, sigma: float) -> np.ndarray:
    """False for each run, other than the first and the last, far from both neighbours
    while they agree with each other.

    The neighbours, not the median of several runs: the two runs of a two-run
    excursion are each close to the other, so they stay a (short-lived) level.
    """
    keep = np.ones(len(y), dtype=bool)
    tol = _OUTLIER_SIGMAS * sigma if sigma > 0 else 1e-12
    for i in range(1, len(y) - 1):
        gap = min(abs(y[i] - y[i - 1]), abs(y[i] - y[i + 1]))
        # ... and its neighbours on one level: next to a step they are not.
        level = abs(y[i - 1] - y[i + 1]) <= (0.5 * tol if sigma > 0 else tol)
        keep[i] = not (gap > tol and level)
    return keep


def _check_args(values, samples, alpha, min_effect) -> None:
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise TypeError(
            f"values must be a sequence of numbers or None, got {type(values).__name__}"
        )
    for i, v in enumerate(values):
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
            raise TypeError(f"values[{i}] must be a number or None, got {v!r}")
    if samples is not None and len(samples) != len(values):
        raise ValueError(
            f"samples must have one entry per value: {len(samples)} samples for "
            f"{len(values)} values"
        )
    if not (isinstance(alpha, float) and 0.0 < alpha < 1.0):
        raise ValueError(f"alpha must be a float in (0, 1), got {alpha!r}")
    if isinstance(min_effect, bool) or not isinstance(min_effect, (int, float)) or min_effect < 0:
        raise ValueError(f"min_effect must be a number >= 0 (0.03 = 3%), got {min_effect!r}")


def detect(
    values: Sequence[float | None],
    *,
    samples: Sequence[Sequence[float] | None] | None = None,
    prior: NoisePrior | None = None,
    min_effect: float = 0.03,
    alpha: float = DEFAULT_ALPHA,
) -> Detection:
    """Steps in *values* (oldest first; ``None`` = no run), see the module docstring.

    *samples* are the runs' raw samples (the within-run floor of the noise),
    *prior* the pooled noise of comparable series, *min_effect* the smallest
    relative step worth reporting (0.03 = 3%).
    """
    _check_args(values, samples, alpha, min_effect)
    idx, vals = _present(values)
    n = len(vals)
    if n == 0:
        return Detection((), (), Noise(math.nan, None, None, None, 0))
    y, unit = _scale(vals)
    log_scale = unit is None
    own = _diff_sigma(y)
    ses = []
    if samples is not None:
        for i, v in zip(idx, vals, strict=True):
            se = _within_se(samples[i], v, unit)
            if se is not None:
                ses.append(se)
    within = float(np.median(ses)) if ses else None
    # In a short history the prior carries most of the noise estimate, so how much
    # the pool's cells differ enters it and its calibration (quantised for the cache).
    spread = 0.0
    if prior is not None and log_scale and prior.sigma > 0 and n < SHORT_HISTORY:
        spread = round(prior.spread, 1)
    sigma = _combine(own, n, prior if log_scale else None, spread)
    noise = Noise(
        sigma if sigma is not None else math.nan,
        own,
        prior.sigma if prior is not None and log_scale else None,
        within,
        n,
    )
    if n < _MIN_RUNS or sigma is None:
        return Detection((), (), noise)

    use_prior = prior is not None and log_scale and prior.sigma > 0
    eff = max(sigma, within or 0.0)
    exact = eff == 0.0  # e.g. allocation counts: any change of level is real
    floor_ratio = 0.0
    if use_prior and within:
        # Quantised so that the calibration cache is shared by similar series.
        floor_ratio = round(within / prior.sigma, 1)

    # A single odd run inside the history is an outlier, not two steps: it is far
    # from the runs on both sides of it, where the first run of a new level is close
    # to the runs after it. It is left out of the scan (its place stays, so a
    # step's range still counts it); HEAD cannot be told from a step yet and stays.
    keep = _not_outliers(y, eff)
    if not keep.all():
        idx = [i for i, k in zip(idx, keep, strict=True) if k]
        y = y[keep]
        n = len(y)
        if n < _MIN_RUNS:
            return Detection((), (), noise)

    splits: list[tuple[int, float]] = []  # (split position into vals, p)

    def segment(lo: int, hi: int) -> None:
        head_end = hi == n
        ks, t = _scan(y, lo, hi, head_end)
        if len(ks) == 0:
            return
        if exact:
            # Rounding of the cumulative sums is the only noise of an exact series.
            moved = np.abs(t) > 1e-9
            if not moved.any():
                return
            j = int(np.argmax(np.abs(t)))
            k, p = int(ks[j]), 0.0
        else:
            stat = np.abs(t) / eff
            m = hi - lo
            # max|T| / sigma does not depend on the noise's scale, so the simulated
            # series (unit noise, the prior exact) calibrate it directly.
            j = int(np.argmax(stat))
            p = _p_value(float(stat[j]), n, m, head_end, use_prior, floor_ratio, 0, spread)
            p *= 1.0 / _WHOLE_SHARE if head_end else 1.0
            if p >= alpha and head_end:
                # The newest splits alone: fewer candidates, a lower bar, more power
                # for the steps that matter now (see RECENT and _WHOLE_SHARE).
                near = ks >= hi - RECENT
                if near.any():
                    j = int(np.flatnonzero(near)[np.argmax(stat[near])])
                    p = _p_value(
                        float(stat[j]), n, m, head_end, use_prior, floor_ratio, RECENT, spread
                    )
                    p *= 1.0 / (1.0 - _WHOLE_SHARE)
            k = int(ks[j])
            if p >= alpha:
                return
        splits.append((k, p))
        segment(lo, k)
        segment(k, hi)

    segment(0, n)
    splits.sort()
    bounds = [0] + [k for k, _ in splits] + [n]
    changes = []
    for s, (k, p) in enumerate(splits):
        before = y[bounds[s] : k]
        after = y[k : bounds[s + 2]]
        diff = float(after.mean() - before.mean())
        se = eff * math.sqrt(1.0 / len(before) + 1.0 / len(after))
        lo_d, hi_d = diff - 1.96 * se, diff + 1.96 * se
        if log_scale:
            ratio, ci = math.exp(diff), (math.exp(lo_d), math.exp(hi_d))
        else:
            base = float(before.mean())
            ratio = (base + diff) / base if base else math.inf
            ends = sorted(((base + lo_d) / base, (base + hi_d) / base)) if base else None
            ci = (ends[0], ends[1]) if ends else (math.inf, math.inf)
        undone = False
        if s + 1 < len(splits):
            nxt = float(y[splits[s + 1][0] : bounds[s + 3]].mean() - after.mean())
            undone = nxt * diff < 0 and abs(nxt) >= 0.5 * abs(diff)
        changes.append(
            Step(
                index=idx[k],
                last_good_index=idx[k - 1],
                ratio=ratio,
                ci=ci,
                p_value=p,
                runs_before=len(before),
                runs_after=len(after),
                persists=len(after) >= 2 and not undone,
                # Multiplicative, so a 2% slowdown and its undoing count alike.
                significant_only=max(ratio, 1.0 / ratio) < 1.0 + min_effect if ratio > 0 else False,
                suspected=n < SHORT_HISTORY and p >= alpha * _SHORT_FLAG_SHARE,
            )
        )
    reported = tuple(c for c in changes if not (c.significant_only or c.suspected))
    candidates: list[Step | None] = [c for c in changes if c.suspected and not c.significant_only]
    null = (use_prior, floor_ratio, spread)
    if not exact and not (splits and splits[-1][0] == n - 1):
        candidates.append(_suspect(y, bounds[-2], eff, log_scale, min_effect, idx, n, null))
    if not exact and not splits and _min_before(n, n, True) == 1:
        # Time-reversed, the first run's split is HEAD's: the same null distribution.
        first = _suspect(y[::-1], 0, eff, log_scale, min_effect, idx[::-1], n, null)
        if first is not None:
            candidates.append(
                replace(
                    first,
                    index=idx[1],
                    last_good_index=idx[0],
                    ratio=1.0 / first.ratio,
                    ci=(1.0 / first.ci[1], 1.0 / first.ci[0]),
                    runs_before=1,
                    runs_after=n - 1,
                    persists=n - 1 >= 2,
                )
            )
    candidates = [c for c in candidates if c is not None]
    suspect = min(candidates, key=lambda c: c.p_value) if candidates else None
    return Detection(reported, tuple(changes), noise, suspect)


def _suspect(y, lo: int, eff: float, log_scale: bool, min_effect: float, idx, n, null):
    """HEAD's one run against the level of the segment before it, at SUSPECT_ALPHA.

    Only the split before HEAD is tested, so its null distribution is that
    split's alone; the run must also be min_effect off the level.
    """
    before = y[lo : n - 1]
    if len(before) < 2:
        return None
    diff = float(y[-1] - before.mean())
    se = eff * math.sqrt(1.0 / len(before) + 1.0)
    # The scan's statistic (|T| / sigma) at the one split, calibrated like the scan.
    p = _p_value(abs(diff) / se, n, n - lo, True, null[0], null[1], 1, null[2])
    if p >= SUSPECT_ALPHA:
        return None
    if log_scale:
        ratio, ci = math.exp(diff), (math.exp(diff - 1.96 * se), math.exp(diff + 1.96 * se))
    else:
        base = float(before.mean())
        if not base:
            return None
        ratio = (base + diff) / base
        ends = sorted(((base + diff - 1.96 * se) / base, (base + diff + 1.96 * se) / base))
        ci = (ends[0], ends[1])
    if ratio <= 0 or max(ratio, 1.0 / ratio) < 1.0 + min_effect:
        return None
    return Step(
        index=idx[n - 1],
        last_good_index=idx[n - 2],
        ratio=ratio,
        ci=ci,
        p_value=p,
        runs_before=len(before),
        runs_after=1,
        persists=False,
        suspected=True,
    )
