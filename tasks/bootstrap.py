"""Percentile bootstrap intervals of a mean, resampling pairs, reproducible from a seed."""

from __future__ import annotations

from typing import Any

import numpy as np

from tasks.hashing import digest, sha256_bytes

__all__ = ["BOOTSTRAP_RESAMPLES", "BOOTSTRAP_SEED", "bootstrap_interval", "percentile_interval"]

BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 20240917
"""Fixed so a report shows the same interval every time it is rebuilt."""


def percentile_interval(
    values: np.ndarray, rng: np.random.Generator, resamples: int = BOOTSTRAP_RESAMPLES
) -> tuple[float, float]:
    """95% percentile bootstrap interval of the mean of `values` (non-empty), drawing the
    resamples from `rng`."""
    n = len(values)
    means = np.empty(resamples)
    # Bound the index matrix to a few million cells however many pairs there are.
    chunk = max(1, min(resamples, 4_000_000 // n))
    for start in range(0, resamples, chunk):
        stop = min(resamples, start + chunk)
        means[start:stop] = values[rng.integers(0, n, size=(stop - start, n))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(low), float(high)


def bootstrap_interval(
    values: np.ndarray, *, seed_parts: tuple[Any, ...], resamples: int = BOOTSTRAP_RESAMPLES
) -> tuple[float, float]:
    """95% percentile bootstrap interval of the mean of `values`, resampling pairs.

    The generator is seeded from BOOTSTRAP_SEED, `seed_parts` (the group's key) and the
    bytes of `values`: each group's interval depends on its data only, so it is reproducible,
    independent of which other groups exist, and the same for the same outcomes under
    another run id.
    """
    if len(values) == 0:
        return (float("nan"), float("nan"))
    data = sha256_bytes(np.ascontiguousarray(values, dtype="<f8").tobytes())
    seed = int(digest(BOOTSTRAP_SEED, *seed_parts, data)[:16], 16)
    return percentile_interval(values, np.random.default_rng(seed), resamples)
