"""Score intervals by coverage: 1,000 simulated leaderboards from a known truth each, small
ones (5 systems x 30 questions against the baseline, 12 x 40 round-robin), every
leaderboard's bootstrap (1,000 replicates, whole questions) fitted in one batch with the
leaderboard code's own fit and interval."""

from __future__ import annotations

import numpy as np
import pytest
from simulated_boards import simulate

from tasks.leaderboard.battles import games_under
from tasks.leaderboard.board import BoardOptions, _design, _resampled
from tasks.leaderboard.bt import fit_replicates
from tasks.leaderboard.intervals import interval

pytestmark = pytest.mark.slow

LEADERBOARDS = 1000
REPLICATES = 1000
TRUTH_5 = np.array([0.0, 0.4, -0.3, 0.9, 0.15])
TRUTH_12 = np.array([0.0, 0.5, -0.4, 0.9, 0.2, -0.8, 0.6, 0.05, -0.2, 1.2, -1.1, 0.3])


def coverage(
    theta: np.ndarray, questions: int, *, round_robin: bool, rule: str, seed: int
) -> np.ndarray:
    """Per system but the baseline, the share of LEADERBOARDS 95% score intervals covering
    the truth (on the log-odds scale, where the Elo score is linear)."""
    rng = np.random.default_rng(seed)
    won, lost, x = [], [], None
    for _ in range(LEADERBOARDS):
        battles = simulate(
            rng, theta, questions=questions, round_robin=round_robin, strong_rate=0.4
        )
        games = games_under(battles, rule)  # type: ignore[arg-type]
        params = np.arange(len(theta)) - 1
        used = np.arange(len(battles.pair_a))
        x, matchup = _design(battles, used, params)
        cells = (battles.pair_question, matchup)
        w, ell = np.zeros((questions, len(x))), np.zeros((questions, len(x)))
        np.add.at(w, cells, games.won)
        np.add.at(ell, cells, games.lost)
        won.append(w)
        lost.append(ell)
    assert x is not None
    w_all, l_all = np.stack(won), np.stack(lost)  # leaderboards x questions x matchups
    estimate = fit_replicates(x, w_all.sum(axis=1), l_all.sum(axis=1), np.zeros(x.shape[1]))
    covered = np.zeros(x.shape[1])
    for first in range(0, LEADERBOARDS, 100):
        boards = range(first, min(LEADERBOARDS, first + 100))
        draws = np.stack([_resampled(questions, BoardOptions(replicates=REPLICATES, seed=b))
                          for b in boards])  # fmt: skip
        wd = np.einsum("brq,bqm->brm", draws, w_all[first : first + len(boards)])
        ld = np.einsum("brq,bqm->brm", draws, l_all[first : first + len(boards)])
        start = np.repeat(estimate[first : first + len(boards)], REPLICATES, axis=0)
        reps = fit_replicates(x, wd.reshape(-1, x.shape[0]), ld.reshape(-1, x.shape[0]), start)
        reps = reps.reshape(len(boards), REPLICATES, -1)
        for j, b in enumerate(boards):
            low, high = interval(estimate[b], reps[j], 0.95, questions)
            covered += (low <= theta[1:]) & (theta[1:] <= high)
    return covered / LEADERBOARDS


@pytest.mark.parametrize(
    ("theta", "questions", "round_robin", "rule", "seed"),
    [
        (TRUTH_5, 30, False, "reference", 5),
        (TRUTH_5, 30, False, "per-order", 6),
        (TRUTH_12, 40, True, "reference", 12),
    ],
)
def test_95_percent_intervals_cover_the_truth_in_small_leaderboards(
    theta: np.ndarray, questions: int, round_robin: bool, rule: str, seed: int
) -> None:
    per_system = coverage(theta, questions, round_robin=round_robin, rule=rule, seed=seed)
    overall = float(per_system.mean())
    print(
        f"{len(theta)} systems x {questions} questions, {round_robin=}, {rule}, seed {seed}: "
        f"{overall:.4f} ({', '.join(f'{c:.3f}' for c in per_system)})"
    )
    assert overall >= 0.94
    assert per_system.min() >= 0.925  # no system far below: 0.925 is 3 SE under 0.95
