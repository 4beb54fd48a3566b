"""The replay's money columns: expected USD per pair, design and policy, exactly.

A policy's expected money on a pair is the sum over the pair's 2K calls of P(the call is
sent under the design and policy) x the call's own cost, so each call (and each couple of
paired unanimity) is priced by its own tokens. The send probabilities are exact fractions:

- `full`: a call is sent when the assignment puts it in the reference;
- `nonstrict`, `strict`: given the assignment, the K reference calls run in a uniformly
  random order; calls of one class (A, B, other) are exchangeable, so a call of class x is
  sent with probability E[x calls executed] / #x, from the same dynamic programme over the
  counts drawn so far as `tasks.replay.policies`;
- the paired policies (`paired_unanimity` and the family of `tasks.replay.family`): the first
  m couples are uniform m-subsets of each side's calls; a call is sent if it is in them, or if
  they do not stop and it runs under the rule's boundary (exchangeable within its class).

Each is averaged over the design's assignments (`tasks.replay.designs.assignments`), once
per distinct grid up to the order of seeds; a pair's USD is then the sum of its 2K calls'
exact probabilities x prices in 64-bit floats, for all pairs of a group at once.
"""

from __future__ import annotations

from fractions import Fraction
from functools import lru_cache

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tasks.replay.designs import assignments
from tasks.replay.family import PAIRED_RULES, PairedRule, side_draws, start_stops
from tasks.replay.grid import ReplayGrid, dense_codes
from tasks.replay.policies import boundary_stops

__all__ = ["MONEY_KEYS", "Prices", "pair_usd", "send_probabilities", "summary_usd"]

MONEY_KEYS = ("judge", "config", "dataset", "pair_id", "seed", "order")
"""The columns of a costs table besides `usd`: one row per call of the replay input."""

_A, _B, _O = 0, 1, 2
_ORDERS = ("AB", "BA")
_PAIRED = {"paired_unanimity": PairedRule(couples=1, boundary=None), **PAIRED_RULES}
"""Every paired policy as a rule: paired unanimity is one couple, then every call."""


@lru_cache(maxsize=4096)
def _executed(
    k: int, rest: tuple[int, int, int], boundary: str | None, start: tuple[int, int] = (0, 0)
) -> tuple[Fraction, Fraction, Fraction]:
    """E[calls executed] of class A, B and other among `rest`, run in a uniformly random order
    after calls with A and B counts `start`, under `boundary` (`tasks.replay.policies`'s
    `sequential_law`: at least one call runs; None runs them all)."""
    done = k - sum(rest)
    frontier = {(0, 0, 0): Fraction(1)}
    executed = [Fraction(0)] * 3
    for t in range(done + 1, k + 1):
        following: dict[tuple[int, int, int], Fraction] = {}
        for drawn, p in frontier.items():
            for x in range(3):
                left = rest[x] - drawn[x]
                if left == 0:
                    continue
                q = p * Fraction(left, k - t + 1)
                executed[x] += q
                state = (drawn[0] + (x == 0), drawn[1] + (x == 1), drawn[2] + (x == 2))
                margin = abs(start[0] + state[0] - start[1] - state[1])
                if t < k and not boundary_stops(margin, k - t, boundary):
                    following[state] = following.get(state, Fraction(0)) + q
        frontier = following
    return executed[0], executed[1], executed[2]


def _reference_probs(cls: tuple[int, ...], policy: str) -> list[Fraction]:
    """P(sent) of each of the K reference calls (classes `cls`) under `full` or a sequential
    policy: calls of one class are exchangeable, so E[executed of its class] / its count."""
    k = len(cls)
    if policy == "full":
        return [Fraction(1)] * k
    counts = (cls.count(_A), cls.count(_B), cls.count(_O))
    ex = _executed(k, counts, policy)
    return [ex[c] / counts[c] for c in cls]


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
        if policy in _PAIRED:
            sent = _paired_probs(pattern, orders, _PAIRED[policy])
        else:
            ref = _reference_probs(tuple(pattern[s][orders[s]] for s in range(k)), policy)
            sent = {(s, orders[s]): ref[s] for s in range(k)}
        for (s, o), p in sent.items():
            probs[s][o] += p / len(rows)
    return tuple((p[0], p[1]) for p in probs)


def _paired_probs(
    pattern: tuple[tuple[int, int], ...], orders: list[int], rule: PairedRule
) -> dict[tuple[int, int], Fraction]:
    """P(sent) of each reference call under a paired rule, for one balanced assignment.

    The start is an m-subset of each side (uniform, `side_draws`); a call of class x on a
    side from which i of its c class-x calls were drawn is in the start with probability i/c.
    Unless the start stops, the calls left run in a random order under the rule's boundary,
    where each call of class x runs with probability E[class-x executed] / (class-x left).
    """
    k = len(orders)
    sides: list[list[tuple[int, int]]] = [
        [(s, o) for s in range(k) if orders[s] == o] for o in (0, 1)
    ]
    cls = {call: pattern[call[0]][call[1]] for side in sides for call in side}
    counts = [(*(sum(cls[c] == x for c in side) for x in range(3)),) for side in sides]
    m = min(rule.couples, k // 2)
    out: dict[tuple[int, int], Fraction] = dict.fromkeys(cls, Fraction(0))
    for i1, j1, p1 in side_draws(counts[0][0], counts[0][1], counts[0][2], m):
        for i2, j2, p2 in side_draws(counts[1][0], counts[1][1], counts[1][2], m):
            drawn = ((i1, j1, m - i1 - j1), (i2, j2, m - i2 - j2))
            n_a, n_b = i1 + i2, j1 + j2
            a, b, c = (counts[0][x] + counts[1][x] - drawn[0][x] - drawn[1][x] for x in range(3))
            rest = (a, b, c)
            stops = start_stops(k, rule, m, n_a, n_b) or not sum(rest)
            ex = (0, 0, 0) if stops else _executed(k, rest, rule.boundary, (n_a, n_b))
            for side, draw, count in zip(sides, drawn, counts, strict=True):
                for call in side:
                    x = cls[call]
                    start = Fraction(draw[x], count[x])
                    later = Fraction(ex[x]) / rest[x] if rest[x] else Fraction(0)
                    out[call] += p1 * p2 * (start + (1 - start) * later)
    return out


class Prices:
    """Each call's price, from a costs table (`MONEY_KEYS` and `usd`); a call without a row,
    or with a null `usd`, has no price."""

    def __init__(self, costs: pa.Table | None):
        self.costs = None if costs is None else costs.select([*MONEY_KEYS, "usd"])

    def grid(self, grid: ReplayGrid) -> np.ndarray | None:
        """Shape (pairs, K, 2): the price of each call of a one-group grid (NaN: none); None
        when the group has no priced call."""
        if self.costs is None:
            return None
        costs = self.costs
        for column, value in zip(("judge", "config", "dataset"), grid.name, strict=True):
            costs = costs.filter(pc.equal(costs[column].cast(pa.string()), value))
        pair = pc.index_in(costs["pair_id"].cast(pa.string()), value_set=grid.pair_ids)
        order = pc.index_in(costs["order"].cast(pa.string()), value_set=pa.array(_ORDERS))
        seed = costs["seed"].cast(pa.int64()).to_numpy(zero_copy_only=False)
        pair_np = pair.to_numpy(zero_copy_only=False)
        order_np = order.to_numpy(zero_copy_only=False)
        known = ~(np.isnan(pair_np) | np.isnan(order_np)) & (seed >= 0) & (seed < grid.k)
        if not known.any():
            return None
        usd = costs["usd"].cast(pa.float64()).to_numpy(zero_copy_only=False)
        cell = (pair_np[known].astype(np.int64) * grid.k + seed[known]) * 2
        prices = np.full(len(grid.pair_ids) * grid.k * 2, np.nan)
        prices[cell + order_np[known].astype(np.int64)] = usd[known]
        return prices.reshape(len(grid.pair_ids), grid.k, 2)


def _canonical_probabilities(
    pattern: tuple[int, ...], k: int, combo: tuple[str, str]
) -> np.ndarray:
    """Shape (K, 2): P(each call is sent) of a pattern (flat classes, seed by seed), from its
    couples sorted: sending is the same law with the seeds relabelled, as every design and
    policy treats the seeds alike (docs/design.md#exactness)."""
    couples = [(pattern[2 * s], pattern[2 * s + 1]) for s in range(k)]
    order = sorted(range(k), key=lambda s: couples[s])
    exact = send_probabilities(tuple(couples[s] for s in order), *combo)
    probs = np.empty((k, 2))
    for position, s in enumerate(order):
        probs[s] = [float(p) for p in exact[position]]
    return probs


def pair_usd(grid: ReplayGrid, prices: Prices, combos: list[tuple[str, str]]) -> list[pa.Array]:
    """Per (design, policy) of `combos`, the expected USD of each pair of a one-group grid:
    the sum over its calls of the exact P(sent) x the call's price; null for a pair with a
    call without a price."""
    n, k = len(grid.pair_ids), grid.k
    usd = prices.grid(grid)
    if usd is None:
        return [pa.nulls(n, pa.float64())] * len(combos)
    flat = np.minimum(grid.classes, _O).reshape(n, 2 * k)  # ties count as other calls here
    codes = (flat.astype(np.int64) * 3 ** np.arange(2 * k)).sum(axis=1)
    inverse, present = dense_codes(codes, 3 ** (2 * k))
    patterns = [tuple(int(c) // 3**i % 3 for i in range(2 * k)) for c in present.tolist()]
    missing = np.isnan(usd).any(axis=(1, 2))
    priced = np.nan_to_num(usd).reshape(n, 2 * k)
    out = []
    for combo in combos:
        probs = np.stack([_canonical_probabilities(p, k, combo) for p in patterns])
        values = np.einsum("pc,pc->p", probs.reshape(len(patterns), 2 * k)[inverse], priced)
        out.append(pa.array(values, pa.float64(), mask=missing))
    return out


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
