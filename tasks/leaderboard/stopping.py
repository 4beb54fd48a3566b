"""What early stopping does to a leaderboard, exactly, from a run's replay.

Under a (design, policy), each pair is decided once from its reference's executed calls:
A, neutral or B. The replay gives, per pair, the policy's expected score (A = 1, neutral =
0.5, B = 0: the A-score, answers pairs have no key) and how its decision moves against the
full reference (`p_neutral_to_decisive`, `p_decisive_to_neutral`); the design table gives
the reference's P(neutral). Together they give the stopped decision's distribution:

    P(neutral) = p_neutral_ref - p_neutral_to_decisive + p_decisive_to_neutral
    P(A) = expected_score - P(neutral) / 2,  P(B) = 1 - P(A) - P(neutral)

Pairs draw their assignments and call orders independently, so a system's score against
the baseline (the sum of its pairs' decision scores over its pairs with the baseline) has
the convolution of its pairs' distributions; two systems share no pair, so the probability
that a lower-ranked system ends at or above a higher one is exact: P(lower > higher) + half
P(equal), with systems ordered by their expected score under `full`. The baseline scores
exactly half. Nothing is sampled.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from tasks.leaderboard.battles import Battles

__all__ = ["stopping_effects"]


def _distribution(a: NDArray[np.float64], n: NDArray[np.float64]) -> NDArray[np.float64]:
    """The distribution of the summed score, on a grid of halves (index = 2 x score)."""
    total = np.array([1.0])
    for p_a, p_n in zip(a, n, strict=True):
        total = np.convolve(total, np.array([max(0.0, 1.0 - p_a - p_n), p_n, p_a]))
    return total


def _p_below(
    upper: NDArray[np.float64], lower: NDArray[np.float64], n_up: int, n_low: int
) -> float:
    """P(lower's share > upper's share) + half P(equal); shares are sums / pairs."""
    up = np.arange(len(upper)) / max(1, n_up)
    low = np.arange(len(lower)) / max(1, n_low)
    joint = np.outer(upper, lower)
    above = low[None, :] > up[:, None] + 1e-12
    equal = np.abs(low[None, :] - up[:, None]) <= 1e-12
    return float(joint[above].sum() + 0.5 * joint[equal].sum())


def stopping_effects(
    battles: Battles, baseline: str, replay: pd.DataFrame, design: pd.DataFrame, k: int
) -> list[dict[str, Any]]:
    """Per (design, policy) of the replay: expected calls and calls saved over the pairs,
    and for each adjacent pair of systems (by expected score under `full`) the exact
    probability that they swap."""
    base = battles.systems.index(baseline)
    sides = {}
    for pair, pair_id in enumerate(battles.pair_ids):
        a, b = battles.pair_a[pair], battles.pair_b[pair]
        if b == base:
            sides[pair_id] = (battles.systems[a], False)
        elif a == base:
            sides[pair_id] = (battles.systems[b], True)
    rows = replay[(replay["judge"] == battles.judge) & (replay["config"] == battles.config)]
    neutral = design[(design["judge"] == battles.judge) & (design["config"] == battles.config)]
    merged = rows.merge(
        neutral[["pair_id", "design", "p_neutral"]], on=["pair_id", "design"], how="left"
    )
    results = []
    ordering: list[str] | None = None
    groups = {(str(d), str(p)): g for (d, p), g in merged.groupby(["design", "policy"])}
    for design_name, policy in sorted(groups, key=lambda dp: (dp[0], dp[1] != "full", dp[1])):
        group = groups[(design_name, policy)]
        moved = group["p_decisive_to_neutral"] - group["p_neutral_to_decisive"]
        p_n = (group["p_neutral"] + moved).clip(0, 1)
        p_a = (group["expected_score"] - p_n / 2).clip(0, 1)
        frame = pd.DataFrame({"pair_id": group["pair_id"], "a": p_a, "n": p_n})
        frame = frame[frame["pair_id"].isin(sides)]
        system = frame["pair_id"].map(lambda p: sides[p][0])
        flipped = np.array([sides[p][1] for p in frame["pair_id"]], dtype=bool)
        wins = np.where(flipped, 1 - frame["a"] - frame["n"], frame["a"])
        dists: dict[str, tuple[NDArray[np.float64], int]] = {baseline: (np.array([1.0]), 0)}
        expected: dict[str, float] = {baseline: 0.5}
        for name, index in frame.groupby(system.to_numpy()).indices.items():
            dists[str(name)] = (
                _distribution(wins[index], frame["n"].to_numpy()[index]),
                len(index),
            )
            expected[str(name)] = float((wins[index] + frame["n"].to_numpy()[index] / 2).mean())
        if policy == "full" or ordering is None:
            ordering = sorted(expected, key=lambda s: (-expected[s], s))
        adjacent: list[dict[str, Any]] = []
        swaps = 0.0
        for higher, lower in zip(ordering, ordering[1:], strict=False):
            upper_d, n_up = _baseline_aware(dists[higher], higher == baseline)
            lower_d, n_low = _baseline_aware(dists[lower], lower == baseline)
            swap = _p_below(upper_d, lower_d, n_up, n_low)
            swaps += swap
            adjacent.append(
                {
                    "higher": higher,
                    "lower": lower,
                    "p_swap": swap,
                }
            )
        calls = float(group["expected_calls"].sum())
        results.append(
            {
                "design": design_name,
                "policy": policy,
                "pairs": int(len(group)),
                "expected_calls": calls,
                "calls_saved": float(k * len(group) - calls),
                "savings": float(1 - calls / (k * len(group))) if len(group) else 0.0,
                "expected_swaps": swaps,
                "adjacent": adjacent,
            }
        )
    return results


def _baseline_aware(
    dist: tuple[NDArray[np.float64], int], is_baseline: bool
) -> tuple[NDArray[np.float64], int]:
    """The baseline's share is exactly one half: a point mass at 1 of 2."""
    return (np.array([0.0, 1.0]), 1) if is_baseline else dist
