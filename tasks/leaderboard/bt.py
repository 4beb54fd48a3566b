"""Bradley-Terry by maximum likelihood, and its bootstrap over questions, vectorised.

The data are weighted games between two systems: a row `m` of a design matrix `X` (one
column per free parameter) gives the log-odds that its first system beats its second,
`X[m] @ theta`; `wins[m]` and `losses[m]` are the (weighted) games the first system won and
lost, a tie counting half to each. The baseline's strength is fixed at 0, so `theta` holds
the other systems' log-odds against it (and, under style control, the covariates'
coefficients). The log-likelihood is concave; Newton's method with a capped step finds its
maximum. A bootstrap replicate reweights the rows (questions drawn with replacement), so
every replicate is one more Newton solve, started from the full-data estimate: the rows'
weights of all replicates form one matrix and each iteration solves all replicates at once.

When every game involves the baseline and there are no covariates (a leaderboard against
one baseline), the maximum has a closed form: each system's log-odds is the log of its
weighted wins over its weighted losses against the baseline.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

__all__ = ["BOUND", "Fit", "closed_form", "fit", "fit_replicates", "star_columns"]

Floats = NDArray[np.float64]

BOUND = 20.0
"""Largest |log-odds| reported: a system that won (or lost) every game has no finite
estimate; it is shown at this bound (about 3,474 Elo points from the baseline)."""
_MAX_STEP = 4.0
_TOLERANCE = 1e-10
_MAX_ITERATIONS = 200
_CHUNK_CELLS = 20_000_000
"""Replicates per batch: at most this many floats in the (replicates x params x rows) array."""


@dataclass(frozen=True)
class Fit:
    """A fitted model: `theta` per free parameter and the iterations Newton took."""

    theta: Floats
    iterations: int


def star_columns(x: Floats) -> NDArray[np.int64] | None:
    """For a design where each row has one non-zero entry, +1 or -1 (every game against
    the baseline, no covariates): the column of each row; else None."""
    nonzero = x != 0
    if x.size == 0 or not np.all(nonzero.sum(axis=1) == 1) or not np.all(np.abs(x[nonzero]) == 1):
        return None
    return np.argmax(nonzero, axis=1)


def closed_form(x: Floats, wins: Floats, losses: Floats) -> Floats:
    """The maximum-likelihood log-odds of a star design (`star_columns`), per column, for a
    batch of weights (`wins`, `losses`: replicates x rows): log(won / lost), bounded."""
    columns = star_columns(x)
    assert columns is not None
    sign = x[np.arange(len(columns)), columns]
    params = x.shape[1]
    won = np.zeros((wins.shape[0], params))
    lost = np.zeros((wins.shape[0], params))
    for column in range(params):
        ahead, behind = (columns == column) & (sign > 0), (columns == column) & (sign < 0)
        won[:, column] = wins[:, ahead].sum(axis=1) + losses[:, behind].sum(axis=1)
        lost[:, column] = losses[:, ahead].sum(axis=1) + wins[:, behind].sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        theta = np.log(won) - np.log(lost)
    theta = np.where(np.isnan(theta), 0.0, theta)  # no game at all: nothing moves it
    return np.clip(theta, -BOUND, BOUND)


def _newton(x: Floats, wins: Floats, losses: Floats, start: Floats) -> tuple[Floats, int]:
    """Newton's method for a batch: `wins`, `losses` (batch x rows), `start` (batch x
    params). Returns the maximisers and the iterations the slowest replicate took."""
    theta = start.copy()
    games = wins + losses
    ridge = 1e-10 * np.eye(x.shape[1])
    for iteration in range(1, _MAX_ITERATIONS + 1):
        logits = theta @ x.T
        p = 1.0 / (1.0 + np.exp(-logits))
        gradient = (wins - games * p) @ x
        curvature = games * p * (1.0 - p)
        hessian = np.matmul(x.T[None, :, :] * curvature[:, None, :], x) + ridge
        step = np.linalg.solve(hessian, gradient[:, :, None])[:, :, 0]
        largest = np.abs(step).max(axis=1, keepdims=True)
        step = step * np.minimum(1.0, _MAX_STEP / np.maximum(largest, 1e-300))
        moved = np.clip(theta + step, -BOUND, BOUND)
        change = float(np.abs(moved - theta).max())
        theta = moved
        if change < _TOLERANCE:
            return theta, iteration
    return theta, _MAX_ITERATIONS


def fit(x: Floats, wins: Floats, losses: Floats) -> Fit:
    """The maximum-likelihood `theta` of one data set (`wins`, `losses`: one per row)."""
    x = np.asarray(x, dtype=float)
    batch_w, batch_l = np.asarray(wins, float)[None, :], np.asarray(losses, float)[None, :]
    if star_columns(x) is not None:
        return Fit(closed_form(x, batch_w, batch_l)[0], 0)
    theta, iterations = _newton(x, batch_w, batch_l, np.zeros((1, x.shape[1])))
    return Fit(theta[0], iterations)


def fit_replicates(x: Floats, wins: Floats, losses: Floats, start: Floats) -> Floats:
    """The maximum-likelihood `theta` of each replicate (`wins`, `losses`: replicates x
    rows), each Newton solve started from `start` (the full-data estimate)."""
    x = np.asarray(x, dtype=float)
    if star_columns(x) is not None:
        return closed_form(x, wins, losses)
    replicates = wins.shape[0]
    chunk = max(1, _CHUNK_CELLS // max(1, x.shape[0] * x.shape[1]))
    out = np.empty((replicates, x.shape[1]))
    for first in range(0, replicates, chunk):
        last = min(replicates, first + chunk)
        begin = np.broadcast_to(start, (last - first, x.shape[1]))
        out[first:last], _ = _newton(x, wins[first:last], losses[first:last], begin)
    return out
