"""The bootstrap of a controlled fit (style or length covariates, question terms), whose
rows are pairs drawn with their question: every replicate refits every pair.

A replicate's Hessian is taken once, at the full-data estimate, from per-question blocks
scaled by how often the replicate drew each question; Newton's iteration then only
evaluates the gradient (a chord method: each step gains about a decimal where full Newton
would square the error, at a fraction of the cost). The per-row arrays are single
precision. A replicate in which some system has no finite strength, or that does not
converge so, is solved by the full Newton of `bt` (docs/design.md#leaderboards).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from tasks.leaderboard.bt import (
    COVARIATE_RIDGE,
    MAX_STEP,
    QUESTION_RIDGE,
    Model,
    Products,
    as_model,
    products,
    solve,
    strength_signs,
)  # fmt: skip

__all__ = ["fit_bootstrap"]

Floats = NDArray[np.float64]
_BOOTSTRAP_STEP = 1e-5
"""A bootstrap replicate stops after a step this small (0.002 Elo points; its remaining error
about a tenth of that): far below what places an interval's end."""
_CHORD_ITERATIONS = 12
"""Iterations with a replicate's Hessian fixed at the estimate before full Newton takes over."""
_CHUNK_CELLS = 4_000_000
"""Replicates per batch: at most about this many floats in a (replicates x rows) array."""


def _jacobian(model: Model) -> Any:
    """rows x params: each row's log-odds' derivative in every parameter."""
    from scipy import sparse

    parts = [sparse.csr_matrix(model.x)]
    if model.covariates is not None and model.covariates.shape[1]:
        parts.append(sparse.csr_matrix(model.covariates))
    if model.question is not None and model.questions:
        rows = len(model.question)
        parts.append(
            sparse.csr_matrix(
                (np.ones(rows), (np.arange(rows), model.question)), shape=(rows, model.questions)
            )
        )
    return sparse.hstack(parts).tocsr()


def _row_outer(jac: Any) -> Any:
    """rows x params^2 (params: `jac`'s columns): each row's outer product, flattened."""
    from scipy import sparse

    jac = sparse.csr_matrix(jac)
    counts = np.diff(jac.indptr)
    row_of = np.repeat(np.arange(jac.shape[0]), counts)
    reps = counts[row_of]
    first = np.repeat(np.arange(jac.nnz), reps)
    within = np.arange(len(first)) - np.repeat(np.cumsum(reps) - reps, reps)
    second = jac.indptr[row_of[first]] + within
    size = jac.shape[1]
    return sparse.csr_matrix(
        (jac.data[first] * jac.data[second],
         (row_of[first], jac.indices[first] * size + jac.indices[second])),
        shape=(jac.shape[0], size * size),
    )  # fmt: skip


@dataclass(frozen=True)
class _Blocks:
    """A bootstrap's fixed parts, from the full data at its estimate: per question drawn
    (unit), its gradient (`gradient`: units x params) and its share of the Hessian of the
    systems and covariates (`outer`: units x m^2), of their coupling with its own question
    term (`coupling`: units x m) and of that term (`own`: units); `term` the question term
    of each unit (-1: none)."""

    gradient: Floats
    outer: Floats
    cells: NDArray[np.int64]
    coupling: Floats | None
    own: Floats | None
    term: NDArray[np.int64] | None


def _blocks(
    model: Model, estimate: Floats, won: Floats, lost: Floats, unit: NDArray[np.int64],
    units: int,
) -> _Blocks:  # fmt: skip
    from scipy import sparse

    p, k, q = model.sizes
    m = p + k
    jac = _jacobian(model)
    theta = np.where(np.isfinite(estimate), estimate, 0.0)
    prob = 1.0 / (1.0 + np.exp(-(jac @ theta)))
    games = won + lost
    curvature = games * prob * (1.0 - prob)
    by_unit = sparse.csr_matrix((np.ones(len(unit)), (unit, np.arange(len(unit)))),
                                shape=(units, len(unit)))  # fmt: skip
    gradient = np.asarray((by_unit @ sparse.diags(won - games * prob) @ jac).todense())
    jm = jac[:, :m]
    outer = np.asarray((by_unit @ sparse.diags(curvature) @ _row_outer(jm)).todense())
    coupling = own = term = None
    if q:
        assert model.question is not None
        term = np.full(units, -1, dtype=np.int64)
        term[unit] = model.question
        if np.any(np.bincount(term[term >= 0], minlength=q) > 1):
            raise ValueError("a question term spans several bootstrap units")
        coupling = np.asarray((by_unit @ sparse.diags(curvature) @ jm).todense())
        own = np.asarray(by_unit @ curvature).ravel()
    cells = np.flatnonzero(np.any(outer != 0, axis=0))
    return _Blocks(gradient, outer, cells, coupling, own, term)


def _chord(
    model: Model, blocks: _Blocks, estimate: Floats, n: Floats, won: Floats, lost: Floats,
    unit: NDArray[np.int64], jac: Any,
) -> tuple[Floats, NDArray[np.bool_]]:  # fmt: skip
    """Newton's method for a batch of replicates (`n`: batch x units, how often each unit is
    drawn) with each replicate's Hessian taken once, at the estimate (the per-unit blocks
    scaled by its draws): only the gradient is evaluated per iteration. Returns the
    parameters and which replicates converged (step below _BOOTSTRAP_STEP)."""
    p, k, q = model.sizes
    m = p + k
    batch = len(n)
    ridge = np.r_[np.zeros(p), np.full(k, COVARIATE_RIDGE)]
    # Only the Hessian cells some row touches (against one baseline: the diagonal and the
    # covariates' rows and columns) are summed over the draws.
    hessian = np.zeros((batch, m * m))
    hessian[:, blocks.cells] = n @ blocks.outer[:, blocks.cells]
    hessian = hessian.reshape(batch, m, m) + np.diag(ridge) + 1e-10 * np.eye(m)
    coupling = d = None
    if q:
        assert blocks.term is not None and blocks.coupling is not None and blocks.own is not None
        of_term = np.zeros(q, dtype=np.int64)  # the unit of each question term
        has = blocks.term >= 0
        of_term[blocks.term[has]] = np.flatnonzero(has)
        drawn = n[:, of_term]
        coupling = drawn[:, None, :] * blocks.coupling[of_term].T[None, :, :]  # batch x m x q
        d = drawn * blocks.own[of_term][None, :] + QUESTION_RIDGE
        # single precision: the inverse only sets the pace of the iteration, not its limit
        coupling, d = coupling.astype(np.float32), d.astype(np.float32)
        hessian = hessian - (coupling / d[:, None, :]) @ coupling.transpose(0, 2, 1)
    cells_i, cells_j = np.divmod(blocks.cells, m)
    systems = (cells_i < p) & (cells_j < p)
    arrow = not q and bool(np.all(cells_i[systems] == cells_j[systems]))
    solve = _arrow_solver(hessian, p) if arrow else _inverse_solver(hessian)
    theta = np.broadcast_to(np.where(np.isfinite(estimate), estimate, 0.0),
                            (batch, len(estimate))).copy()  # fmt: skip
    gradient = (n - 1.0) @ blocks.gradient  # at the estimate: its own gradient is 0
    # The per-row arrays in single precision: their sums' rounding (about 1e-7 of a
    # system's games) moves a step far less than _BOOTSTRAP_STEP, at half the memory.
    weight_t = np.ascontiguousarray(n[:, unit].T, dtype=np.float32)
    won_t = weight_t * won[:, None].astype(np.float32)
    games_t = weight_t * (won + lost)[:, None].astype(np.float32)
    jac32 = jac.astype(np.float32)
    jac32_t = jac32.T.tocsr()
    active = np.arange(batch)
    active_rows = np.arange(batch)  # each member's row in the solver's arrays
    full_ridge = np.r_[ridge, np.full(q, QUESTION_RIDGE)]
    for _ in range(_CHORD_ITERATIONS):
        if q:
            assert coupling is not None and d is not None
            g_q = gradient[:, m:] / d
            g_m = gradient[:, :m] - np.einsum("bmq,bq->bm", coupling, g_q)
            step_m = solve(g_m, active_rows)
            step_q = g_q - np.einsum("bmq,bm->bq", coupling, step_m) / d
            step = np.concatenate([step_m, step_q], axis=1)
        else:
            step = solve(gradient, active_rows)
        largest = np.abs(step).max(axis=1)
        theta[active] += step * np.minimum(1.0, MAX_STEP / np.maximum(largest, 1e-300))[:, None]
        # Converged when the systems' and covariates' steps are small (what is reported).
        going = np.abs(step[:, :m]).max(axis=1) >= _BOOTSTRAP_STEP
        active = active[going]
        if not len(active):
            break
        if not going.all():  # the per-member arrays follow the members still going
            won_t, games_t = won_t[:, going], games_t[:, going]
            active_rows = active_rows[going]
            if coupling is not None and d is not None:
                coupling, d = coupling[going], d[going]
        logits = np.asarray(jac32 @ theta[active].T.astype(np.float32))
        np.negative(logits, out=logits)
        np.exp(logits, out=logits)
        logits += 1.0
        prob = np.reciprocal(logits, out=logits)
        residual = won_t - games_t * prob
        gradient = np.asarray(jac32_t @ residual, dtype=float).T - full_ridge * theta[active]
    converged = np.ones(batch, dtype=bool)
    converged[active] = False
    return theta, converged


def _inverse_solver(hessian: Floats) -> Any:
    """Steps from each member's inverse Hessian (single precision)."""
    inverse = np.linalg.inv(hessian.astype(np.float32))

    def solve(gradient: Floats, rows: NDArray[np.int64]) -> Floats:
        return np.einsum("bij,bj->bi", inverse[rows], gradient.astype(np.float32)).astype(float)

    return solve


def _arrow_solver(hessian: Floats, p: int) -> Any:
    """Steps for Hessians whose systems' block is diagonal (every game against the
    baseline): the covariates' block eliminated (Schur), no m x m inverse."""
    a = np.diagonal(hessian[:, :p, :p], axis1=1, axis2=2).copy()
    border = hessian[:, :p, p:]
    scaled = border / a[:, :, None]
    schur = hessian[:, p:, p:] - np.einsum("bpk,bpl->bkl", border, scaled)
    inverse = np.linalg.inv(schur)

    def solve(gradient: Floats, rows: NDArray[np.int64]) -> Floats:
        g_s, g_c = gradient[:, :p] / a[rows], gradient[:, p:]
        step_c = np.einsum("bkl,bl->bk", inverse[rows],
                           g_c - np.einsum("bpk,bp->bk", border[rows], g_s))  # fmt: skip
        step_s = g_s - np.einsum("bpk,bk->bp", scaled[rows], step_c)
        return np.concatenate([step_s, step_c], axis=1)

    return solve


def fit_bootstrap(
    x: Any, won: Floats, lost: Floats, estimate: Floats, draws: Floats, unit: NDArray[np.int64],
    covariates: Floats | None = None, question: NDArray[np.int64] | None = None,
) -> Floats:  # fmt: skip
    """The parameters of each bootstrap replicate of a design whose rows are drawn with
    their question: replicate r weighs row m by `draws[r, unit[m]]`. A replicate whose
    systems all keep a finite strength is solved by `_chord` (its Hessian taken once);
    one that does not, or does not converge so, by the full Newton of `solve`."""
    from scipy import sparse

    model = as_model(x, covariates, question)
    replicates = draws.shape[0]
    p, k, q = model.sizes
    out = np.empty((replicates, p + k + q))
    if not replicates:
        return out
    blocks = _blocks(model, estimate, won, lost, unit, draws.shape[1])
    jac = _jacobian(model)
    cells = max(len(unit), (p + k) * (p + k + q))
    chunk = max(1, _CHUNK_CELLS // cells)
    maps: Products | None = None
    present = np.asarray(abs(sparse.csr_matrix(model.x)).sum(axis=0)).ravel() > 0  # has a row
    for first in range(0, replicates, chunk):
        n = draws[first : first + chunk]
        weight = n[:, unit]
        signs = strength_signs(model.x, weight * won, weight * lost)
        finite = np.all((signs == 0) | ~present, axis=1)
        theta, converged = _chord(model, blocks, estimate, n[finite], won, lost, unit, jac)
        block = out[first : first + chunk]
        block[finite] = theta
        rest = np.flatnonzero(~finite)
        rest = np.r_[rest, np.flatnonzero(finite)[~converged]]
        if len(rest):
            maps = maps or products(model)
            begin = np.where(np.isfinite(estimate), estimate, 0.0)[None, :].repeat(len(rest), 0)
            begin[np.isin(rest, np.flatnonzero(finite))] = block[
                rest[np.isin(rest, np.flatnonzero(finite))]
            ]
            block[rest], _ = solve(
                model, weight[rest] * won, weight[rest] * lost, begin, _BOOTSTRAP_STEP, maps
            )
    return out
