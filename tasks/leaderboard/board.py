"""One judge config's leaderboard under one counting rule: Bradley-Terry scores with a
bootstrap over questions, the plain (and, asked for, the length-controlled) win rate against
the baseline, and the counts.

Scores are on the Elo scale Arena-Hard-Auto uses: 400 points per factor of 10 in the odds,
the baseline fixed at 1000 (`score`); the same fit read as the win rate the model predicts
against the baseline, in percent, is `bt_win_rate` (the baseline's is 50, Arena-Hard-Auto's
"score"). `win_rate` is the observed share of games won against the baseline, in percent,
a tie counting half. Intervals come from `replicates` bootstrap replicates that draw the
questions with replacement (`intervals`). A system whose score has no finite estimate (it
never beat, or never lost to, the systems it is compared with) shows a one-sided bound
instead, flagged `bound` (docs/design.md#leaderboards).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from tasks.errors import InputError
from tasks.leaderboard.battles import Battles, Games, Rule, conflicts_per_pair, games_under
from tasks.leaderboard.bootstrap import fit_bootstrap
from tasks.leaderboard.bt import fit, fit_replicates
from tasks.leaderboard.intervals import interval, no_win_bound
from tasks.leaderboard.length import LengthControl, length_controlled
from tasks.leaderboard.style import (
    COLLINEAR_R2,
    DEFINITIONS,
    AnswerStats,
    StyleSet,
    collinear,
    style_covariates,
)

__all__ = ["ELO_BASE", "ELO_SCALE", "BoardOptions", "Scored", "elo", "score_rule"]

ELO_SCALE = 400.0
ELO_BASE = 1000.0
Floats = NDArray[np.float64]


@dataclass(frozen=True)
class BoardOptions:
    """How a leaderboard is computed."""

    baseline: str | None = None
    style_control: bool = False
    style: StyleSet = "v2"
    length_control: bool = False
    replicates: int = 1000
    confidence: float = 0.95
    seed: int = 0


@dataclass(frozen=True)
class Scored:
    """One rule's table: a row per system (best first), the style fit's covariates and
    whether they are told apart from the systems, and the length control's fit."""

    rule: Rule
    baseline: str
    questions: int
    rows: list[dict[str, Any]]
    style: dict[str, dict[str, float]] = field(default_factory=dict)
    style_check: dict[str, Any] | None = None
    length: dict[str, Any] | None = None


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
    battles: Battles, used: NDArray[np.int64], params: NDArray[np.int64]
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
    x, matchup = _design(battles, used, params)
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
    from scipy import sparse

    rows = sparse.csr_matrix(x)[matchup]  # each pair a row of its own (its covariates differ)
    estimate = fit(rows, won, lost, covariates=covariates).theta
    return estimate, fit_bootstrap(rows, won, lost, estimate, draws, question, covariates)


def _bounded(
    theta: Floats, lower: Floats, upper: Floats, met: NDArray[np.int64], confidence: float
) -> tuple[Floats, Floats, Floats, list[str | None]]:
    """Log-odds with each infinite estimate replaced by its one-sided bound
    (`no_win_bound` over the `met` questions it shares with the baseline; NaN when it met
    none), and which side each bound is on."""
    p = no_win_bound(met, confidence)
    with np.errstate(divide="ignore"):
        bound = np.log(p) - np.log1p(-p)
    bound = np.where(met > 0, bound, np.nan)
    side: list[str | None] = [
        "upper" if t == -np.inf else "lower" if t == np.inf else None for t in theta
    ]
    theta, lower, upper = theta.copy(), lower.copy(), upper.copy()
    below, above = theta == -np.inf, theta == np.inf
    theta[below], lower[below], upper[below] = bound[below], -np.inf, bound[below]
    theta[above], lower[above], upper[above] = -bound[above], -bound[above], np.inf
    return theta, lower, upper, side


def _finite_or_none(value: Any) -> float | None:
    return float(value) if math.isfinite(value) else None


def _style_check(
    battles: Battles, used: NDArray[np.int64], params: NDArray[np.int64], games: Games,
    covariates: Floats, names: list[str],
) -> dict[str, Any]:  # fmt: skip
    """Per covariate, the share of it the systems (and the other covariates) explain over
    the pairs; the controlled ranks are identified only when every share is below
    COLLINEAR_R2."""
    # Each pair counts once: whether style can be told apart from the systems is the
    # design's, the same under every counting rule.
    x, matchup = _design(battles, used, params)
    alone, together = collinear(x[matchup], covariates, np.ones(len(used)))
    shares = {n: {"systems": float(a), "systems_and_others": float(t)}
              for n, a, t in zip(names, alone, together, strict=True)}  # fmt: skip
    confounded = [n for n in names if shares[n]["systems_and_others"] >= COLLINEAR_R2]
    return {"r2": shares, "confounded": confounded, "identified": not confounded}


def score_rule(
    battles: Battles,
    rule: Rule,
    options: BoardOptions,
    answers: tuple[list[str], list[str]] | AnswerStats | None,
) -> Scored:
    """The leaderboard of `battles` under `rule`; `answers` (identity A's and B's answer
    per pair, or their AnswerStats) are needed for style and length control."""
    if isinstance(answers, tuple):
        answers = AnswerStats.of(answers)
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
    if (options.style_control or options.length_control) and answers is None:
        raise InputError("style and length control need the pairs' answers")
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
    check = None
    if options.style_control:
        assert isinstance(answers, AnswerStats)
        covariates, names = style_covariates(
            answers.counts_a[used], answers.counts_b[used], options.style
        )
        check = _style_check(battles, used, params, games, covariates, names)
        check["definition"] = DEFINITIONS[options.style]
        check["set"] = options.style
    estimate, replicates = _fit_all(battles, games, used, params, draws, question, covariates)
    theta = np.zeros(len(systems))
    theta[others] = estimate[: len(others)]
    boot = np.zeros((len(draws), len(systems)))
    boot[:, others] = replicates[:, : len(others)]
    lower, upper = interval(theta, boot, options.confidence, len(asked))
    rates = _win_rates(battles, games, used, question, draws, base, options.confidence)
    # Ranks follow the estimates, infinite ones included; a bound only stands in for them.
    order = theta.copy()
    theta, lower, upper, side = _bounded(theta, lower, upper, rates["met"], options.confidence)
    length = None
    if options.length_control:
        assert isinstance(answers, AnswerStats)
        length = _length(battles, games, used, question, draws, base, answers, options, len(asked))
    counts = _counts(battles, games, len(systems))
    scores = elo(theta)
    identified = check is None or check["identified"]
    rows = []
    for i in range(len(systems)):
        row: dict[str, Any] = {
            "system": systems[i],
            "score": _finite_or_none(scores[i]),
            "lower": _finite_or_none(elo(lower[i])),
            "upper": _finite_or_none(elo(upper[i])),
            "bound": side[i],
            "unbounded_replicates": int(np.sum(~np.isfinite(boot[:, i]))),
            "bt_win_rate": _finite_or_none(100.0 / (1.0 + math.exp(-theta[i])))
            if math.isfinite(theta[i])
            else None,
            "bt_win_rate_lower": float(100.0 / (1.0 + np.exp(-lower[i]))),
            "bt_win_rate_upper": float(100.0 / (1.0 + np.exp(-upper[i]))),
            "win_rate": _finite_or_none(rates["rate"][i]),
            "win_rate_lower": _finite_or_none(rates["lower"][i]),
            "win_rate_upper": _finite_or_none(rates["upper"][i]),
            "win_rate_bound": rates["side"][i],
            **{name: int(values[i]) for name, values in counts.items()},
            "rank": None
            if not identified or np.isnan(order[i])
            else int(1 + np.sum(order > order[i] + 1e-9)),
            "baseline": i == base,
        }
        if length is not None:
            row.update(_length_row(length, i, rates, base))
        rows.append(row)
    position = {systems[i]: (np.isnan(order[i]), -np.nan_to_num(order[i], nan=0.0))
                for i in range(len(systems))}  # fmt: skip
    rows.sort(key=lambda row: (*position[row["system"]], row["system"]))
    style = {}
    if covariates is not None:
        coef = estimate[len(others) :]
        low, high = interval(coef, replicates[:, len(others) :], options.confidence, len(asked))
        style = {
            name: {"coefficient": float(coef[k]), "lower": float(low[k]), "upper": float(high[k])}
            for k, name in enumerate(names)
        }
    summary = None
    if length is not None:
        summary = {
            "coefficients": length.coefficients, "r2_systems": length.r2_systems,
            "identified": length.identified, "sd_length_difference": length.sd_length_difference,
        }  # fmt: skip
    return Scored(rule, baseline, len(asked), rows, style, check, summary)


def _length(
    battles: Battles, games: Games, used: NDArray[np.int64], question: NDArray[np.int64],
    draws: Floats, base: int, answers: AnswerStats, options: BoardOptions,
    questions: int,
) -> LengthControl:  # fmt: skip
    """The length-controlled rates of every system against the baseline (`length`)."""
    a, b = battles.pair_a[used], battles.pair_b[used]
    meets = (a == base) | (b == base)
    flipped = (a == base)[meets]  # the baseline is identity A: the system's side is B
    pairs = used[meets]
    chars_a, chars_b = answers.chars_a[pairs], answers.chars_b[pairs]
    won, lost = games.won[pairs], games.lost[pairs]
    rows = {
        "system": np.where(flipped, b[meets], a[meets]),
        "question": question[meets],
        "won": np.where(flipped, lost, won), "lost": np.where(flipped, won, lost),
        "own": np.where(flipped, chars_b, chars_a), "other": np.where(flipped, chars_a, chars_b),
        "systems": len(battles.systems),
    }  # fmt: skip
    return length_controlled(rows, draws, options.confidence, questions)


def _length_row(length: LengthControl, i: int, rates: dict[str, Any], base: int) -> dict[str, Any]:
    """A system's length-controlled rate: 50 for the baseline; a system that won (lost) no
    game against it shows the plain win rate's bound."""
    if i == base:
        return {"lc_win_rate": 50.0, "lc_lower": 50.0, "lc_upper": 50.0, "lc_bound": None}
    side = rates["side"][i]
    if side is not None:
        return {"lc_win_rate": _finite_or_none(rates["rate"][i]),
                "lc_lower": _finite_or_none(rates["lower"][i]),
                "lc_upper": _finite_or_none(rates["upper"][i]), "lc_bound": side}  # fmt: skip
    return {
        "lc_win_rate": _finite_or_none(length.rate[i]),
        "lc_lower": _finite_or_none(length.lower[i]),
        "lc_upper": _finite_or_none(length.upper[i]),
        "lc_bound": None,
    }


def _win_rates(
    battles: Battles,
    games: Games,
    used: NDArray[np.int64],
    question: NDArray[np.int64],
    draws: Floats,
    base: int,
    confidence: float,
) -> dict[str, Any]:
    """Each system's observed win rate against the baseline (percent, the baseline 50), its
    interval (`intervals`, on the log-odds of the rate), the questions it met the baseline
    on (`met`) and, for one that won (lost) no game against it, the one-sided bound in its
    place (`side`, `bound`); NaN for a system that never met the baseline."""
    a, b = battles.pair_a[used], battles.pair_b[used]
    size = len(battles.systems)
    won = np.zeros((draws.shape[1], size))
    played = np.zeros((draws.shape[1], size))
    for side, other, share in ((a, b, games.won[used]), (b, a, games.lost[used])):
        meets = other == base
        np.add.at(won, (question[meets], side[meets]), share[meets])
        np.add.at(played, (question[meets], side[meets]), (games.won + games.lost)[used][meets])
    met = (played > 0).sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        share = won.sum(axis=0) / played.sum(axis=0)
        boot = (draws @ won) / (draws @ played)
        low, high = interval(
            np.log(share / (1 - share)), np.log(boot / (1 - boot)), confidence, draws.shape[1]
        )
    lower, upper = 100.0 / (1.0 + np.exp(-low)), 100.0 / (1.0 + np.exp(-high))
    rate = 100.0 * share
    bound = 100.0 * no_win_bound(met, confidence)
    sides: list[str | None] = [None] * size
    for i in range(size):
        if i == base or met[i] == 0:
            continue
        if share[i] == 0:
            sides[i], lower[i], upper[i], bound[i] = "upper", np.nan, bound[i], bound[i]
        elif share[i] == 1:
            sides[i], lower[i], upper[i], bound[i] = "lower", 100 - bound[i], np.nan, 100 - bound[i]
    for values in (rate, lower, upper):
        values[base] = 50.0
    bounded = np.array([side is not None for side in sides])
    rate = np.where(bounded, bound, rate)
    return {"rate": rate, "lower": lower, "upper": upper, "met": met, "side": sides,
            "bound": bound}  # fmt: skip


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
