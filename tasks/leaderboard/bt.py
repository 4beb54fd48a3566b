"""Bradley-Terry by maximum likelihood, and its bootstrap over questions, vectorised.

The data are weighted games between two systems: a row `m` gives the log-odds that its first
system beats its second, `x[m] @ theta + covariates[m] @ beta + delta[question[m]]`;
`wins[m]` and `losses[m]` are the (weighted) games the first system won and lost, a tie
counting half to each. `x` has +1 at the first system's parameter and -1 at the second's
(the baseline has none: its strength is 0); `beta` are the coefficients of optional
covariates (style, length) and `delta` an optional per-question term.

The systems' strengths are maximum likelihood, unpenalised (as Arena-Hard-Auto's plain fit);
`beta` and `delta` carry a ridge (COVARIATE_RIDGE, QUESTION_RIDGE), so the fit is well posed
whatever the covariates do. A system's strength is finite exactly when it lies in the
baseline's strongly connected component of the win graph (an edge from i to j when i won
some game against j, a tie counting both ways): a system that never beat (or never lost
to) that component has strength -inf (+inf), and one not connected to it at all none
(NaN). Those are found first, their games set aside, and the rest fitted by Newton's method
(capped steps); bootstrap replicates (rows reweighted by questions drawn with replacement)
are Newton solves from the full-data estimate, a batch at once (docs/design.md#leaderboards).
Against one baseline without covariates the maximum has a closed form: each system's
log-odds is the log of its weighted wins over its weighted losses against the baseline.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "COVARIATE_RIDGE", "QUESTION_RIDGE", "Fit", "Model", "closed_form", "fit", "fit_replicates",
    "star_columns", "strength_signs",
]  # fmt: skip

Floats = NDArray[np.float64]

COVARIATE_RIDGE = 0.5
"""Penalty 0.25 beta^2 per covariate (standardised): scikit-learn's default L2 (C = 1) on
Arena-Hard-Auto's duplicated battles, per game."""
QUESTION_RIDGE = 1.0
"""Penalty delta^2 / 2 per question term: a normal prior of standard deviation 1 in
log-odds, so a question few systems answered is shrunk towards the others."""
MAX_STEP = 4.0
_TOLERANCE = 1e-10
_REPLICATE_TOLERANCE = 1e-7
"""A replicate only places an interval's end: 1e-7 in log-odds is 2e-5 Elo points."""
_MAX_ITERATIONS = 200
_CHUNK_CELLS = 4_000_000
"""Replicates per batch: at most about this many floats in a (replicates x rows) array."""


@dataclass(frozen=True)
class Fit:
    """A fitted model: `theta` per free parameter (systems, covariates, questions) and the
    iterations Newton took."""

    theta: Floats
    iterations: int


@dataclass(frozen=True)
class Model:
    """A design: `x` (rows x systems, +-1, at most two per row), optional `covariates`
    (rows x k) and per-row `question` (the per-question term's index) of `questions`."""

    x: Any
    covariates: Floats | None = None
    question: NDArray[np.int64] | None = None
    questions: int = 0

    @property
    def sizes(self) -> tuple[int, int, int]:
        k = 0 if self.covariates is None else self.covariates.shape[1]
        return self.x.shape[1], k, (self.questions if self.question is not None else 0)


def star_columns(x: Floats) -> NDArray[np.int64] | None:
    """For a design where each row has one non-zero entry, +1 or -1 (every game against
    the baseline, no covariates): the column of each row; else None."""
    x = np.asarray(x)
    nonzero = x != 0
    if x.size == 0 or not np.all(nonzero.sum(axis=1) == 1) or not np.all(np.abs(x[nonzero]) == 1):
        return None
    return np.argmax(nonzero, axis=1)


def closed_form(x: Floats, wins: Floats, losses: Floats) -> Floats:
    """The maximum-likelihood log-odds of a star design (`star_columns`), per column, for a
    batch of weights (`wins`, `losses`: replicates x rows): log(won / lost), +-inf for a
    system that won (lost) nothing, NaN for one without a game."""
    columns = star_columns(x)
    assert columns is not None
    sign = np.asarray(x)[np.arange(len(columns)), columns]
    params = x.shape[1]
    won = np.zeros((wins.shape[0], params))
    lost = np.zeros((wins.shape[0], params))
    for column in range(params):
        ahead, behind = (columns == column) & (sign > 0), (columns == column) & (sign < 0)
        won[:, column] = wins[:, ahead].sum(axis=1) + losses[:, behind].sum(axis=1)
        lost[:, column] = losses[:, ahead].sum(axis=1) + wins[:, behind].sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log(won) - np.log(lost)


def _ends(x: Any) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Per row, the parameter of its +1 and of its -1 entry (-1: the baseline)."""
    from scipy import sparse

    coo = sparse.coo_matrix(x)
    ahead = np.full(x.shape[0], -1, dtype=np.int64)
    behind = np.full(x.shape[0], -1, dtype=np.int64)
    ahead[coo.row[coo.data > 0]] = coo.col[coo.data > 0]
    behind[coo.row[coo.data < 0]] = coo.col[coo.data < 0]
    return ahead, behind


def strength_signs(x: Any, wins: Floats, losses: Floats) -> Floats:
    """Per replicate (rows of `wins`, `losses`) and system parameter: 0 where its strength
    is finite, -1 (+1) where it is -inf (+inf), NaN where it is not connected to the
    baseline at all (module docstring). The baseline's reach in the win graph and in its
    reverse is propagated for every replicate at once."""
    from scipy import sparse

    ahead, behind = _ends(x)
    params = x.shape[1]
    if np.all((ahead < 0) | (behind < 0)):  # each row against the baseline
        system = np.where(ahead >= 0, ahead, behind)
        first = (ahead >= 0)[None, :]
        beat = np.where(first, wins, losses) > 0
        beaten = np.where(first, losses, wins) > 0
        pick = sparse.csr_matrix(
            (np.ones(len(system)), (np.arange(len(system)), system)), shape=(len(system), params)
        ).T.tocsr()
        won_any, lost_any = _times(pick, beat * 1.0) > 0, _times(pick, beaten * 1.0) > 0
        met = np.asarray(pick.sum(axis=1)).ravel() > 0
        out = np.where(won_any & lost_any, 0.0, np.where(won_any, 1.0, -1.0))
        out[:, ~met] = np.nan
        return out
    n = params + 1  # node `params` is the baseline
    a, b = np.where(ahead < 0, params, ahead), np.where(behind < 0, params, behind)
    rows = len(a)
    # edge i -> j: i won some game against j
    forward = sparse.csr_matrix((np.ones(rows), (np.arange(rows), a * n + b)), shape=(rows, n * n))
    backward = sparse.csr_matrix((np.ones(rows), (np.arange(rows), b * n + a)), shape=(rows, n * n))
    edges = (_times(forward.T.tocsr(), (wins > 0) * 1.0)
             + _times(backward.T.tocsr(), (losses > 0) * 1.0)).reshape(-1, n, n) > 0  # fmt: skip
    edges = edges.astype(np.float32)
    reach = []
    for graph in (edges, edges.transpose(0, 2, 1)):
        seen = np.zeros((len(edges), n), dtype=np.float32)
        seen[:, params] = 1.0
        for _ in range(n - 1):
            grown = np.minimum(1.0, seen + (seen[:, None, :] @ graph)[:, 0, :])
            if np.array_equal(grown, seen):
                break
            seen = grown
        reach.append(seen[:, :params] > 0)
    down, up = reach  # down: the baseline beat it, through some chain; up: it beat the baseline
    out = np.where(down & up, 0.0, np.where(down, -1.0, np.where(up, 1.0, np.nan)))
    return out


@dataclass(frozen=True)
class Products:
    """Fixed sparse maps from a batch's per-row values to its gradients and Hessians."""

    x: Any
    x_t: Any
    outer: Any
    cross: Any
    square: Any
    cov_t: Any
    q_t: Any
    sys_q: Any
    cov_q: Any


def products(model: Model) -> Products:
    from scipy import sparse

    x = sparse.csr_matrix(model.x)
    rows = x.shape[0]
    p, k, q = model.sizes
    ahead, behind = _ends(x)
    cells, values = [], []
    for one, sign_one in ((ahead, 1.0), (behind, -1.0)):
        for two, sign_two in ((ahead, 1.0), (behind, -1.0)):
            both = (one >= 0) & (two >= 0)
            cells.append((np.flatnonzero(both), one[both] * p + two[both]))
            values.append(np.full(int(both.sum()), sign_one * sign_two))
    outer = sparse.csr_matrix(
        (np.concatenate(values),
         (np.concatenate([c[0] for c in cells]), np.concatenate([c[1] for c in cells]))),
        shape=(rows, p * p),
    ).T.tocsr()  # fmt: skip
    cross = square = cov_t = None
    if k:
        cov = np.asarray(model.covariates, dtype=float)
        parts_r, parts_c, parts_v = [], [], []
        for end, sign in ((ahead, 1.0), (behind, -1.0)):
            keep = np.flatnonzero(end >= 0)
            for j in range(k):
                parts_r.append(keep)
                parts_c.append(end[keep] * k + j)
                parts_v.append(sign * cov[keep, j])
        cross = sparse.csr_matrix(
            (np.concatenate(parts_v), (np.concatenate(parts_r), np.concatenate(parts_c))),
            shape=(rows, p * k),
        ).T.tocsr()
        square = np.ascontiguousarray((cov[:, :, None] * cov[:, None, :]).reshape(rows, k * k).T)
        cov_t = np.ascontiguousarray(cov.T)
    q_t = sys_q = cov_q = None
    if q:
        assert model.question is not None
        question = np.asarray(model.question)
        q_t = sparse.csr_matrix((np.ones(rows), (np.arange(rows), question)), shape=(rows, q))
        q_t = q_t.T.tocsr()
        parts: list[Any] = [(e >= 0, e, sign) for e, sign in ((ahead, 1.0), (behind, -1.0))]
        sys_q = sparse.csr_matrix(
            (np.concatenate([np.full(int(m.sum()), s) for m, _, s in parts]),
             (np.concatenate([np.flatnonzero(m) for m, _, _ in parts]),
              np.concatenate([e[m] * q + question[m] for m, e, _ in parts]))),
            shape=(rows, p * q),
        ).T.tocsr()  # fmt: skip
        if k:
            cov = np.asarray(model.covariates, dtype=float)
            cov_q = sparse.csr_matrix(
                (cov.ravel(),
                 (np.repeat(np.arange(rows), k),
                  (np.arange(k)[None, :] * q + question[:, None]).ravel())),
                shape=(rows, k * q),
            ).T.tocsr()  # fmt: skip
    return Products(x, x.T.tocsr(), outer, cross, square, cov_t, q_t, sys_q, cov_q)


def _times(matrix: Any, values: Any) -> Any:
    """values (batch x rows) times a fixed map stored transposed (m x rows): batch x m."""
    return np.asarray(matrix @ values.T).T


def _newton_step(
    model: Model, maps: Products, theta: Floats, wins_t: Floats, games_t: Floats
) -> Floats:
    """The Newton step of a batch (`theta`: batch x params) under the model's ridges. The
    per-row arrays are rows x batch (`wins_t`, `games_t`), so every product with a fixed
    sparse map reads them in place."""
    p, k, q = model.sizes
    m = p + k
    batch = len(theta)
    theta_t = np.ascontiguousarray(theta.T)
    logits = np.asarray(maps.x @ theta_t[:p])
    if k:
        logits += maps.cov_t.T @ theta_t[p:m]
    if q:
        assert model.question is not None
        logits += theta_t[m:][model.question]
    np.negative(logits, out=logits)
    np.exp(logits, out=logits)
    logits += 1.0
    prob = np.reciprocal(logits, out=logits)
    residual = wins_t - games_t * prob
    prob *= 1.0 - prob
    curvature = np.multiply(games_t, prob, out=prob)
    gradient = np.empty((batch, p + k + q))
    gradient[:, :p] = (maps.x_t @ residual).T
    hessian = np.zeros((batch, m, m))
    hessian[:, :p, :p] = np.asarray(maps.outer @ curvature).T.reshape(-1, p, p)
    if k:
        gradient[:, p:m] = (maps.cov_t @ residual).T - COVARIATE_RIDGE * theta[:, p:m]
        cross = np.asarray(maps.cross @ curvature).T.reshape(-1, p, k)
        hessian[:, :p, p:m] = cross
        hessian[:, p:m, :p] = cross.transpose(0, 2, 1)
        hessian[:, p:m, p:m] = (maps.square @ curvature).T.reshape(-1, k, k)
        hessian[:, p:m, p:m] += COVARIATE_RIDGE * np.eye(k)
    hessian += 1e-10 * np.eye(m)  # a system set aside has no curvature of its own
    if not q:
        return np.asarray(np.linalg.solve(hessian, gradient[:, :, None])[:, :, 0])
    # The question terms touch one another only through the rest: eliminate them (Schur).
    g_q = np.asarray(maps.q_t @ residual).T - QUESTION_RIDGE * theta[:, m:]
    d = np.asarray(maps.q_t @ curvature).T + QUESTION_RIDGE
    coupling = np.empty((batch, m, q))
    coupling[:, :p] = np.asarray(maps.sys_q @ curvature).T.reshape(-1, p, q)
    if k:
        coupling[:, p:] = np.asarray(maps.cov_q @ curvature).T.reshape(-1, k, q)
    scaled = coupling / d[:, None, :]
    reduced = hessian - scaled @ coupling.transpose(0, 2, 1)
    rhs = gradient[:, :m] - (scaled @ g_q[:, :, None])[:, :, 0]
    step_m = np.linalg.solve(reduced, rhs[:, :, None])[:, :, 0]
    step_q = (g_q - (coupling.transpose(0, 2, 1) @ step_m[:, :, None])[:, :, 0]) / d
    return np.concatenate([step_m, step_q], axis=1)


def _newton(
    model: Model, maps: Products, wins: Floats, losses: Floats, start: Floats, tolerance: float
) -> tuple[Floats, int]:
    """Newton's method for a batch (`wins`, `losses`: batch x rows); each member leaves the
    batch once its largest step is below `tolerance`. Returns the maximisers and the
    iterations the slowest member took."""
    theta = np.array(start, dtype=float)
    wins_t = np.ascontiguousarray(wins.T)
    games_t = np.ascontiguousarray((wins + losses).T)
    active = np.arange(len(theta))
    for iteration in range(1, _MAX_ITERATIONS + 1):
        step = _newton_step(model, maps, theta[active], wins_t, games_t)
        largest = np.abs(step).max(axis=1, keepdims=True)
        step = step * np.minimum(1.0, MAX_STEP / np.maximum(largest, 1e-300))
        theta[active] += step
        going = largest[:, 0] >= tolerance
        active = active[going]
        if not len(active):
            return theta, iteration
        if not going.all():  # the rows x batch arrays follow the members still going
            wins_t, games_t = wins_t[:, going], games_t[:, going]
    return theta, _MAX_ITERATIONS


def as_model(x: Any, covariates: Floats | None, question: NDArray[np.int64] | None) -> Model:
    questions = 0 if question is None or not len(question) else int(np.max(question)) + 1
    return Model(x, covariates, question, questions)


def _set_aside(model: Model, wins: Floats, losses: Floats) -> tuple[Floats, Floats, Floats]:
    """Per replicate, the systems of infinite (or no) strength (`strength_signs`), and the
    weights with every game of theirs set aside."""
    signs = strength_signs(model.x, wins, losses)
    if not np.any(signs != 0):
        return signs, wins, losses
    ahead, behind = _ends(model.x)
    off = signs != 0  # NaN counts as off too
    row_off = np.zeros(wins.shape, dtype=bool)
    for ends in (ahead, behind):
        has = ends >= 0
        row_off[:, has] |= off[:, ends[has]]
    return signs, np.where(row_off, 0.0, wins), np.where(row_off, 0.0, losses)


def _closed(model: Model) -> bool:
    return model.covariates is None and model.question is None and star_columns(model.x) is not None


def solve(
    model: Model, wins: Floats, losses: Floats, start: Floats, tolerance: float,
    maps: Products | None = None,
) -> tuple[Floats, int]:  # fmt: skip
    p = model.x.shape[1]
    if _closed(model):
        return closed_form(model.x, wins, losses), 0
    signs, wins, losses = _set_aside(model, wins, losses)
    maps = maps or products(model)
    theta, iterations = _newton(
        model, maps, wins, losses, np.where(np.isfinite(start), start, 0.0), tolerance
    )
    systems = theta[:, :p]
    systems[signs != 0] = signs[signs != 0] * np.inf
    systems[np.isnan(signs)] = np.nan
    return theta, iterations


def fit(
    x: Any,
    wins: Floats,
    losses: Floats,
    covariates: Floats | None = None,
    question: NDArray[np.int64] | None = None,
) -> Fit:
    """The maximum-likelihood parameters of one data set (`wins`, `losses`: one per row):
    the systems', then the covariates' and the questions' (module docstring)."""
    model = as_model(x, covariates, question)
    batch_w, batch_l = np.asarray(wins, float)[None, :], np.asarray(losses, float)[None, :]
    size = sum(model.sizes)
    theta, iterations = solve(model, batch_w, batch_l, np.zeros((1, size)), _TOLERANCE)
    return Fit(theta[0], iterations)


def fit_replicates(
    x: Any,
    wins: Floats,
    losses: Floats,
    start: Floats,
    covariates: Floats | None = None,
    question: NDArray[np.int64] | None = None,
) -> Floats:
    """The parameters of each replicate (`wins`, `losses`: replicates x rows), each Newton
    solve started from `start` (the full-data estimate)."""
    model = as_model(x, covariates, question)
    replicates = wins.shape[0]
    size = sum(model.sizes)
    out = np.empty((replicates, size))
    chunk = max(1, _CHUNK_CELLS // max(1, wins.shape[1], size * size))
    begin = np.broadcast_to(np.asarray(start, dtype=float), (replicates, size))
    maps = None if _closed(model) else products(model)
    for first in range(0, replicates, chunk):
        last = min(replicates, first + chunk)
        out[first:last], _ = solve(
            model, wins[first:last], losses[first:last], begin[first:last],
            _REPLICATE_TOLERANCE, maps,
        )  # fmt: skip
    return out
