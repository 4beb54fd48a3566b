"""The replay's money columns: expected USD per pair, design and policy, exactly.

A policy's expected money on a pair is the sum over the pair's 2K calls of P(the call is
sent under the design and policy) x the call's own cost, so each call (and each couple of
paired unanimity) is priced by its own tokens. The send probabilities are exact fractions:

- `full`: a call is sent when the assignment puts it in the reference;
- `nonstrict`, `strict`: given the assignment, the K reference calls run in a uniformly
  random order; calls of one class (A, B, other) are exchangeable, so a call of class x is
  sent with probability E[x calls executed] / #x, from the same dynamic programme over the
  counts drawn so far as `tasks.replay.policies`;
- `paired_unanimity`: the first couple is a uniformly random (AB call, BA call); every call
  is sent unless the couple stops and the call is not in it.

Each is averaged over the design's assignments (`tasks.replay.designs.assignments`).
"""

from __future__ import annotations

from fractions import Fraction
from functools import lru_cache

import numpy as np
import pyarrow as pa

from tasks.replay.designs import assignments
from tasks.replay.grid import ReplayGrid

__all__ = ["MONEY_KEYS", "Prices", "pair_usd", "send_probabilities", "summary_usd"]

MONEY_KEYS = ("judge", "config", "dataset", "pair_id", "seed", "order")
"""The columns of a costs table besides `usd`: one row per call of the replay input."""

_A, _B, _O = 0, 1, 2
_ORDERS = ("AB", "BA")


@lru_cache(maxsize=4096)
def _executed(k: int, a: int, b: int, strict: bool) -> tuple[Fraction, Fraction, Fraction]:
    """E[calls executed] of class A, B and other, sequential stopping over a random order."""
    counts = (a, b, k - a - b)
    frontier = {(0, 0, 0): Fraction(1)}
    executed = [Fraction(0)] * 3
    for t in range(1, k + 1):
        following: dict[tuple[int, int, int], Fraction] = {}
        for drawn, p in frontier.items():
            for x in range(3):
                left = counts[x] - drawn[x]
                if left == 0:
                    continue
                q = p * Fraction(left, k - t + 1)
                executed[x] += q
                state = (drawn[0] + (x == 0), drawn[1] + (x == 1), drawn[2] + (x == 2))
                margin = abs(state[0] - state[1])
                stop = margin > k - t if strict else margin >= k - t
                if not stop and t < k:
                    following[state] = following.get(state, Fraction(0)) + q
        frontier = following
    return executed[0], executed[1], executed[2]


def _reference_probs(cls: tuple[int, ...], policy: str) -> list[Fraction]:
    """P(sent) of each of the K reference calls (classes `cls`, AB calls first for PU)."""
    k = len(cls)
    if policy == "full":
        return [Fraction(1)] * k
    if policy in ("nonstrict", "strict"):
        counts = [cls.count(x) for x in range(3)]
        ex = _executed(k, counts[0], counts[1], policy == "strict")
        return [ex[c] / counts[c] for c in cls]
    raise ValueError(policy)


@lru_cache(maxsize=65536)
def send_probabilities(
    pattern: tuple[tuple[int, int], ...], design: str, policy: str
) -> tuple[tuple[Fraction, Fraction], ...]:
    """P(each call is sent), per (seed, order) of a pattern of classes (0 A, 1 B, 2 other)."""
    k = len(pattern)
    rows = assignments(design, k)
    probs = [[Fraction(0), Fraction(0)] for _ in range(k)]
    for row in rows:
        orders = [int(o) for o in row]
        if policy == "paired_unanimity":
            sent = _pu_probs(pattern, orders)
        else:
            ref = _reference_probs(tuple(pattern[s][orders[s]] for s in range(k)), policy)
            sent = {(s, orders[s]): ref[s] for s in range(k)}
        for (s, o), p in sent.items():
            probs[s][o] += p / len(rows)
    return tuple((p[0], p[1]) for p in probs)


def _pu_probs(
    pattern: tuple[tuple[int, int], ...], orders: list[int]
) -> dict[tuple[int, int], Fraction]:
    """P(sent) of each reference call under paired unanimity, for one balanced assignment."""
    ab = [(s, 0) for s, o in enumerate(orders) if o == 0]
    ba = [(s, 1) for s, o in enumerate(orders) if o == 1]
    couples = [(x, y) for x in ab for y in ba]
    out: dict[tuple[int, int], Fraction] = {}
    for call in ab + ba:
        stop_without = sum(
            1
            for x, y in couples
            if call not in (x, y) and pattern[x[0]][0] == pattern[y[0]][1] != _O
        )
        out[call] = 1 - Fraction(stop_without, len(couples))
    return out


class Prices:
    """Each call's price by group, then by (pair_id, seed, order index), from a costs table
    (`MONEY_KEYS` and `usd`); None for a call without a price."""

    def __init__(self, costs: pa.Table | None):
        self.groups: dict[tuple[str, str, str], dict[tuple[str, int, int], float | None]] = {}
        if costs is None:
            return
        for r in costs.select([*MONEY_KEYS, "usd"]).to_pylist():
            calls = self.groups.setdefault((r["judge"], r["config"], r["dataset"]), {})
            calls[(r["pair_id"], r["seed"], _ORDERS.index(r["order"]))] = r["usd"]


def pair_usd(grid: ReplayGrid, prices: Prices, combos: list[tuple[str, str]]) -> list[pa.Array]:
    """Per (design, policy) of `combos`, the expected USD of each pair of a one-group grid;
    null for a pair with a call without a price."""
    n = len(grid.pair_ids)
    calls = prices.groups.get(grid.name)
    if calls is None:
        nulls = pa.nulls(n, pa.float64())
        return [nulls] * len(combos)
    values: list[list[float | None]] = [[] for _ in combos]
    classes = np.minimum(grid.classes, _O).tolist()  # ties count as other calls here
    for pair_id, cells in zip(grid.pair_ids.to_pylist(), classes, strict=True):
        usd = [[calls.get((pair_id, s, o)) for o in (0, 1)] for s in range(len(cells))]
        if any(u is None for row in usd for u in row):
            for column in values:
                column.append(None)
            continue
        pattern = tuple((row[0], row[1]) for row in cells)
        for column, (design, policy) in zip(values, combos, strict=True):
            probs = send_probabilities(pattern, design, policy)
            column.append(
                float(
                    sum(
                        probs[s][o] * Fraction(usd[s][o] or 0)
                        for s in range(len(cells))
                        for o in (0, 1)
                    )
                )
            )
    return [pa.array(column, pa.float64()) for column in values]


def summary_usd(summary: pa.Table, usd: list[pa.Array], combos: list[tuple[str, str]]) -> pa.Table:
    """A one-group summary (a row per combo) with its mean expected USD per pair and the share
    of the full policy's USD it saves (same design); null where a pair has no price."""
    means: dict[tuple[str, str], float | None] = {}
    for values, combo in zip(usd, combos, strict=True):
        ok = len(values) and not values.null_count
        means[combo] = float(np.mean(values.to_numpy())) if ok else None
    exp: list[float | None] = []
    save: list[float | None] = []
    for design, policy in zip(
        summary["design"].to_pylist(), summary["policy"].to_pylist(), strict=True
    ):
        value, base = means[(design, policy)], means.get((design, "full"))
        exp.append(value)
        save.append(None if value is None or not base else 1.0 - value / base)
    names = summary.column_names
    summary = summary.set_column(
        names.index("expected_usd"), "expected_usd", pa.array(exp, pa.float64())
    )
    return summary.set_column(
        names.index("savings_usd"), "savings_usd", pa.array(save, pa.float64())
    )
