"""Simulated leaderboards from a known Bradley-Terry truth, at the level of battles."""

from __future__ import annotations

import math
from itertools import combinations

import numpy as np

from tasks.leaderboard.battles import Battles


def simulate(
    rng: np.random.Generator,
    theta: np.ndarray,
    *,
    questions: int,
    k: int = 2,
    round_robin: bool = False,
    strong_rate: float = 0.0,
) -> Battles:
    """Every call independent: the pair's first system wins with probability
    sigmoid(theta_a - theta_b). System 0 is the baseline (theta 0)."""
    size = len(theta)
    matchups = (
        list(combinations(range(size), 2)) if round_robin else [(s, 0) for s in range(1, size)]
    )
    pair_a = np.array([a for _ in range(questions) for a, _ in matchups])
    pair_b = np.array([b for _ in range(questions) for _, b in matchups])
    pair_q = np.repeat(np.arange(questions), len(matchups))
    pairs = len(pair_a)
    pair = np.repeat(np.arange(pairs), k)
    p = 1.0 / (1.0 + np.exp(-(theta[pair_a] - theta[pair_b])))[pair]
    ab = np.where(rng.random(len(pair)) < p, "A", "B")
    ba = np.where(rng.random(len(pair)) < p, "A", "B")
    return Battles(
        judge="sim", config="c", systems=[f"s{i}" for i in range(size)], baseline="s0",
        questions=[f"q{i}" for i in range(questions)], pair_ids=[f"p{i}" for i in range(pairs)],
        pair_a=pair_a, pair_b=pair_b, pair_question=pair_q, pair=pair, ab=ab, ba=ba,
        ab_strong=rng.random(len(pair)) < strong_rate,
        ba_strong=rng.random(len(pair)) < strong_rate,
    )  # fmt: skip


def arena_hard_elo(
    model_a: list[str], model_b: list[str], winner: list[str], baseline: str
) -> dict[str, float]:
    """Arena-Hard-Auto's published method, written out from its show_result.py
    (compute_mle_elo): every battle row twice, Y = 1 for a win of model_a in both copies and
    for a tie in the first copy only; logistic regression on X = +-log(10) without intercept
    or penalty (here by plain Newton), Elo = 400 * coef + 1000 shifted so that the baseline
    is 1000. Strong verdicts come in as 3 rows (its WEIGHT)."""
    systems = sorted({*model_a, *model_b})
    index = {s: i for i, s in enumerate(systems)}
    n, p = len(winner) * 2, len(systems)
    x = np.zeros((n, p))
    rows = np.arange(n)
    x[rows, np.array([index[m] for m in model_a * 2])] = math.log(10)
    x[rows, np.array([index[m] for m in model_b * 2])] = -math.log(10)
    y = np.zeros(n)
    y[np.array(winner * 2) == "model_a"] = 1.0
    tie = np.array(winner * 2) == "tie"
    tie[n // 2 :] = False
    y[tie] = 1.0
    coef = np.zeros(p)
    for _ in range(100):
        prob = 1 / (1 + np.exp(-(x @ coef)))
        hessian = (x.T * (prob * (1 - prob))) @ x + 1e-12 * np.eye(p)
        step = np.linalg.lstsq(hessian, x.T @ (y - prob), rcond=None)[0]
        coef += step
        if np.abs(step).max() < 1e-13:
            break
    elo = 400 * coef + 1000
    elo += 1000 - elo[index[baseline]]
    return dict(zip(systems, elo, strict=True))
