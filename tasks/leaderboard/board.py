"""One judge config's leaderboard under one counting rule: Bradley-Terry scores with a
bootstrap over questions, the plain win rate against the baseline, and the counts.

Scores are on the Elo scale Arena-Hard-Auto uses: 400 points per factor of 10 in the odds,
the baseline fixed at 1000 (`score`); the same fit read as the win rate the model predicts
against the baseline, in percent, is `bt_win_rate` (the baseline's is 50, Arena-Hard-Auto's
"score"). `win_rate` is the observed share of games won against the baseline, in percent,
a tie counting half. Intervals are percentile intervals of `replicates` bootstrap
replicates that draw the questions with replacement (docs/design.md#leaderboards).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from tasks.errors import InputError
from tasks.leaderboard.battles import Battles, Games, Rule, conflicts_per_pair, games_under
from tasks.leaderboard.bt import fit, fit_replicates
from tasks.leaderboard.style import style_covariates

__all__ = ["ELO_BASE", "ELO_SCALE", "BoardOptions", "Scored", "elo", "score_rule"]

ELO_SCALE = 400.0
ELO_BASE = 1000.0
Floats = NDArray[np.float64]


@dataclass(frozen=True)
class BoardOptions:
    """How a leaderboard is computed."""

    baseline: str | None = None
    style_control: bool = False
    replicates: int = 1000
    confidence: float = 0.95
    seed: int = 0


@dataclass(frozen=True)
class Scored:
    """One rule's table: a row per system (best first) and the fit's covariates."""

    rule: Rule
    baseline: str
    questions: int
    rows: list[dict[str, Any]]
    style: dict[str, dict[str, float]] = field(default_factory=dict)


def elo(theta: Floats | float) -> Floats:
    """Natural log-odds against the baseline on the Elo scale (baseline 1000)."""
    return ELO_BASE + ELO_SCALE / math.log(10.0) * np.asarray(theta, dtype=float)


def _resampled(questions: int, options: BoardOptions) -> Floats:
    """How often each question is drawn in each replicate (replicates x questions)."""
    rng = np.random.default_rng(options.seed)
    drawn = rng.integers(0, questions, size=(options.replicates, questions))
    drawn += questions * np.arange(options.replicates)[:, None]
    counts = np.bincount(drawn.ravel(), minlength=options.replicates * questions)
    return counts.reshape(options.replicates, questions).astype(float)


def _design(
    battles: Battles, games: Games, used: NDArray[np.int64], params: NDArray[np.int64]
) -> tuple[Floats, NDArray[np.int64]]:
    """Per matchup (a, b) met in `used` pairs: its row of the design (+1 at a's parameter,
    -1 at b's; the baseline has none), and each used pair's matchup."""
    a, b = battles.pair_a[used], battles.pair_b[used]
    keys, matchup = np.unique(np.stack([a, b], axis=1), axis=0, return_inverse=True)
    x = np.zeros((len(keys), int(params.max()) + 1))
    rows = np.arange(len(keys))
    ahead, behind = params[keys[:, 0]], params[keys[:, 1]]
    x[rows[ahead >= 0], ahead[ahead >= 0]] += 1.0
    x[rows[behind >= 0], behind[behind >= 0]] -= 1.0
    return x, matchup.ravel()


def _interval(
    values: Floats, estimate: Floats, confidence: float, questions: int
) -> tuple[Floats, Floats]:
    """The percentile interval of bootstrap `values` around `estimate`, widened by
    sqrt(Q / (Q - 1)): resampling Q questions gives a variance (Q - 1) / Q times too small,
    which matters at 30 questions (docs/design.md#leaderboards)."""
    tail = (1.0 - confidence) / 2.0
    widen = math.sqrt(questions / (questions - 1)) if questions > 1 else 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN: never met the baseline
        low, high = np.nanquantile(values, tail, axis=0), np.nanquantile(values, 1 - tail, axis=0)
    return estimate + widen * (low - estimate), estimate + widen * (high - estimate)


def _fit_all(
    battles: Battles,
    games: Games,
    used: NDArray[np.int64],
    params: NDArray[np.int64],
    draws: Floats,
    question: NDArray[np.int64],
    covariates: Floats | None,
) -> tuple[Floats, Floats]:
    """The full-data estimate and each replicate's (parameters incl. covariates)."""
    x, matchup = _design(battles, games, used, params)
    won, lost = games.won[used], games.lost[used]
    if covariates is None:
        # Rows of one matchup share their design row: sum them per question and matchup.
        cells = (question, matchup)
        by_q_won = np.zeros((draws.shape[1], len(x)))
        by_q_lost = np.zeros((draws.shape[1], len(x)))
        np.add.at(by_q_won, cells, won)
        np.add.at(by_q_lost, cells, lost)
        estimate = fit(x, by_q_won.sum(axis=0), by_q_lost.sum(axis=0)).theta
        return estimate, fit_replicates(x, draws @ by_q_won, draws @ by_q_lost, estimate)
    x = np.hstack([x[matchup], covariates])
    estimate = fit(x, won, lost).theta
    # Each pair is a row of its own here: weigh the rows a few replicates at a time.
    step = max(1, 20_000_000 // max(1, len(won)))
    boot = np.empty((len(draws), x.shape[1]))
    for first in range(0, len(draws), step):
        weight = draws[first : first + step, question]
        boot[first : first + step] = fit_replicates(x, weight * won, weight * lost, estimate)
    return estimate, boot


def score_rule(
    battles: Battles, rule: Rule, options: BoardOptions, answers: tuple[list[str], list[str]] | None
) -> Scored:
    """The leaderboard of `battles` under `rule`; `answers` (identity A's and B's answer
    per pair) are needed for style control."""
    baseline = options.baseline or battles.baseline
    if baseline is None:
        raise InputError(
            f"judge {battles.judge} · config {battles.config}: the manifest names no single "
            "baseline; give --baseline NAME (one of "
            f"{', '.join(battles.systems)})"
        )
    if baseline not in battles.systems:
        raise InputError(
            f"the baseline {baseline!r} is not one of the run's systems: "
            f"{', '.join(battles.systems)}"
        )
    games = games_under(battles, rule)
    used = np.flatnonzero(games.won + games.lost > 0)
    if len(used) == 0:
        raise InputError(
            f"judge {battles.judge} · config {battles.config}: no valid outcome under rule "
            f"{rule}; nothing to rank"
        )
    systems = battles.systems
    base = systems.index(baseline)
    params = np.full(len(systems), -1, dtype=np.int64)
    others = [i for i in range(len(systems)) if i != base]
    params[others] = np.arange(len(others))
    asked = np.unique(battles.pair_question[used])
    question = np.searchsorted(asked, battles.pair_question[used])
    draws = _resampled(len(asked), options)
    covariates: Floats | None = None
    names: list[str] = []
    if options.style_control:
        if answers is None:
            raise InputError("style control needs the pairs' answers")
        covariates, names = style_covariates(
            [answers[0][i] for i in used], [answers[1][i] for i in used]
        )
    estimate, replicates = _fit_all(battles, games, used, params, draws, question, covariates)
    theta = np.zeros(len(systems))
    theta[others] = estimate[: len(others)]
    boot = np.zeros((len(draws), len(systems)))
    boot[:, others] = replicates[:, : len(others)]
    lower, upper = _interval(boot, theta, options.confidence, len(asked))
    rate, rate_lower, rate_upper = _win_rates(
        battles, games, used, question, draws, base, options.confidence
    )
    p_lower, p_upper = (100.0 / (1.0 + np.exp(-bound)) for bound in (lower, upper))
    counts = _counts(battles, games, len(systems))
    scores = elo(theta)
    rows = [
        {
            "system": systems[i],
            "score": float(scores[i]),
            "lower": float(elo(lower[i])),
            "upper": float(elo(upper[i])),
            "bt_win_rate": float(100.0 / (1.0 + math.exp(-theta[i]))),
            "bt_win_rate_lower": float(p_lower[i]),
            "bt_win_rate_upper": float(p_upper[i]),
            "win_rate": float(rate[i]),
            "win_rate_lower": float(rate_lower[i]),
            "win_rate_upper": float(rate_upper[i]),
            **{name: int(values[i]) for name, values in counts.items()},
            "rank": int(1 + np.sum(scores > scores[i] + 1e-9)),
            "baseline": i == base,
        }
        for i in range(len(systems))
    ]
    rows.sort(key=lambda row: (row["rank"], row["system"]))
    style = {}
    if covariates is not None:
        coef = estimate[len(others) :]
        low, high = _interval(replicates[:, len(others) :], coef, options.confidence, len(asked))
        style = {
            name: {"coefficient": float(coef[k]), "lower": float(low[k]), "upper": float(high[k])}
            for k, name in enumerate(names)
        }
    return Scored(rule, baseline, len(asked), rows, style)


def _win_rates(
    battles: Battles,
    games: Games,
    used: NDArray[np.int64],
    question: NDArray[np.int64],
    draws: Floats,
    base: int,
    confidence: float,
) -> tuple[Floats, Floats, Floats]:
    """Each system's observed win rate against the baseline (percent, the baseline 50) and
    its bootstrap interval; NaN for a system that never met the baseline."""
    a, b = battles.pair_a[used], battles.pair_b[used]
    size = len(battles.systems)
    won = np.zeros((draws.shape[1], size))
    played = np.zeros((draws.shape[1], size))
    for side, other, share in ((a, b, games.won[used]), (b, a, games.lost[used])):
        meets = other == base
        np.add.at(won, (question[meets], side[meets]), share[meets])
        np.add.at(played, (question[meets], side[meets]), (games.won + games.lost)[used][meets])
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = 100.0 * won.sum(axis=0) / played.sum(axis=0)
        boot = 100.0 * (draws @ won) / (draws @ played)
    lower, upper = _interval(boot, rate, confidence, draws.shape[1])
    lower, upper = np.clip(lower, 0.0, 100.0), np.clip(upper, 0.0, 100.0)
    for values in (rate, lower, upper):
        values[base] = 50.0
    return rate, lower, upper


def _counts(battles: Battles, games: Games, size: int) -> dict[str, NDArray[np.int64]]:
    """Each system's wins, ties, losses and order conflicts, over every pair it is in."""
    conflicts = conflicts_per_pair(battles)

    def both(for_a: NDArray[np.int64], for_b: NDArray[np.int64]) -> NDArray[np.int64]:
        return np.bincount(battles.pair_a, weights=for_a, minlength=size).astype(
            np.int64
        ) + np.bincount(battles.pair_b, weights=for_b, minlength=size).astype(np.int64)

    return {
        "wins": both(games.wins, games.losses),
        "ties": both(games.ties, games.ties),
        "losses": both(games.losses, games.wins),
        "conflicts": both(conflicts, conflicts),
    }
