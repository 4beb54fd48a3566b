"""Leaderboard intervals from a bootstrap over questions, with a small-sample correction,
and the one-sided bound of a system that won (or lost) every game.

An interval is symmetric on the log-odds scale: the estimate plus or minus
t(Q - 1) x sqrt(Q / (Q - 1)) x s, where s is the bootstrap's scale, the interquartile range
of the replicates over 1.349 (a normal's), Q the questions resampled and t(Q - 1) Student's
quantile at (1 + confidence) / 2. The bootstrap gives the scale (whole questions drawn with
replacement); the t quantile and sqrt(Q / (Q - 1)) correct its two small-sample faults (the
resample's variance is (Q - 1) / Q of the sample's, and the scale is itself estimated).
The interquartile range keeps a few replicates without a finite estimate (a system whose
wins all fell out of the draw) from widening the whole interval; when a quartile itself is
infinite, that side is unbounded and the other is twice its half-range
(docs/design.md#leaderboards).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
from numpy.typing import NDArray

__all__ = ["BOUNDED", "interval", "no_win_bound", "t_width"]

Floats = NDArray[np.float64]
_NORMAL_IQR = 1.3489795003921634
"""The interquartile range of a standard normal."""
_HUGE = 1e300
BOUNDED = ("upper", "lower")
"""A bound's side: `upper` for a system that won no game (its score is at most the bound),
`lower` for one that lost none."""


def t_width(confidence: float, questions: int) -> float:
    """t(Q - 1) at (1 + confidence) / 2 times sqrt(Q / (Q - 1)); the normal's for Q < 2."""
    from scipy.stats import norm, t

    tail = (1.0 + confidence) / 2.0
    if questions < 2:
        return float(norm.ppf(tail))
    return float(t.ppf(tail, questions - 1) * math.sqrt(questions / (questions - 1)))


def interval(
    estimate: Floats, replicates: Floats, confidence: float, questions: int
) -> tuple[Floats, Floats]:
    """The interval of each column of `replicates` (replicates x quantities, on a scale where
    the statistic is near normal: log-odds, a coefficient) around `estimate`. NaN replicates
    (a quantity a replicate cannot define) are left out; a column without any is NaN."""
    if values_empty(replicates):
        nothing = np.full(np.shape(estimate), np.nan)
        return nothing, nothing.copy()
    # Infinite replicates as huge finite ones: a quantile between -inf and a number is NaN.
    values = np.clip(np.asarray(replicates, dtype=float), -_HUGE, _HUGE)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns; inf - inf
        quartiles = np.nanquantile(values, [0.25, 0.5, 0.75], axis=0)
        quartiles[np.abs(quartiles) > _HUGE * 1e-100] *= np.inf
        q1, mid, q3 = quartiles
        below, above = mid - q1, q3 - mid
        finite_below, finite_above = np.isfinite(below), np.isfinite(above)
        both = finite_below & finite_above
        low_half = np.where(both, below + above, np.where(finite_below, 2 * below, np.inf))
        high_half = np.where(both, below + above, np.where(finite_above, 2 * above, np.inf))
        width = t_width(confidence, questions) / _NORMAL_IQR
        lower = np.asarray(estimate, dtype=float) - width * low_half
        upper = np.asarray(estimate, dtype=float) + width * high_half
    return lower, upper


def values_empty(replicates: Floats) -> bool:
    """No replicate at all (intervals not asked for)."""
    return int(np.shape(replicates)[0]) == 0


def no_win_bound(questions: NDArray[np.int64], confidence: float) -> Floats:
    """For a system that won no game against the baseline on any of `questions` questions:
    the exact one-sided bound, at (1 + confidence) / 2, on its chance of winning a game,
    counting each question once (1 - ((1 - confidence) / 2) ^ (1 / Q)). It holds however
    the games of a question depend on each other: a question without a win is at least as
    likely as its first game's loss. The bound of a system that lost none is 1 minus it."""
    q = np.maximum(np.asarray(questions, dtype=float), 1.0)
    return 1.0 - ((1.0 - confidence) / 2.0) ** (1.0 / q)
