"""Bradley-Terry by maximum likelihood, and its bootstrap over questions, vectorised.

The data are weighted games between two systems: a row `m` of a design matrix `X` (one
column per free parameter) gives the log-odds that its first system beats its second,
`X[m] @ theta`; `wins[m]` and `losses[m]` are the (weighted) games the first system won and
lost, a tie counting half to each. The baseline's strength is fixed at 0, so `theta` holds
the other systems' log-odds against it (and, under style control, the covariates'
coefficients). The log-likelihood is concave; Newton's method with a capped step finds its
maximum. A bootstrap replicate reweights the rows (questions drawn with replacement), so
every replicate is one more Newton solve, started from the full-data estimate: the rows'
weights of all replicates form one matrix and each iteration solves all replicates at once
(the design is sparse, so a batch's gradients and Hessians are sparse products).

When every game involves the baseline and there are no covariates (a leaderboard against
one baseline), the maximum has a closed form: each system's log-odds is the log of its
weighted wins over its weighted losses against the baseline.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["BOUND", "Fit", "closed_form", "fit", "fit_replicates", "star_columns"]

Floats = NDArray[np.float64]

BOUND = 20.0
"""Largest |log-odds| reported: a system that won (or lost) every game has no finite
estimate; it is shown at this bound (about 3,474 Elo points from the baseline)."""
_MAX_STEP = 4.0
_TOLERANCE = 1e-10
_REPLICATE_TOLERANCE = 1e-7
"""A replicate only places an interval's end: 1e-7 in log-odds is 2e-5 Elo points."""
_MAX_ITERATIONS = 200
_CHUNK_CELLS = 20_000_000
"""Replicates per batch: at most this many floats in a (replicates x rows) or (replicates x
params x params) array."""


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


def _outer_rows(x: Any) -> Any:
    """Row m of the result is the flattened outer product x[m] x[m]^T (rows x params^2):
    a batch's Hessians are then one sparse product with the rows' curvatures."""
    from scipy import sparse

    counts = np.diff(x.indptr)
    row_of = np.repeat(np.arange(x.shape[0]), counts)
    reps = counts[row_of]
    first = np.repeat(np.arange(x.nnz), reps)
    within = np.arange(len(first)) - np.repeat(np.cumsum(reps) - reps, reps)
    second = x.indptr[row_of[first]] + within
    params = x.shape[1]
    return sparse.csr_matrix(
        (x.data[first] * x.data[second],
         (row_of[first], x.indices[first] * params + x.indices[second])),
        shape=(x.shape[0], params * params),
    )  # fmt: skip


def _newton(
    x: Floats, wins: Floats, losses: Floats, start: Floats, tolerance: float = _TOLERANCE
) -> tuple[Floats, int]:
    """Newton's method for a batch: `wins`, `losses` (batch x rows), `start` (batch x
    params). Returns the maximisers and the iterations the slowest replicate took. The
    design is sparse (two systems per row, plus any covariates): logits, gradients and
    Hessians are sparse products."""
    from scipy import sparse  # imported where used: a report without systems never pays

    design = sparse.csr_matrix(x)
    outer = _outer_rows(design).T.tocsr()
    design_t = design.T.tocsr()
    params = x.shape[1]
    theta = start.copy()
    games = wins + losses
    ridge = 1e-10 * np.eye(params)
    for iteration in range(1, _MAX_ITERATIONS + 1):
        logits = (design @ theta.T).T
        p = 1.0 / (1.0 + np.exp(-logits))
        gradient = (design_t @ (wins - games * p).T).T
        curvature = games * p * (1.0 - p)
        hessian = (outer @ curvature.T).T.reshape(-1, params, params) + ridge
        step = np.linalg.solve(hessian, gradient[:, :, None])[:, :, 0]
        largest = np.abs(step).max(axis=1, keepdims=True)
        step = step * np.minimum(1.0, _MAX_STEP / np.maximum(largest, 1e-300))
        moved = np.clip(theta + step, -BOUND, BOUND)
        change = float(np.abs(moved - theta).max())
        theta = moved
        if change < tolerance:
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
    chunk = max(1, _CHUNK_CELLS // max(1, x.shape[0], x.shape[1] ** 2))
    out = np.empty((replicates, x.shape[1]))
    for first in range(0, replicates, chunk):
        last = min(replicates, first + chunk)
        begin = np.broadcast_to(start, (last - first, x.shape[1]))
        out[first:last], _ = _newton(
            x, wins[first:last], losses[first:last], begin, _REPLICATE_TOLERANCE
        )
    return out
