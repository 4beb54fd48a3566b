"""Bootstrap intervals by coverage: many simulated leaderboards from a known truth."""

from __future__ import annotations

import numpy as np
import pytest
from simulated_boards import simulate

from tasks.leaderboard.board import BoardOptions, elo, score_rule

pytestmark = pytest.mark.slow

LEADERBOARDS = 400
TRUTH = {
    5: np.array([0.0, 0.4, -0.3, 0.9, 0.15]),
    8: np.array([0.0, 0.4, -0.3, 0.9, 0.15, -0.8, 0.6, 0.05]),
}


def coverage(
    systems: int, questions: int, *, round_robin: bool, rule: str, seed: int
) -> tuple[float, float]:
    """(share of 95% score intervals and of win-rate intervals covering the truth) over
    LEADERBOARDS simulated leaderboards; the baseline (fixed) is not counted."""
    rng = np.random.default_rng(seed)
    theta = TRUTH[systems]
    truth_score = elo(theta)
    truth_rate = 100 / (1 + np.exp(-theta))
    scores = rates = 0
    for board in range(LEADERBOARDS):
        battles = simulate(
            rng, theta, questions=questions, round_robin=round_robin, strong_rate=0.4
        )
        options = BoardOptions(replicates=1000, seed=board)
        for row in score_rule(battles, rule, options, None).rows:  # type: ignore[arg-type]
            i = int(row["system"][1:])
            if i:
                scores += row["lower"] <= truth_score[i] <= row["upper"]
                rates += row["win_rate_lower"] <= truth_rate[i] <= row["win_rate_upper"]
    total = LEADERBOARDS * (systems - 1)
    return scores / total, rates / total


@pytest.mark.parametrize(
    ("systems", "questions", "round_robin", "rule"),
    [
        (5, 30, False, "reference"),
        (5, 30, True, "reference"),
        (5, 30, False, "per-order"),
        (8, 100, False, "reference"),
    ],
)
def test_95_percent_intervals_cover_the_truth(
    systems: int, questions: int, round_robin: bool, rule: str
) -> None:
    score, rate = coverage(systems, questions, round_robin=round_robin, rule=rule, seed=systems)
    print(
        f"{systems} systems, {questions} questions, {round_robin=}, {rule}: {score:.3f} {rate:.3f}"
    )
    assert score >= 0.92
    if not round_robin:
        assert rate >= 0.92
