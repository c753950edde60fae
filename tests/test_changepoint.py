"""The change-point detector on series with known, injected steps and known noise.

Every expectation comes from how a series was built (where the step is, how
large, what the noise is) and from the method as the module describes it,
never from the detector's own output. Noise is log-normal (Gaussian on the
detector's log scale) with fixed seeds, so each test is deterministic.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from ltx2k.analysis import changepoint as cp
from ltx2k.analysis.changepoint import NoisePrior, detect, pooled_noise

N = 20
SIGMA = 0.01  # 1% between-run noise
TRIALS = 100


def noisy(n: int, seed: int, sigma: float = SIGMA, level: float = 100.0) -> np.ndarray:
    """n runs of one unchanged cell: log-normal noise of relative size sigma."""
    return level * np.exp(np.random.default_rng(seed).normal(0.0, sigma, n))


def stepped(n: int, k: int, ratio: float, seed: int, sigma: float = SIGMA) -> list[float]:
    """Runs k.. are on a level ratio x the old one."""
    v = noisy(n, seed, sigma)
    v[k:] *= ratio
    return [float(x) for x in v]


# --- a clean step, wherever it is -----------------------------------------------------------

# HEAD, 1..4 commits before it (the recent splits), and the middle of the history.
POSITIONS = [N - 1, N - 2, N - 3, N - 4, N - 5, N // 2]


@pytest.mark.parametrize("k", POSITIONS)
def test_clean_step_is_placed_sized_and_covered(k):
    ratio = 1.10  # ten sigma: found every time, so the test is about where and how large
    covered = extra = 0
    for seed in range(TRIALS):
        res = detect(stepped(N, k, ratio, seed))
        (st,) = [s for s in res.steps if s.index == k]
        # Binary segmentation tests each side again at alpha: a rare false step may join.
        extra += len(res.steps) - 1
        assert st.last_good_index == k - 1
        if len(res.changes) == 1:  # a small significant change elsewhere also splits
            assert res.latest is st
            assert (st.runs_before, st.runs_after) == (k, N - k)
        assert st.ci[0] <= st.ratio <= st.ci[1]
        assert st.p_value < cp.DEFAULT_ALPHA
        assert not st.significant_only
        # The new level persists once it has two runs; a step at HEAD has one.
        assert st.persists is (N - k >= 2)
        covered += st.ci[0] <= ratio <= st.ci[1]
    assert extra <= 3
    # A 95% interval with sigma estimated from ~19 differences covers ~93-95% of the time.
    assert covered >= 90


def test_step_at_head_is_seen_on_its_first_run_without_persisting():
    res = detect(stepped(N, N - 1, 0.85, seed=1))
    (st,) = res.steps
    assert st.index == N - 1 and st.runs_after == 1 and st.persists is False
    assert st.ratio < 1.0


def test_recent_splits_tested_apart_find_more_steps_at_head(monkeypatch):
    """The second test on the last RECENT splits needs a smaller statistic than the whole scan."""

    def found(k_from_end: int) -> int:
        hits = 0
        for seed in range(200):
            res = detect(stepped(N, N - k_from_end, 1.05, seed), min_effect=0.0)
            hits += any(c.index == N - k_from_end for c in res.changes)
        return hits

    with_recent = found(1)
    # RECENT = 0 leaves no split in the recent window: only the whole-history test runs.
    monkeypatch.setattr(cp, "RECENT", 0)
    whole_only = found(1)
    assert with_recent >= whole_only + 20, (with_recent, whole_only)


def test_step_later_undone_does_not_persist():
    # Runs 8..11 on a level 15% higher, then back: a spike of four runs, two steps.
    v = noisy(N, seed=7)
    v[8:12] *= 1.15
    res = detect([float(x) for x in v])
    first, second = res.steps
    assert (first.index, second.index) == (8, 12)
    assert first.ratio > 1.1 and second.ratio < 1 / 1.1
    assert first.runs_after == 4
    assert first.persists is False  # undone by the next step
    assert second.persists is True


def test_later_step_the_same_way_does_not_undo():
    # +10% at 8, another +10% at 14: the first level is left further behind, not undone.
    v = noisy(N, seed=9)
    v[8:] *= 1.10
    v[14:] *= 1.10
    first, second = detect([float(x) for x in v]).steps
    assert (first.index, second.index) == (8, 14)
    assert first.persists is True and second.persists is True
    assert first.ratio == pytest.approx(1.10, rel=0.02)


def test_two_run_spike_mid_history_does_not_persist():
    # Two runs on a higher level, then back: the first step has two runs after it, so only
    # the undoing step keeps it from persisting.
    v = noisy(N, seed=8)
    v[6:8] *= 1.3
    res = detect([float(x) for x in v])
    assert [s.index for s in res.steps] == [6, 8]
    assert res.steps[0].runs_after == 2 and res.steps[0].persists is False


def test_single_odd_run_mid_history_is_not_a_step():
    # Module docstring, Scan: "a single odd run in the middle of the history is an
    # outlier, not a step". One run 50% off on a 1%-noise series, same level before and after.
    v = noisy(N, seed=3)
    v[10] *= 1.5
    res = detect([float(x) for x in v])
    assert res.steps == ()


# --- missing runs ---------------------------------------------------------------------------


def test_missing_runs_between_levels_make_a_range():
    v: list[float | None] = stepped(N, 12, 1.10, seed=2)
    v[10] = v[11] = None  # the runs of commits 10 and 11 failed
    res = detect(v)
    (st,) = res.steps
    assert (st.last_good_index, st.index) == (9, 12)
    assert st.last_good_index < st.index - 1
    assert (st.runs_before, st.runs_after) == (10, 8)
    assert res.noise.runs == N - 2


def test_none_at_head_counts_positions_into_the_input():
    v: list[float | None] = stepped(N, 15, 1.10, seed=3)
    v[-1] = None  # HEAD has no run yet
    res = detect(v)
    (st,) = res.steps
    assert (st.index, st.last_good_index, st.runs_after) == (15, 14, 4)
    assert st.persists is True
    # A step on the last run with a value, HEAD missing: one run on the new level.
    w: list[float | None] = stepped(N, N - 2, 1.10, seed=3)
    w[-1] = None
    (st,) = detect(w).steps
    assert (st.index, st.runs_after, st.persists) == (N - 2, 1, False)


def test_all_none():
    res = detect([None] * 6)
    assert res.steps == () and res.changes == () and res.latest is None
    assert math.isnan(res.noise.sigma)
    assert (res.noise.own, res.noise.prior, res.noise.within, res.noise.runs) == (
        None,
        None,
        None,
        0,
    )


@pytest.mark.parametrize("values", [[1.0, 2.0], [None, 5.0, None, 50.0], [3.0]])
def test_fewer_than_three_runs(values):
    res = detect(values)
    assert res.steps == () and res.changes == ()
    n = sum(v is not None for v in values)
    assert res.noise.own is None and res.noise.runs == n
    assert math.isnan(res.noise.sigma)  # no own estimate and no prior: no noise at all
    prior = NoisePrior(0.02, 5)
    res = detect(values, prior=prior)
    assert res.steps == ()
    # With a prior its noise is the one the series would be judged on.
    assert res.noise.sigma == 0.02 and res.noise.prior == 0.02 and res.noise.own is None


# --- exact series ---------------------------------------------------------------------------


def test_exact_series_step_has_p_zero():
    # Allocation counts: 9 per call, then 1 from commit 10 on; nothing else moves.
    v = [9.0] * 10 + [1.0] * 3
    res = detect(v)
    (st,) = res.steps
    assert (st.index, st.last_good_index) == (10, 9)
    assert st.p_value == 0.0
    assert st.ratio == pytest.approx(1 / 9, rel=1e-12)
    assert st.ci == pytest.approx((1 / 9, 1 / 9), rel=1e-12)  # no noise, no uncertainty
    assert st.persists is True
    assert res.noise.sigma == 0.0
    # At HEAD the first differing run is already a step.
    (st,) = detect([9.0] * 10 + [1.0]).steps
    assert (st.index, st.p_value, st.persists) == (10, 0.0, False)


@pytest.mark.parametrize("value", [6.0, 0.1 + 0.2, 1.1, 3e-7, 123456.789])
def test_constant_series_has_no_step_despite_rounding(value):
    values = [value] * 37
    y, _ = cp._scale(values)
    _, t = cp._scan(y, 0, len(y), True)
    # What the exact path has to tolerate: the split means differ by rounding alone
    # for some of these values; none may become a step.
    assert np.all(np.abs(t) < 1e-9)
    res = detect(values, min_effect=0.0)
    assert res.changes == () and res.noise.sigma == 0.0


def test_rounding_noise_is_nonzero_for_some_constant_series():
    # Guards the previous test: the split means of a constant series do not all agree
    # exactly, so a zero tolerance would turn rounding into steps.
    worst = 0.0
    for value in (6.0, 0.1 + 0.2, 1.1, 3e-7, 123456.789):
        y, _ = cp._scale([value] * 37)
        worst = max(worst, float(np.max(np.abs(cp._scan(y, 0, len(y), True)[1]))))
    assert worst > 0.0


# --- the linear scale -------------------------------------------------------------------------


def test_values_with_zero_and_negatives_use_the_linear_scale():
    rng = np.random.default_rng(11)
    v = np.r_[rng.normal(1.0, 0.5, 15), rng.normal(6.0, 0.5, 5)]
    v[3] = 0.0  # a legitimate zero and a negative value: the log scale is impossible
    v[8] = -0.3
    prior = NoisePrior(0.01, 8)
    res = detect([float(x) for x in v], prior=prior)
    (st,) = res.steps
    assert (st.index, st.last_good_index) == (15, 14)
    # The ratio is the new level over the old, in the series' own units.
    assert st.ratio == pytest.approx(v[15:].mean() / v[:15].mean(), rel=1e-9)
    assert st.ci[0] <= st.ratio <= st.ci[1]
    # A relative prior (log scale) means nothing on a linear series: not used.
    assert res.noise.prior is None


def test_linear_scale_ci_is_ordered_on_a_negative_baseline():
    # A level moving from -5 to -3: ratio 0.6, and its interval must contain it.
    rng = np.random.default_rng(4)
    v = np.r_[rng.normal(-5.0, 0.3, 15), rng.normal(-3.0, 0.3, 5)]
    (st,) = detect([float(x) for x in v]).steps
    assert st.index == 15
    assert st.ci[0] <= st.ratio <= st.ci[1]


def test_linear_scale_narrow_samples_do_not_hide_a_step():
    # Level -100 -> -90 with 1-unit run-to-run noise (a 10-sigma step), 25 samples per run
    # with a 2-unit spread: the standard error of each median (~0.5 units) is below the
    # between-run noise, so it must not raise the floor above it.
    rng = np.random.default_rng(5)
    v = np.r_[rng.normal(-100.0, 1.0, 15), rng.normal(-90.0, 1.0, 5)]
    samples = [tuple(float(s) for s in x + rng.normal(0.0, 2.0, 25)) for x in v]
    values = [float(x) for x in v]
    assert [s.index for s in detect(values).steps] == [15]
    res = detect(values, samples=samples)
    assert [s.index for s in res.steps] == [15]
    assert res.noise.within < res.noise.sigma


# --- false flags ------------------------------------------------------------------------------


def _flag_rate(trials: int, seed0: int, prior: NoisePrior | None, sigma: float = SIGMA) -> float:
    flagged = 0
    for i in range(trials):
        n = 8 + i % 23  # 8..30 runs
        res = detect(list(noisy(n, seed0 + i, sigma)), prior=prior, min_effect=0.0)
        flagged += bool(res.changes)
    return flagged / trials


def test_false_flag_rate_with_a_correct_prior():
    # DEFAULT_ALPHA is 0.4%; allow the binomial spread of 500 trials.
    assert _flag_rate(500, 1000, NoisePrior(SIGMA, 12)) <= 0.02


def test_false_flag_rate_without_a_prior():
    assert _flag_rate(500, 2000, None) <= 0.02


@pytest.mark.parametrize("prior", [None, NoisePrior(SIGMA, 12)])
def test_flag_rate_matches_alpha_on_unchanged_series(prior):
    """The simulated null is right: unchanged series are flagged at most alpha of the time.

    The whole scan at a quarter of alpha and the recent splits at the rest overlap, so the
    union lies between three quarters of alpha and alpha (Bonferroni). A null simulated
    without the prior's help would be too conservative and fall below that.
    """
    alpha, trials = 0.05, 3000
    flagged = 0
    for i in range(trials):
        res = detect(list(noisy(12, 50_000 + i)), alpha=alpha, min_effect=0.0, prior=prior)
        flagged += bool(res.changes)
    rate = flagged / trials
    spread = 3 * math.sqrt(alpha * (1 - alpha) / trials)
    assert 0.75 * alpha - spread <= rate <= alpha + spread, rate


# --- the prior ------------------------------------------------------------------------------


def test_quiet_series_in_noisy_pool_is_judged_on_its_own_noise():
    # 0.2% noise among cells with 2%: the prior would hide a 2% step; its own noise does not.
    v = stepped(N, N - 3, 1.02, seed=21, sigma=0.002)
    res = detect(v, prior=NoisePrior(0.02, 10), min_effect=0.01)
    assert res.noise.own is not None and res.noise.own < 0.004
    assert res.noise.sigma == pytest.approx(res.noise.own, rel=1e-12)
    assert res.noise.prior == 0.02
    assert [s.index for s in res.steps] == [N - 3]


def test_noisy_series_in_quiet_pool_is_judged_on_its_own_noise():
    res = detect(list(noisy(N, 22, sigma=0.05)), prior=NoisePrior(0.005, 10))
    assert res.noise.own is not None and res.noise.own > 0.03
    assert res.noise.sigma == pytest.approx(res.noise.own, rel=1e-12)
    # The quiet pool's noise would flag a 5%-noise cell often; its own keeps it clean.
    assert _flag_rate(300, 3000, NoisePrior(0.005, 10), sigma=0.05) <= 0.02


def test_prior_and_own_estimate_are_combined_when_alike():
    res = detect(list(noisy(N, 23)), prior=NoisePrior(SIGMA, 10))
    own, prior = res.noise.own, res.noise.prior
    assert own is not None and prior == SIGMA
    # A series like the pool's others: its sigma lies between its own estimate and the prior.
    assert min(own, prior) < res.noise.sigma < max(own, prior)


def test_prior_sets_the_noise_of_a_short_series():
    """With few runs the prior dominates the combined noise (it is worth PRIOR_WEIGHT runs)."""
    res = detect(list(noisy(4, 25)), prior=NoisePrior(SIGMA, 10))
    own = res.noise.own
    # Less than half the prior, yet a plausible 4-run estimate of it: combined, not replaced.
    assert own is not None and 0.2 * SIGMA < own < 0.5 * SIGMA
    assert abs(res.noise.sigma - SIGMA) < abs(res.noise.sigma - own)


# --- within-run samples -----------------------------------------------------------------------


def _runs_with_samples(spread: float, seed: int):
    """0.2% between runs, a 1% step at run 15 of 20, 25 samples per run of relative spread."""
    values = stepped(N, 15, 1.01, seed=seed, sigma=0.002)
    rng = np.random.default_rng(seed + 1)
    samples = [tuple(float(s) for s in v * (1 + rng.normal(0.0, spread, 25))) for v in values]
    return values, samples


def test_wide_samples_are_a_floor_on_the_noise():
    values, wide = _runs_with_samples(0.10, seed=31)
    # Large against the between-run spread: found without samples.
    assert [s.index for s in detect(values, min_effect=0.0).steps] == [15]
    res = detect(values, samples=wide, min_effect=0.0)
    # Each median's standard error is sqrt(pi/2) * 10% / sqrt(25) = 2.5%, the floor.
    assert res.noise.within == pytest.approx(math.sqrt(math.pi / 2) * 0.10 / 5, rel=0.2)
    assert res.changes == ()


def test_wide_samples_are_a_floor_with_a_prior_too():
    values, wide = _runs_with_samples(0.10, seed=31)
    # A prior equal to the series' own between-run noise: the floor must still hold.
    res = detect(values, samples=wide, prior=NoisePrior(0.002, 10), min_effect=0.0)
    assert res.noise.within is not None and res.noise.within > 5 * res.noise.sigma
    assert res.changes == ()


def test_narrow_samples_keep_a_step():
    values, narrow = _runs_with_samples(0.001, seed=32)
    res = detect(values, samples=narrow, min_effect=0.0)
    assert res.noise.within is not None and res.noise.within < res.noise.sigma
    assert [s.index for s in res.steps] == [15]


def test_samples_too_few_or_missing_give_no_floor():
    values = stepped(N, 15, 1.10, seed=33)
    samples = [None] * (N - 1) + [(1.0, 2.0)]  # fewer than 3 samples tell nothing
    res = detect(values, samples=samples)
    assert res.noise.within is None
    assert [s.index for s in res.steps] == [15]


# --- the practical minimum ------------------------------------------------------------------


def test_min_effect_separates_reported_from_significant():
    values = stepped(N, 14, 1.015, seed=41, sigma=0.001)  # 15 sigma, 1.5%
    res = detect(values, min_effect=0.02)
    assert res.steps == () and res.latest is None
    (ch,) = res.changes
    assert ch.index == 14 and ch.significant_only is True
    res = detect(values, min_effect=0.01)
    (st,) = res.steps
    assert st.index == 14 and st.significant_only is False
    assert res.changes == res.steps


def test_small_significant_step_still_splits_the_baseline():
    # A 1.5% step at 6 then a 10% one at 14: the second is measured from the level after
    # the first, not from a baseline mixing both.
    v = noisy(N, 42, sigma=0.001)
    v[6:] *= 1.015
    v[14:] *= 1.10
    res = detect([float(x) for x in v], min_effect=0.05)
    assert [c.index for c in res.changes] == [6, 14]
    (st,) = res.steps
    assert st.index == 14 and st.runs_before == 8
    assert st.ratio == pytest.approx(1.10, rel=0.005)


# --- pooled noise ---------------------------------------------------------------------------


def test_pooled_noise_needs_three_usable_series():
    good = [list(noisy(N, s)) for s in (51, 52)]
    unusable = [[1.0, 2.0], [None] * 10, [None, 3.0, None, 4.0]]
    assert pooled_noise([]) is None
    assert pooled_noise(good + unusable) is None


def test_pooled_noise_is_the_median_of_own_estimates():
    sigmas = [0.002, 0.005, 0.01, 0.02, 0.5]  # one broken, bimodal-like cell
    series: list[list[float | None]] = [list(noisy(N, 60 + i, s)) for i, s in enumerate(sigmas)]
    series[1][4] = None  # a failed run does not make a series unusable
    series.append([1.0, None])  # too short: left out
    own = [detect(s).noise.own for s in series[:5]]
    prior = pooled_noise(series)
    assert prior is not None and prior.n_series == 5
    assert prior.sigma == pytest.approx(float(np.median(own)), rel=1e-12)
    # The broken cell does not set the pool's noise.
    assert prior.sigma < 0.02


# --- the noise estimate and the simulated null ------------------------------------------------


@pytest.mark.parametrize("n_diffs", [2, 5, 7, 12, 29])
def test_consistency_makes_unit_noise_estimate_one(n_diffs):
    # Fresh draws (another seed than the calibration's): the mean square of the
    # corrected estimate of unit-noise runs is 1 within the simulation's error.
    z = np.random.default_rng(777 + n_diffs).standard_normal((40_000, n_diffs + 1))
    est = cp._trimmed_rms(np.diff(z, axis=1)) * cp._consistency(n_diffs)
    assert np.mean(est**2) == pytest.approx(1.0, abs=0.02)


def test_own_estimate_recovers_the_noise():
    est = np.array([detect(list(noisy(15, 700 + i, 0.02))).noise.own for i in range(1000)])
    assert math.sqrt(np.mean(est**2)) == pytest.approx(0.02, rel=0.03)


def test_own_estimate_ignores_a_step_and_an_outlier():
    clean = noisy(N, 71)
    dirty = clean.copy()
    dirty[12:] *= 1.5  # one large difference
    dirty[5] *= 2.0  # two large differences
    a = detect([float(x) for x in clean]).noise.own
    b = detect([float(x) for x in dirty]).noise.own
    assert a is not None and b is not None
    # The three large differences are left out; what remains is the clean noise, only
    # no longer trimmed of its own largest differences.
    assert a < b < 2 * a
    # Left in, the step alone would dominate: its difference is 40 sigma.
    assert np.sqrt(np.mean(np.diff(np.log(dirty)) ** 2)) > 5 * b


@pytest.mark.parametrize(
    ("n", "m", "head_end", "prior", "recent"),
    [(12, 12, True, False, 0), (12, 12, True, True, cp.RECENT), (20, 9, False, False, 0)],
)
def test_p_value_is_monotone_in_the_statistic(n, m, head_end, prior, recent):
    stats = np.linspace(0.0, 12.0, 121)
    p = [cp._p_value(float(s), n, m, head_end, prior, 0.0, recent) for s in stats]
    assert all(0.0 < x <= 1.0 for x in p)
    assert all(a >= b for a, b in zip(p, p[1:], strict=False))
    assert p[0] == 1.0  # every unchanged series reaches a statistic of 0
    # Beyond every simulated draw the p-value is 1 / (draws + 1), never 0.
    assert cp._p_value(1e6, n, m, head_end, prior, 0.0, recent) == pytest.approx(
        1.0 / (cp._NULL_DRAWS + 1)
    )
    assert p[0] > p[len(p) // 3] > p[-1]


# --- input validation -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"values": "1.0,2.0,3.0"}, TypeError, "values must be a sequence"),
        ({"values": b"\x01\x02\x03"}, TypeError, "values must be a sequence"),
        ({"values": 3.0}, TypeError, "values must be a sequence"),
        ({"values": [1.0, True, 2.0]}, TypeError, r"values\[1\]"),
        ({"values": [1.0, "2", 2.0]}, TypeError, r"values\[1\]"),
        ({"values": [1.0, 2.0, 3.0], "samples": [(1.0,)] * 2}, ValueError, "samples"),
        ({"values": [1.0, 2.0, 3.0], "alpha": 0.0}, ValueError, "alpha"),
        ({"values": [1.0, 2.0, 3.0], "alpha": 1.0}, ValueError, "alpha"),
        ({"values": [1.0, 2.0, 3.0], "alpha": 1.5}, ValueError, "alpha"),
        ({"values": [1.0, 2.0, 3.0], "alpha": -0.01}, ValueError, "alpha"),
        ({"values": [1.0, 2.0, 3.0], "alpha": "0.01"}, ValueError, "alpha"),
        ({"values": [1.0, 2.0, 3.0], "min_effect": -0.01}, ValueError, "min_effect"),
        ({"values": [1.0, 2.0, 3.0], "min_effect": True}, ValueError, "min_effect"),
        ({"values": [1.0, 2.0, 3.0], "min_effect": "3%"}, ValueError, "min_effect"),
    ],
)
def test_invalid_input_names_the_argument(kwargs, exc, match):
    values = kwargs.pop("values")
    with pytest.raises(exc, match=match):
        detect(values, **kwargs)


def test_valid_edge_inputs_are_accepted():
    # Integers, None, a tuple and min_effect 0 are all valid.
    res = detect((1, 1, None, 1, 2, 2), min_effect=0)
    assert res.noise.runs == 5


# --- short histories ----------------------------------------------------------------------------


def test_pooled_spread_recovers_the_cells_noise_spread():
    rng = np.random.default_rng(40)
    got = {}
    for spread in (0.0, 0.5, 1.0):
        sigmas = SIGMA * np.exp(spread * rng.standard_normal(300))
        pool = [list(noisy(6, 4000 + i, sigma=s)) for i, s in enumerate(sigmas)]
        got[spread] = pooled_noise(pool).spread
    # Estimating each cell's noise from 6 runs spreads the estimates by ~0.3 by itself; net of
    # that, a pool of one noise is near 0 (a square root of a small noisy difference).
    assert got[0.0] < 0.25
    assert got[0.5] == pytest.approx(0.5, abs=0.15)
    assert got[1.0] == pytest.approx(1.0, abs=0.15)


def test_short_window_places_a_step_after_its_first_run():
    prior = NoisePrior(SIGMA, 30)
    found = 0
    for seed in range(40):
        v = stepped(6, 1, 1.10, 5000 + seed)
        res = detect(v, prior=prior)
        hits = [st for st in res.steps + ((res.suspect,) if res.suspect else ()) if st.index == 1]
        found += bool(hits)
    assert found >= 36
    # With seven runs the first run alone is no old level: the step is not placed there.
    assert all(
        st.index != 1
        for seed in range(20)
        for st in detect(stepped(7, 1, 1.10, 6000 + seed), prior=prior).changes
    )


def test_short_history_flags_strong_steps_and_suspects_weak_ones():
    prior = NoisePrior(SIGMA, 30)
    flagged = suspected = 0
    for seed in range(60):
        strong = detect(stepped(6, 5, 1.10, 7000 + seed), prior=prior)
        flagged += [st.index for st in strong.steps] == [5]
        weak = detect(stepped(6, 5, 1.03, 7000 + seed), prior=prior, min_effect=0.02)
        suspected += weak.suspect is not None and weak.suspect.index == 5 and not weak.steps
    assert flagged >= 57  # ten sigma
    assert suspected >= 20  # three sigma: seen, not flagged
    # Unchanged short series: rarely flagged, and suspected at most a few times as often.
    unchanged = [detect(list(noisy(6, 8000 + i)), prior=prior) for i in range(400)]
    assert sum(bool(r.steps) for r in unchanged) <= 4
    assert sum(r.suspect is not None for r in unchanged) <= 40
