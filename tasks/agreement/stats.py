"""Reliability statistics from per-pair counts, with bootstrap intervals over pairs
(docs/design.md#agreement).

Every statistic here is a fixed function of sums over pairs of per-pair features, so a
bootstrap resample is one weighted sum: the pairs' multinomial resampling counts times the
feature matrix, for every resample at once.

- Krippendorff's alpha (nominal): with the coincidences of the values in a unit (each ordered
  pair of values of different calls weighted 1 / (m - 1), m the unit's values), alpha = 1 -
  (N - 1) * sum of disagreeing coincidences / (N^2 - sum_c N_c^2), N_c the pairable values of
  category c and N their total (Krippendorff 2011, "Computing Krippendorff's alpha-reliability").
- Fleiss' kappa: (P_bar - P_e) / (1 - P_e), P_bar the mean over units of the share of agreeing
  ordered pairs of values, P_e = sum_c p_c^2 with p_c the share of values in category c
  (Fleiss 1971); units with fewer than two values are left out, as for alpha.
- Cohen's kappa of two raters: (p_o - p_e) / (1 - p_e), p_e = sum_c p1_c p2_c.

A statistic whose chance agreement is total (one category only) is undefined: NaN.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any, TypeVar

import numpy as np

from tasks.bootstrap import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED
from tasks.hashing import digest, sha256_bytes

__all__ = [
    "Estimate",
    "across_features",
    "alpha_from_sums",
    "cohen_features",
    "cohen_from_sums",
    "estimate",
    "estimates",
    "fleiss_from_sums",
    "rater_agreement",
    "raw_from_sums",
    "unit_features",
    "wilson",
]


def unit_features(counts: np.ndarray) -> np.ndarray:
    """Per unit, from `counts` (units x categories: values of each category in the unit;
    missing values not counted): [alpha's disagreeing coincidences, Fleiss' agreeing share,
    1 (a unit with two values or more), pairable values per category...]. A unit with fewer
    than two values has all zeros (it is not pairable)."""
    counts = np.asarray(counts, dtype=float)
    m = counts.sum(axis=1)
    squares = (counts * counts).sum(axis=1)
    pairable = m >= 2
    safe = np.where(pairable, m, 2.0)
    disagree = np.where(pairable, (m * m - squares) / (safe - 1.0), 0.0)
    agree = np.where(pairable, (squares - m) / (safe * (safe - 1.0)), 0.0)
    return np.column_stack([disagree, agree, pairable, counts * pairable[:, None]])


def across_features(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Per unit, the same features as `unit_features` counting only the couples of one value
    from `first` (units x categories) and one from `second`: each value's coincidences are
    spread over the values of the other side (weight (m1 + m2) / (2 m1 m2) per couple, so a
    unit of one value per side is weighed as a unit of two coders and each side carries half
    the unit's values in the margins). A unit missing either side is not pairable."""
    first, second = np.asarray(first, dtype=float), np.asarray(second, dtype=float)
    m1, m2 = first.sum(axis=1), second.sum(axis=1)
    pairable = (m1 >= 1) & (m2 >= 1)
    couples = np.where(pairable, m1 * m2, 1.0)
    same = (first * second).sum(axis=1)
    disagree = np.where(pairable, (m1 + m2) * (couples - same) / couples, 0.0)
    agree = np.where(pairable, same / couples, 0.0)
    # the coincidence matrix's margins: each side carries half the unit's m1 + m2 values
    share1 = np.where(pairable, (m1 + m2) / (2.0 * np.where(pairable, m1, 1.0)), 0.0)
    share2 = np.where(pairable, (m1 + m2) / (2.0 * np.where(pairable, m2, 1.0)), 0.0)
    both = first * share1[:, None] + second * share2[:, None]
    return np.column_stack([disagree, agree, pairable, both])


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


def alpha_from_sums(sums: np.ndarray) -> np.ndarray:
    """Krippendorff's nominal alpha from summed `unit_features` (..., features)."""
    n_c = sums[..., 3:]
    n = n_c.sum(axis=-1)
    expected = n * n - (n_c * n_c).sum(axis=-1)
    return 1.0 - _ratio((n - 1.0) * sums[..., 0], expected)


def fleiss_from_sums(sums: np.ndarray) -> np.ndarray:
    """Fleiss' kappa from summed `unit_features` (..., features)."""
    n_c = sums[..., 3:]
    n = n_c.sum(axis=-1)
    p = n_c / np.where(n > 0, n, 1.0)[..., None]
    chance = (p * p).sum(axis=-1)
    observed = _ratio(sums[..., 1], sums[..., 2])
    return _ratio(observed - chance, np.where(n > 0, 1.0 - chance, 0.0))


def cohen_features(first: np.ndarray, second: np.ndarray, categories: int) -> np.ndarray:
    """Per unit rated by both raters (codes 0..categories-1): [agree, one-hot of the first
    rater's code..., one-hot of the second's...]."""
    eye = np.eye(categories)
    return np.column_stack([first == second, eye[first], eye[second]]).astype(float)


def cohen_from_sums(sums: np.ndarray) -> np.ndarray:
    """Cohen's kappa from summed `cohen_features` (..., 1 + 2 * categories)."""
    c = (sums.shape[-1] - 1) // 2
    n = sums[..., 1 : 1 + c].sum(axis=-1)
    safe = np.where(n > 0, n, 1.0)
    p1 = sums[..., 1 : 1 + c] / safe[..., None]
    p2 = sums[..., 1 + c :] / safe[..., None]
    chance = (p1 * p2).sum(axis=-1)
    observed = sums[..., 0] / safe
    return _ratio(observed - chance, np.where(n > 0, 1.0 - chance, 0.0))


def raw_from_sums(sums: np.ndarray) -> np.ndarray:
    """Raw agreement (share of units rated alike) from summed `cohen_features`."""
    c = (sums.shape[-1] - 1) // 2
    return _ratio(sums[..., 0], sums[..., 1 : 1 + c].sum(axis=-1))


@dataclass(frozen=True)
class Estimate:
    """A statistic on the pairs and its 95% percentile bootstrap interval over pairs."""

    value: float
    low: float
    high: float


K = TypeVar("K")
_CELLS = 4_000_000
"""Resampling counts drawn at once (resamples x pairs)."""


def resample_sums(
    features: np.ndarray, rng: np.random.Generator, resamples: int = BOOTSTRAP_RESAMPLES
) -> np.ndarray:
    """The summed features of `resamples` bootstrap resamples of the units (resamples x
    features): each row is a resample's counts of every unit times the feature matrix."""
    n = features.shape[0]
    out = np.empty((resamples, features.shape[1]))
    chunk = max(1, min(resamples, _CELLS // max(n, 1)))
    for start in range(0, resamples, chunk):
        rows = min(resamples, start + chunk) - start
        drawn = rng.integers(0, n, size=(rows, n)) + (np.arange(rows) * n)[:, None]
        weights = np.bincount(drawn.ravel(), minlength=rows * n).reshape(rows, n)
        out[start : start + rows] = weights.astype(float) @ features
    return out


def estimate(
    features: np.ndarray,
    statistic: Any,
    *,
    seed_parts: tuple[Any, ...],
    resamples: int = BOOTSTRAP_RESAMPLES,
) -> Estimate:
    """`statistic` (a function of summed features) on `features` (units x features), with
    its 95% BCa bootstrap interval over units (`estimates`)."""
    return estimates(features, {"": statistic}, seed_parts=seed_parts, resamples=resamples)[""]


def estimates(
    features: np.ndarray,
    statistics: dict[K, Any],
    *,
    seed_parts: tuple[Any, ...],
    resamples: int = BOOTSTRAP_RESAMPLES,
) -> dict[K, Estimate]:
    """Each of `statistics` (functions of summed features) on `features` (units x features),
    with its 95% BCa bootstrap interval over units (bias-corrected and accelerated, Efron
    1987: the percentiles are moved by the bootstrap's median bias and the jackknife's
    skewness, which these ratios have in small runs), all from the same resamples. The
    generator is seeded from the group's key and the features' bytes, so an interval is the
    same every time it is computed. Resamples where a statistic is undefined are left out;
    NaN throughout when it is undefined on the data."""
    features = np.asarray(features, dtype=float)
    total = features.sum(axis=0)
    nan = Estimate(float("nan"), float("nan"), float("nan"))
    values = {k: float(f(total)) if len(features) else float("nan") for k, f in statistics.items()}
    out = {k: nan for k, v in values.items() if not np.isfinite(v)}
    if len(out) == len(values):
        return out
    data = sha256_bytes(np.ascontiguousarray(features, dtype="<f8").tobytes())
    rng = np.random.default_rng(int(digest(BOOTSTRAP_SEED, *seed_parts, data)[:16], 16))
    sums = resample_sums(features, rng, resamples)
    left_out = total[None, :] - features
    for name, statistic in statistics.items():
        if name in out:
            continue
        draws = statistic(sums)
        draws = draws[np.isfinite(draws)]
        if draws.size == 0:
            out[name] = Estimate(values[name], float("nan"), float("nan"))
            continue
        low, high = _bca(values[name], draws, statistic(left_out))
        out[name] = Estimate(values[name], low, high)
    return out


_NORMAL = NormalDist()


def _bca(value: float, draws: np.ndarray, jackknife: np.ndarray) -> tuple[float, float]:
    """The 95% BCa interval from the bootstrap draws and the leave-one-out values."""
    below = (np.mean(draws < value) + 0.5 * np.mean(draws == value)).clip(1e-6, 1 - 1e-6)
    bias = _NORMAL.inv_cdf(float(below))
    jackknife = jackknife[np.isfinite(jackknife)]
    spread = jackknife.mean() - jackknife if jackknife.size else np.zeros(1)
    scale = float((spread**2).sum()) ** 1.5
    accel = float((spread**3).sum()) / (6.0 * scale) if scale > 0 else 0.0
    shares = []
    for z in (_NORMAL.inv_cdf(0.025), _NORMAL.inv_cdf(0.975)):
        moved = bias + (bias + z) / (1.0 - accel * (bias + z))
        shares.append(100.0 * _NORMAL.cdf(moved))
    low, high = np.percentile(draws, shares)
    return float(low), float(high)


def wilson(hits: float, n: int) -> tuple[float, float]:
    """The 95% Wilson score interval of a proportion of `hits` among `n` independent units."""
    if n == 0:
        return (float("nan"), float("nan"))
    z = _NORMAL.inv_cdf(0.975)
    share = hits / n
    centre = (share + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(share * (1 - share) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def rater_agreement(
    first: np.ndarray, second: np.ndarray, categories: int, *, seed_parts: tuple[Any, ...]
) -> tuple[Estimate, Estimate]:
    """Cohen's kappa (BCa bootstrap interval) and raw agreement (Wilson interval) of two
    raters' codes on the same units. A run where they agree on every unit has no disagreeing
    resample, so the bootstrap interval would be the point 1: kappa's low end is then the one
    the Wilson low end of the raw agreement gives at the run's chance agreement. With a
    rater using one category only, kappa is 0 on every resample and has no interval."""
    features = cohen_features(first, second, categories)
    n = len(features)
    hits = float(features[:, 0].sum()) if n else 0.0
    raw_low, raw_high = wilson(hits, n)
    raw = Estimate(hits / n if n else float("nan"), raw_low, raw_high)
    kappa = estimate(features, cohen_from_sums, seed_parts=seed_parts)
    if n == 0 or not np.isfinite(kappa.value):
        return kappa, raw
    total = features.sum(axis=0)
    if min((total[1 : 1 + categories] > 0).sum(), (total[1 + categories :] > 0).sum()) < 2:
        return Estimate(kappa.value, float("nan"), float("nan")), raw
    if hits == n:
        chance = float((total[1 : 1 + categories] * total[1 + categories :]).sum()) / (n * n)
        low = 1.0 - (1.0 - raw_low) / (1.0 - chance)
        kappa = Estimate(kappa.value, max(-1.0, low), 1.0)
    return kappa, raw


def decision_agreement(
    first: np.ndarray, second: np.ndarray, *, seed_parts: tuple[Any, ...]
) -> tuple[int, Estimate, Estimate]:
    """Two judge configs' `rater_agreement` on the pairs both judged, and how many those are:
    `first` and `second` hold a decision code per pair (A, B, N as 0-2; -1 where that config
    did not judge the pair), the pairs in the same order in both."""
    both = (first >= 0) & (second >= 0)
    kappa, raw = rater_agreement(first[both], second[both], 3, seed_parts=seed_parts)
    return int(both.sum()), kappa, raw
