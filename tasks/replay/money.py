"""The replay's money columns: expected USD per pair, design and policy, exactly.

A policy's expected money on a pair is the sum over the pair's 2K calls of P(the call is
sent under the design and policy) x the call's own cost, so each call (and each couple of the
paired policies) is priced by its own tokens. Seeds of one couple type are alike under every
design and policy (docs/design.md#exactness), so a call's P(sent) depends only on its pair's
pattern (`tasks.replay.couples`), its seed's couple type and its order. It is

    P(sent) = P(the seed takes the call's order) x E[P(sent | assignment) | it does],

the first factor 1/2 under every design. Given the assignment, a call is sent:

- `full`: always;
- `nonstrict`, `strict`: calls of one class (A, B, other) are exchangeable in the random call
  order, so with probability E[calls of its class executed] / (calls of its class)
  (`tasks.replay.policies.run_laws`);
- the paired policies: if it is in the first m couples, or if they do not stop and it runs
  under the rule's boundary (`tasks.replay.family.paired_table`).

Once the seed's order is fixed, the other K - 1 seeds follow the design (all in the same order
for `common`, free coins for `independent`, K/2 - 1 or K/2 more in `AB` for `balanced`), so the
expectation is over the states of the rest of the pattern with the call added
(`tasks.replay.states`). A pair's USD is then the sum of its 2K calls' probabilities x prices in
64-bit floats, for all pairs of a group at once.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tasks.replay.couples import THREE, couple_counts, pack, unpack
from tasks.replay.family import PAIRED, paired_table, side_counts
from tasks.replay.grid import ReplayGrid, dense_codes
from tasks.replay.policies import run_laws
from tasks.replay.states import independent_expectation, side_expectation
from tasks.runs.folder import is_run_id
from tasks.storage import read_parquet
from tasks.store.workdir import WorkDir

__all__ = ["MONEY_KEYS", "Prices", "outcome_costs", "pair_usd", "send_probabilities", "summary_usd"]

MONEY_KEYS = ("judge", "config", "dataset", "pair_id", "seed", "order")
"""The columns of a costs table besides `usd`: one row per call of the replay input."""

_ORDERS = ("AB", "BA")
_PAIRS_AT_ONCE = 1 << 18
"""Pairs priced at once (their calls' probabilities take 2K floats each)."""


@lru_cache(maxsize=64)
def _class_sent(k: int, policy: str) -> np.ndarray:
    """Shape ((K + 1)^2, 3): P(a call of class A, B, other is sent) given a reference with a A
    and b B calls (row a * (K + 1) + b) under `full` or a sequential policy (0 where the
    reference holds no call of the class)."""
    a, b = (x.ravel() for x in np.indices((k + 1, k + 1)))
    held = np.stack([a, b, k - a - b], axis=1).astype(float)
    if policy == "full":
        sent = np.ones_like(held)
    else:
        executed = run_laws(k, k, (0, 0), policy).executed.reshape(-1, 3)
        with np.errstate(invalid="ignore", divide="ignore"):
            sent = executed / held
    return np.where((held > 0) & (a + b <= k)[:, None], np.nan_to_num(sent), 0.0)


@lru_cache(maxsize=256)
def _added_table(k: int, policy: str, order: int, x: int) -> np.ndarray:
    """Shape (S1, S2, 1) over the balanced states of the other K - 1 seeds (axis 0 the AB
    side, `side_counts(K/2 - 1)` if `order` is AB else `side_counts(K/2)`; axis 1 the BA
    side): P(sent) of a call of class x in `order`, once it is added to its side."""
    half = k // 2
    sides = [side_counts(half - (order == 0)), side_counts(half - (order == 1))]
    add = np.array([x == 0, x == 1], dtype=np.int64)
    ab = sides[0][:, None, :] + (add if order == 0 else 0)
    ba = sides[1][None, :, :] + (add if order == 1 else 0)
    if policy in PAIRED:
        position = np.full((half + 1, half + 1), -1)
        full_side = side_counts(half)
        position[full_side[:, 0], full_side[:, 1]] = np.arange(len(full_side))
        sent = paired_table(k, PAIRED[policy]).sent[:, :, order, x]
        return sent[position[ab[..., 0], ab[..., 1]], position[ba[..., 0], ba[..., 1]]][..., None]
    total = ab + ba
    return _class_sent(k, policy)[total[..., 0] * (k + 1) + total[..., 1], x][..., None]


def send_table(patterns: np.ndarray, k: int, design: str, policy: str) -> np.ndarray:
    """Shape (patterns, 3, 3, 2): P(a call is sent) per pattern (P, 3, 3), couple type of its
    seed and order (0 AB, 1 BA); 0 for a type the pattern lacks."""
    out = np.zeros((len(patterns), 3, 3, 2))
    if policy == "full":
        out[:] = 0.5
        return out
    if design == "common":  # the call's order is every seed's: the reference is its column
        sent = _class_sent(k, policy)
        for order, held in enumerate((patterns.sum(axis=2), patterns.sum(axis=1))):
            state = sent[held[:, 0] * (k + 1) + held[:, 1]] / 2  # (P, class)
            out[..., order] = state[:, :, None] if order == 0 else state[:, None, :]
        return out * (patterns[..., None] > 0)
    for x in range(3):
        for y in range(3):
            has = np.flatnonzero(patterns[:, x, y] > 0)
            if not len(has):
                continue  # no pattern holds this couple type
            rest = patterns[has].copy()
            rest[:, x, y] -= 1
            for order, cls in ((0, x), (1, y)):
                if design == "independent":
                    shifted = _shifted(k, policy, cls)
                    value = independent_expectation(rest, k, shifted)
                else:
                    table = _added_table(k, policy, order, cls)
                    value = side_expectation(rest, k, k // 2 - (order == 0), table)
                out[has, x, y, order] = value[:, 0] / 2
    return out


@lru_cache(maxsize=64)
def _shifted(k: int, policy: str, x: int) -> np.ndarray:
    """Shape ((K + 1)^2, 1): over the (a, b) of the other K - 1 seeds, P(sent) of a call of
    class x once it is added to them."""
    a, b = (v.ravel() for v in np.indices((k + 1, k + 1)))
    a2, b2 = a + (x == 0), b + (x == 1)
    ok = a2 + b2 <= k
    index = np.where(ok, a2 * (k + 1) + b2, 0)
    return np.where(ok, _class_sent(k, policy)[index, x], 0.0)[:, None]


def send_probabilities(
    pattern: tuple[tuple[int, int], ...], design: str, policy: str
) -> tuple[tuple[float, float], ...]:
    """P(each call is sent), per (seed, order) of a pattern of classes (0 A, 1 B, 2 other)."""
    k = len(pattern)
    counts = np.zeros((1, 3, 3), dtype=np.int64)
    for x, y in pattern:
        counts[0, x, y] += 1
    table = send_table(counts, k, design, policy)[0]
    return tuple((float(table[x, y, 0]), float(table[x, y, 1])) for x, y in pattern)


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


def pair_usd(grid: ReplayGrid, prices: Prices, combos: list[tuple[str, str]]) -> list[pa.Array]:
    """Per (design, policy) of `combos`, the expected USD of each pair of a one-group grid:
    the sum over its calls of the exact P(sent) x the call's price; null for a pair with a
    call without a price."""
    n, k = len(grid.pair_ids), grid.k
    usd = prices.grid(grid)
    if usd is None:
        return [pa.nulls(n, pa.float64())] * len(combos)
    inverse, codes = dense_codes(pack(couple_counts(grid.classes), k), (k + 1) ** 9)
    patterns = unpack(codes, k)
    three = THREE[grid.classes]
    types = three[:, :, 0].astype(np.intp) * 3 + three[:, :, 1]  # (pairs, K)
    missing = np.isnan(usd).any(axis=(1, 2))
    priced = np.nan_to_num(usd)
    out = []
    for combo in combos:
        table = send_table(patterns, k, *combo).reshape(len(patterns), 9, 2)
        values = np.empty(n)
        for lo in range(0, n, _PAIRS_AT_ONCE):
            part = slice(lo, lo + _PAIRS_AT_ONCE)
            probs = table[inverse[part, None], types[part]]  # (pairs, K, 2)
            values[part] = np.einsum("pks,pks->p", probs, priced[part])
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


def outcome_costs(outcomes_path: str | Path) -> pa.Table | None:
    """Each call's price (`MONEY_KEYS` + `usd`, `tasks.judging.spend.reply_usd`) for a run's
    `outcomes.parquet`; None unless the file sits in a run folder whose judges have prices.

    A call costs what its stored reply's tokens cost, cached or not: the replay prices what
    each policy would send. Only a run's outcomes are priced, so the judging modules (and
    what they import) load for those alone.
    """
    path = Path(outcomes_path).resolve()
    run_dir = path.parent
    in_a_run = run_dir.parent.name == "runs" and is_run_id(run_dir.name)
    if not in_a_run or not (run_dir / "run.json").is_file():
        return None
    from tasks.judging.cache import read_replies
    from tasks.judging.spend import reply_usd, run_prices

    work = WorkDir.at(run_dir.parent.parent)
    prices = run_prices(work, run_dir.name)
    if not any(prices.values()):
        return None
    keys = [*MONEY_KEYS, "call_key"]
    rows = read_parquet(path, columns=keys).to_pylist()
    replies = {
        r["call_key"]: r
        for r in read_replies(work, {r["call_key"] for r in rows if r["call_key"]}).to_pylist()
    }
    out = []
    for r in rows:
        price, reply = prices.get(r["judge"]), replies.get(r["call_key"])
        usd = None if price is None or reply is None else reply_usd(price, reply)
        out.append({**{k: r[k] for k in MONEY_KEYS}, "usd": usd})
    return pa.Table.from_pylist(out)
