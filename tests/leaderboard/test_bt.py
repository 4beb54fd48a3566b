"""Bradley-Terry fits against independent maximum-likelihood solvers and closed forms."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from scipy.optimize import minimize
from simulated_boards import arena_hard_elo, simulate

from tasks.leaderboard.battles import Battles, games_under
from tasks.leaderboard.board import BoardOptions, score_rule
from tasks.leaderboard.bt import COVARIATE_RIDGE, closed_form, fit, fit_replicates


def _mm(size: int, a: np.ndarray, b: np.ndarray, won: np.ndarray, lost: np.ndarray) -> np.ndarray:
    """Zermelo's minorize-maximize iteration on strengths, written out here, independent
    of the code under test; returns log-strengths with system 0 at 0."""
    wins = np.zeros((size, size))  # wins[i, j]: i's (weighted) wins over j
    for i, j, w, ell in zip(a, b, won, lost, strict=True):
        wins[i, j] += w
        wins[j, i] += ell
    games = wins + wins.T
    strength = np.ones(size)
    for _ in range(100_000):
        total = wins.sum(axis=1)
        denominator = (games / (strength[:, None] + strength[None, :])).sum(axis=1)
        new = total / denominator
        new /= new[0]
        if np.abs(np.log(new) - np.log(strength)).max() < 1e-13:
            strength = new
            break
        strength = new
    return np.log(strength)


def _rows(size: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    x = np.zeros((len(a), size - 1))
    for row, (i, j) in enumerate(zip(a, b, strict=True)):
        if i:
            x[row, i - 1] += 1
        if j:
            x[row, j - 1] -= 1
    return x


@pytest.mark.parametrize("round_robin", [True, False])
def test_fit_equals_an_independent_mm_solution(round_robin: bool) -> None:
    rng = np.random.default_rng(7)
    truth = np.array([0.0, 0.8, -0.4, 1.3, 0.1, -1.0])
    battles = simulate(rng, truth, questions=40, round_robin=round_robin, strong_rate=0.4)
    for rule in ("reference", "drop-conflicts", "per-order"):
        games = games_under(battles, rule)  # type: ignore[arg-type]
        x = _rows(len(truth), battles.pair_a, battles.pair_b)
        got = fit(x, games.won, games.lost).theta
        expected = _mm(len(truth), battles.pair_a, battles.pair_b, games.won, games.lost)[1:]
        np.testing.assert_allclose(got, expected, atol=1e-6, rtol=0)


def test_two_systems_score_is_the_closed_form_of_the_win_rate() -> None:
    rng = np.random.default_rng(3)
    battles = simulate(rng, np.array([0.0, 0.6]), questions=50, k=4, strong_rate=0.5)
    options = BoardOptions(replicates=50)
    for rule in ("reference", "drop-conflicts", "per-order"):
        rows = {r["system"]: r for r in score_rule(battles, rule, options, None).rows}  # type: ignore[arg-type]
        share = rows["s1"]["win_rate"] / 100
        assert rows["s1"]["score"] == pytest.approx(
            1000 + 400 * math.log10(share / (1 - share)), abs=1e-6
        )
        assert rows["s1"]["bt_win_rate"] == pytest.approx(rows["s1"]["win_rate"], abs=1e-9)
        assert rows["s0"]["score"] == 1000 and rows["s0"]["baseline"]


def test_newton_replicates_equal_single_fits_and_the_star_closed_form() -> None:
    rng = np.random.default_rng(11)
    size = 5
    a = np.array([i for i in range(size) for j in range(size) if i < j])
    b = np.array([j for i in range(size) for j in range(size) if i < j])
    x = _rows(size, a, b)
    won = rng.integers(1, 20, size=(6, len(a))).astype(float)
    lost = rng.integers(1, 20, size=(6, len(a))).astype(float)
    batch = fit_replicates(x, won, lost, np.zeros(size - 1))
    for r in range(6):
        np.testing.assert_allclose(batch[r], _mm(size, a, b, won[r], lost[r])[1:], atol=1e-6)
    star = _rows(size, np.array([1, 2, 0, 4]), np.array([0, 0, 3, 0]))
    theta = closed_form(star, won[:, :4], lost[:, :4])
    for r in range(6):  # the star shortcut is the maximum likelihood
        expected = _mm(
            size, np.array([1, 2, 0, 4]), np.array([0, 0, 3, 0]), won[r, :4], lost[r, :4]
        )
        np.testing.assert_allclose(theta[r], expected[1:], atol=1e-6)
    assert theta[0, 0] == pytest.approx(math.log(won[0, 0] / lost[0, 0]))
    assert theta[0, 2] == pytest.approx(math.log(lost[0, 2] / won[0, 2]))  # system 3 was B


def test_a_system_that_won_everything_has_an_infinite_strength_and_no_clamp() -> None:
    x = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, -1.0]])
    result = fit(x, np.array([5.0, 3.0, 2.0]), np.array([0.0, 3.0, 0.0]))
    # s0 beat everyone: +inf; its games set aside, s1 is 3-3 against the baseline
    assert result.theta[0] == np.inf and result.theta[1] == pytest.approx(0.0, abs=1e-9)
    batch = fit_replicates(x, np.array([[5.0, 3.0, 2.0], [0.0, 3.0, 0.0], [0.0, 3.0, 2.0]]),
                           np.array([[1.0, 3.0, 0.0], [4.0, 0.0, 2.0], [4.0, 0.0, 0.0]]),
                           result.theta)  # fmt: skip
    assert np.isfinite(batch[0]).all()  # s0 lost a game to the baseline: all finite
    assert batch[1].tolist() == [-np.inf, np.inf]  # s1 beat both, s0 beat no one
    assert np.isfinite(batch[2]).all()  # base beat s0, s0 beat s1, s1 beat base: a cycle


def test_style_control_equals_a_generic_optimiser() -> None:
    rng = np.random.default_rng(5)
    size, rows = 4, 300
    a = rng.integers(0, size, rows)
    b = (a + rng.integers(1, size, rows)) % size
    features = rng.normal(size=(rows, 2))
    x = np.hstack([_rows(size, a, b), features])
    truth = np.array([0.5, -0.2, 0.9, 0.7, -0.3])
    ridge = np.r_[np.zeros(size - 1), np.full(2, COVARIATE_RIDGE)]
    p = 1 / (1 + np.exp(-(x @ truth)))
    games = rng.integers(1, 4, rows).astype(float)
    won = rng.binomial(games.astype(int), p).astype(float)
    lost = games - won

    def negative_log_likelihood(theta: np.ndarray) -> tuple[float, np.ndarray]:
        z = x @ theta
        value = -(won * -np.logaddexp(0, -z) + lost * -np.logaddexp(0, z)).sum()
        value += 0.5 * (ridge * theta**2).sum()
        gradient = -(won - games / (1 + np.exp(-z))) @ x + ridge * theta
        return float(value), gradient

    found = minimize(negative_log_likelihood, np.zeros(5), jac=True, method="BFGS", tol=1e-14)
    got = fit(x[:, : size - 1], won, lost, covariates=features).theta
    np.testing.assert_allclose(got, found.x, atol=1e-6)


def _arena_hard_elo(battles: Battles) -> dict[str, float]:
    """The battles as Arena-Hard-Auto's battle rows (the judged model's two games; a strong
    verdict 3 rows), scored by its published method."""
    model_a, model_b, winner = [], [], []
    for row, pair in enumerate(battles.pair):
        for outcome, strong in ((battles.ab[row], battles.ab_strong[row]),
                                (battles.ba[row], battles.ba_strong[row])):  # fmt: skip
            if outcome not in ("A", "B", "T"):
                continue
            repeat = 3 if strong and outcome != "T" else 1
            for _ in range(repeat):
                model_a.append(battles.systems[battles.pair_a[pair]])
                model_b.append(battles.systems[battles.pair_b[pair]])
                winner.append({"A": "model_a", "B": "model_b", "T": "tie"}[outcome])
    return arena_hard_elo(model_a, model_b, winner, battles.baseline or "")


@pytest.mark.parametrize("round_robin", [False, True])
def test_per_order_scores_equal_arena_hard_autos_method(round_robin: bool) -> None:
    rng = np.random.default_rng(17)
    truth = np.array([0.0, 0.7, -0.5, 1.1, 0.2, -0.9])
    battles = simulate(rng, truth, questions=30, round_robin=round_robin, strong_rate=0.4)
    ties = rng.random(len(battles.ab)) < 0.1
    battles = replace(battles, ab=np.where(ties, "T", battles.ab))
    battles = replace(battles, ba=np.where(rng.random(len(ties)) < 0.05, "M", battles.ba))
    expected = _arena_hard_elo(battles)
    rows = score_rule(battles, "per-order", BoardOptions(replicates=20), None).rows
    for row in rows:
        assert row["score"] == pytest.approx(expected[row["system"]], abs=1e-6)


@pytest.mark.parametrize("with_questions", [False, True])
def test_the_controlled_bootstrap_equals_full_newton_per_replicate(with_questions: bool) -> None:
    """fit_bootstrap (Hessians fixed at the estimate, single-precision rows) against
    fit_replicates (full Newton, double precision) on the same draws, a system's every
    win drawn out of some replicates included."""
    from scipy import sparse

    from tasks.leaderboard.bootstrap import fit_bootstrap

    rng = np.random.default_rng(0)
    size, questions, k = 8, 60, 3
    rows = size * questions
    system = np.repeat(np.arange(size), questions)
    question = np.tile(np.arange(questions), size)
    sign = np.where(rng.random(rows) < 0.5, 1.0, -1.0)
    x = sparse.csr_matrix((sign, (np.arange(rows), system)), shape=(rows, size))
    covariates = rng.normal(size=(rows, k))
    won = rng.integers(0, 4, rows).astype(float)
    lost = rng.integers(0, 4, rows).astype(float)
    rare = np.flatnonzero(system == 3)
    sign[rare] = 1.0  # system 3 is identity A, and wins on two questions only
    x = sparse.csr_matrix((sign, (np.arange(rows), system)), shape=(rows, size))
    won[rare] = 0.0
    won[rare[:2]] = 1.0
    draws = rng.multinomial(questions, np.full(questions, 1 / questions), size=300).astype(float)
    terms = question if with_questions else None
    estimate = fit(x, won, lost, covariates, terms).theta
    chord = fit_bootstrap(x, won, lost, estimate, draws, question, covariates, terms)
    weight = draws[:, question]
    newton = fit_replicates(x, weight * won, weight * lost, estimate, covariates, terms)
    assert np.array_equal(np.isinf(chord), np.isinf(newton))
    assert np.isinf(chord[:, 3]).any()  # replicates that drew neither winning question
    finite = np.isfinite(newton)
    np.testing.assert_allclose(chord[finite], newton[finite], atol=2e-5, rtol=0)
