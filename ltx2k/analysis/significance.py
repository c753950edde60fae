"""Two-sample tests on asv's stored samples, shared by regress and interference."""

from __future__ import annotations

import math

from ltx2k.history.records import Record
from ltx2k.runner import asv_compat


def samples(rec: Record | None) -> list[float]:
    """A record's finite samples ([] when it has none)."""
    if rec is None or not rec.samples:
        return []
    return [x for x in rec.samples if x is not None and not math.isnan(x)]


def rank_test_can_reach(m: int, n: int, alpha: float) -> bool:
    """Whether an exact two-sided rank test on m and n points can give p < alpha at all."""
    return m > 0 and n > 0 and 2.0 / math.comb(m + n, min(m, n)) < alpha


def signed_rank_can_reach(n: int, alpha: float) -> bool:
    """Whether an exact two-sided signed-rank test on n pairs can give p < alpha at all."""
    return n > 0 and 2.0 / 2.0**n < alpha


def commit_vs_commit(head: Record, base: Record, alpha: float) -> tuple[bool, float | None, str]:
    """asv compare's rule (asv.commands.compare._is_result_better), p-value added.

    Returns (significant, p, test name).
    """
    hs, bs = head.stats, base.stats
    if not (hs and bs and hs.get("repeat", 0) != 1 and bs.get("repeat", 0) != 1):
        # No statistics (track_* benchmarks, single samples): asv compares by factor only.
        return True, None, "ratio-only"
    a, b = samples(head) or None, samples(base) or None
    if a and b and rank_test_can_reach(len(a), len(b), alpha):
        # is_different's own rule for this case (p < threshold), without computing
        # the exact U distribution a second time: it dominates the cost of a report.
        p = float(asv_compat.mann_whitney_u(a, b)[1])
        return p < alpha, p, "mann-whitney"
    significant = asv_compat.is_different(a, b, hs, bs, p_threshold=alpha)
    return significant, None, "ci-overlap"
