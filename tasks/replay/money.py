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
from tasks.replay.grid import ReplayGrid, dense_codes

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
