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
the convolution of its pairs' distributions (a product tree of batched FFT convolutions);
two systems share no pair, so the probability
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


def _distributions(wins: NDArray[np.float64], ties: NDArray[np.float64]) -> NDArray[np.float64]:
    """Per system (row; its pairs along the columns, padded with pairs that add 0 for
    sure): the distribution of its summed score on a grid of
    halves (index = 2 x score). The pairs' polynomials (1 - a - n) + n z + a z^2 are
    multiplied as a balanced tree, every system at once, each level one batched FFT
    convolution."""
    from scipy.signal import fftconvolve  # seconds to import: only where it is used

    polys = np.stack([np.clip(1.0 - wins - ties, 0.0, 1.0), ties, wins], axis=-1)
    while polys.shape[1] > 1:
        if polys.shape[1] % 2:
            unit = np.zeros((polys.shape[0], 1, polys.shape[2]))
            unit[:, :, 0] = 1.0
            polys = np.concatenate([polys, unit], axis=1)
        polys = np.clip(fftconvolve(polys[:, 0::2], polys[:, 1::2], axes=-1), 0.0, None)
    dists: NDArray[np.float64] = polys[:, 0, :]
    return dists / dists.sum(axis=1, keepdims=True)


def _p_below(
    upper: NDArray[np.float64], lower: NDArray[np.float64], n_up: int, n_low: int
) -> float:
    """P(lower's share > upper's share) + half P(equal); shares are sums / pairs."""
    up = np.arange(len(upper)) / max(1, n_up)
    low = np.arange(len(lower)) / max(1, n_low)
    before = np.concatenate([[0.0], np.cumsum(lower)])  # P(lower index < j)
    above = np.searchsorted(low, up + 1e-12, side="right")
    level = np.searchsorted(low, up - 1e-12, side="left")
    p_above = before[-1] - before[above]
    p_equal = before[above] - before[level]
    return float(np.sum(upper * (p_above + 0.5 * p_equal)))


def stopping_effects(
    battles: Battles, baseline: str, replay: pd.DataFrame, design: pd.DataFrame, k: int
) -> list[dict[str, Any]]:
    """Per (design, policy) of the replay: expected calls and calls saved over every pair
    of the config (`pairs`), and for each adjacent pair of systems (by expected score under
    `full`) the exact probability that they swap, over their pairs with the baseline only
    (`pairs_with_baseline`: under round-robin pairing the others are left out)."""
    base = battles.systems.index(baseline)
    with_base = (battles.pair_a == base) | (battles.pair_b == base)
    sides = pd.DataFrame(
        {
            "pair_id": np.asarray(battles.pair_ids)[with_base],
            "system": np.where(battles.pair_a == base, battles.pair_b, battles.pair_a)[with_base],
            "flipped": (battles.pair_a == base)[with_base],
        }
    )
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
        frame = frame.merge(sides, on="pair_id", how="inner").sort_values("system", kind="stable")
        a, n = frame["a"].to_numpy(), frame["n"].to_numpy()
        wins = np.where(frame["flipped"].to_numpy(), np.clip(1 - a - n, 0, 1), a)
        codes, first, counts = np.unique(
            frame["system"].to_numpy(), return_index=True, return_counts=True
        )
        width = int(counts.max()) if len(counts) else 0
        column = np.arange(len(frame)) - np.repeat(first, counts)
        padded_w, padded_n = np.zeros((len(codes), width)), np.zeros((len(codes), width))
        row = np.repeat(np.arange(len(codes)), counts)
        padded_w[row, column], padded_n[row, column] = wins, n
        table = _distributions(padded_w, padded_n) if width else np.ones((0, 1))
        dists: dict[str, tuple[NDArray[np.float64], int]] = {baseline: (np.array([1.0]), 0)}
        expected: dict[str, float] = {baseline: 0.5}
        for r, (code, count) in enumerate(zip(codes, counts, strict=True)):
            name = battles.systems[int(code)]
            dists[name] = (table[r, : 2 * int(count) + 1], int(count))
            expected[name] = float((padded_w[r] + padded_n[r] / 2).sum() / count)
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
                "pairs_with_baseline": int(len(frame)),
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
