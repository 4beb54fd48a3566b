"""Simulated leaderboards from a known Bradley-Terry truth, at the level of battles."""

from __future__ import annotations

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
