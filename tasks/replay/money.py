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

__all__ = ["MONEY_KEYS", "add_money", "send_probabilities"]

MONEY_KEYS = ("judge", "config", "dataset", "pair_id", "seed", "order")
"""The columns of a costs table besides `usd`: one row per call of the replay input."""

_A, _B, _O = 0, 1, 2


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


def _classes(outcome: str) -> int:
    return _A if outcome == "A" else _B if outcome == "B" else _O


def add_money(
    outcomes: pa.Table, costs: pa.Table | None, replay: pa.Table, summary: pa.Table
) -> tuple[pa.Table, pa.Table]:
    """The replay and summary tables with their money columns filled from `costs`.

    `costs` has `MONEY_KEYS` and `usd` (a call's list price) per call of `outcomes`; with
    None (or a call without a price) the money columns stay null.
    """
    n_rep, n_sum = replay.num_rows, summary.num_rows
    if costs is None:
        return _set(replay, "expected_usd", pa.nulls(n_rep, pa.float64())), summary
    usd = {tuple(r[c] for c in MONEY_KEYS): r["usd"] for r in costs.to_pylist()}
    pairs: dict[tuple[str, ...], dict[tuple[int, str], tuple[int, float | None]]] = {}
    for r in outcomes.select([*MONEY_KEYS, "outcome"]).to_pylist():
        cell = (r["seed"], r["order"])
        key = tuple(r[c] for c in MONEY_KEYS)
        pairs.setdefault(key[:4], {})[cell] = (_classes(r["outcome"]), usd.get(key))
    values: list[float | None] = []
    cols = ["judge", "config", "dataset", "pair_id", "design", "policy"]
    for r in replay.select(cols).to_pylist():
        cells = pairs[(r["judge"], r["config"], r["dataset"], r["pair_id"])]
        k = len(cells) // 2
        grid = [[cells[(s, o)] for o in ("AB", "BA")] for s in range(k)]
        if any(c[1] is None for row in grid for c in row):
            values.append(None)
            continue
        pattern = tuple((row[0][0], row[1][0]) for row in grid)
        probs = send_probabilities(pattern, r["design"], r["policy"])
        values.append(
            float(sum(probs[s][o] * Fraction(grid[s][o][1] or 0) for s in range(k) for o in (0, 1)))
        )
    replay = _set(replay, "expected_usd", pa.array(values, pa.float64()))
    return replay, _summary_money(replay, summary, n_sum)


def _summary_money(replay: pa.Table, summary: pa.Table, n: int) -> pa.Table:
    """Per group, design and policy: mean expected USD per pair, and the share of the full
    policy's USD it saves."""
    import pandas as pd

    df = replay.select(
        ["judge", "config", "dataset", "design", "policy", "expected_usd"]
    ).to_pandas()
    keys = ["judge", "config", "dataset", "design", "policy"]
    means = df.groupby(keys, dropna=False)["expected_usd"].mean(numeric_only=True)
    counts = df.groupby(keys)["expected_usd"].count()
    sizes = df.groupby(keys).size()
    means[counts < sizes] = np.nan  # a pair without a price: no group figure
    exp: list[float | None] = []
    save: list[float | None] = []
    for r in summary.select(keys).to_pylist():
        at = tuple(r[c] for c in keys)
        full = tuple(r[c] for c in keys[:4]) + ("full",)
        value = means.get(at)
        base = means.get(full)
        ok = value is not None and not pd.isna(value)
        exp.append(float(value) if ok else None)
        okb = ok and base is not None and not pd.isna(base) and base > 0
        save.append(1.0 - float(value) / float(base) if okb else None)
    summary = _set(summary, "expected_usd", pa.array(exp, pa.float64()))
    return _set(summary, "savings_usd", pa.array(save, pa.float64()))


def _set(table: pa.Table, name: str, values: pa.Array) -> pa.Table:
    """`table` with column `name` set to `values` (appended if absent)."""
    if name in table.column_names:
        return table.set_column(table.column_names.index(name), name, values)
    return table.append_column(name, values)
