"""The replay's money columns against a literal enumeration of every random choice."""

from __future__ import annotations

import itertools
import random
from fractions import Fraction
from typing import Any

import pyarrow as pa
import pytest
from replay_literal import executed_shares

from tasks.replay.engine import replay
from tasks.replay.family import PAIRED, paired_table, side_counts
from tasks.replay.money import MONEY_KEYS

ORDERS = ("AB", "BA")


def _assignments(design: str, k: int) -> list[tuple[int, ...]]:
    every = list(itertools.product((0, 1), repeat=k))
    if design == "common":
        return [(0,) * k, (1,) * k]
    if design == "balanced":
        return [a for a in every if sum(a) == k // 2]
    return every


def _sequential(outs: list[str], costs: list[Fraction], strict: bool) -> Fraction:
    """Mean cost of the calls executed, over every call order."""
    k = len(outs)
    total, n = Fraction(0), 0
    for perm in itertools.permutations(range(k)):
        a = b = 0
        spent = Fraction(0)
        for t, i in enumerate(perm, start=1):
            spent += costs[i]
            a += outs[i] == "A"
            b += outs[i] == "B"
            margin = abs(a - b)
            if (margin > k - t) if strict else (margin >= k - t):
                break
        total += spent
        n += 1
    return total / n


def _paired(cells: list[tuple[int, int]], outs: dict, costs: dict) -> Fraction:
    """Mean cost over every perfect matching of AB to BA calls and every couple order."""
    ab = [c for c in cells if c[1] == 0]
    ba = [c for c in cells if c[1] == 1]
    total, n = Fraction(0), 0
    for match in itertools.permutations(ba):
        couples = list(zip(ab, match, strict=True))
        for first in couples:  # the couple order matters only through its first couple
            x, y = first
            if outs[x] == outs[y] and outs[x] in ("A", "B"):
                total += costs[x] + costs[y]
            else:
                total += sum(costs[c] for c in cells)
            n += 1
    return total / n


def _literal(design: str, policy: str, outs: dict, costs: dict, k: int) -> Fraction:
    values = []
    for a in _assignments(design, k):
        cells = [(s, a[s]) for s in range(k)]
        if policy == "full":
            values.append(sum(costs[c] for c in cells))
        elif policy == "paired_unanimity":
            values.append(_paired(cells, outs, costs))
        else:
            values.append(
                _sequential([outs[c] for c in cells], [costs[c] for c in cells], policy == "strict")
            )
    return sum(values, Fraction(0)) / len(values)


@pytest.mark.parametrize("k", [2, 4])
def test_money_columns_equal_a_literal_enumeration(k: int) -> None:
    rng = random.Random(k)
    rows, cost_rows, truth = [], [], {}
    for p in range(12):
        outs = {(s, o): rng.choice("AABBTM") for s in range(k) for o in (0, 1)}
        costs = {c: Fraction(rng.randint(1, 9), 10_000) for c in outs}
        pair = f"p{p}"
        for (s, o), out in outs.items():
            base = {"judge": "j", "config": "c", "dataset": "d", "pair_id": pair, "seed": s}
            rows.append({**base, "order": ORDERS[o], "outcome": out, "key": "A"})
            cost_rows.append({**base, "order": ORDERS[o], "usd": float(costs[(s, o)])})
        truth[pair] = (outs, costs)
    costs_table = pa.Table.from_pylist(cost_rows)
    assert set(MONEY_KEYS) < set(costs_table.column_names)
    result = replay(pa.Table.from_pylist(rows), costs=costs_table)
    checked = 0
    for r in result.replay.to_pylist():
        outs, costs = truth[r["pair_id"]]
        want = _literal(r["design"], r["policy"], outs, costs, k)
        assert r["expected_usd"] == pytest.approx(float(want), rel=1e-12, abs=1e-15)
        checked += 1
    assert checked == 12 * 10
    # The summary: the mean per pair, and the share of the full policy's USD saved.
    by = {}
    for r in result.replay.to_pylist():
        by.setdefault((r["design"], r["policy"]), []).append(r["expected_usd"])
    for s in result.summary.to_pylist():
        mean = sum(by[(s["design"], s["policy"])]) / 12
        full = sum(by[(s["design"], "full")]) / 12
        assert s["expected_usd"] == pytest.approx(mean, rel=1e-12)
        assert s["savings_usd"] == pytest.approx(1 - mean / full, rel=1e-9, abs=1e-12)


def test_without_costs_the_money_columns_are_null() -> None:
    rows = [
        {"judge": "j", "config": "c", "dataset": "d", "pair_id": "p", "seed": s,
         "order": o, "outcome": "A", "key": "A"}
        for s in range(2) for o in ORDERS
    ]  # fmt: skip
    result = replay(pa.Table.from_pylist(rows))
    assert set(result.replay.column("expected_usd").to_pylist()) == {None}
    assert set(result.summary.column("savings_usd").to_pylist()) == {None}


def test_a_call_without_a_cost_row_leaves_its_pair_and_group_unpriced() -> None:
    rows = [
        {"judge": judge, "config": "c", "dataset": "d", "pair_id": pair, "seed": s,
         "order": o, "outcome": "AB"[s % 2], "key": "A"}
        for judge in ("j1", "j2") for pair in ("p1", "p2") for s in range(2) for o in ORDERS
    ]  # fmt: skip
    costs = pa.Table.from_pylist(
        [
            {**{k: r[k] for k in MONEY_KEYS}, "usd": 0.01}
            for r in rows
            if r["judge"] == "j1" and not (r["pair_id"] == "p2" and r["seed"] == 1)
        ]
    )
    result = replay(pa.Table.from_pylist(rows), costs=costs).replay.to_pylist()
    priced = {(r["judge"], r["pair_id"]) for r in result if r["expected_usd"] is not None}
    assert priced == {("j1", "p1")}
    full = [
        r for r in result if r["pair_id"] == "p1" and r["judge"] == "j1" and r["policy"] == "full"
    ]
    assert [r["expected_usd"] for r in full] == pytest.approx([0.02] * len(full))


def _paired_rule(
    cells: list[tuple[int, int]], outs: dict, costs: dict, couples: int, boundary: str | None
) -> Fraction:
    """Mean cost over every matching, couple order and order of the calls left: the first
    `couples` couples run; unless all their calls are decisive and equal or they meet the
    boundary already, the rest run under `boundary` (None: all of them)."""
    k = len(cells)
    ab = [c for c in cells if c[1] == 0]
    ba = [c for c in cells if c[1] == 1]
    total, n = Fraction(0), 0
    for match in itertools.permutations(ba):
        for order in itertools.permutations(list(zip(ab, match, strict=True))):
            start = [c for couple in order[:couples] for c in couple]
            spent = sum((costs[c] for c in start), Fraction(0))
            votes = [outs[c] for c in start]
            margin, left = abs(votes.count("A") - votes.count("B")), k - len(votes)
            if (
                votes.count("A") == len(votes)
                or votes.count("B") == len(votes)
                or (boundary == "strict" and margin > left)
                or (boundary == "nonstrict" and margin >= left)
            ):  # unanimous, or the boundary met right after the start
                total, n = total + spent, n + 1
                continue
            rest = [c for c in cells if c not in start]
            perms = list(itertools.permutations(rest))
            for perm in perms:  # each order of the rest weighs 1 / len(perms) of this start
                a, b, more = votes.count("A"), votes.count("B"), spent
                for t, c in enumerate(perm, start=len(start) + 1):
                    more += costs[c]
                    a, b = a + (outs[c] == "A"), b + (outs[c] == "B")
                    margin = abs(a - b)
                    if boundary == "strict" and margin > k - t:
                        break
                    if boundary == "nonstrict" and margin >= k - t:
                        break
                total += more / len(perms)
            n += 1
    return total / n


FAMILY = {"paired_unanimity": (1, None), "paired_nonstrict": (1, "nonstrict"),
          "paired_strict": (1, "strict"), "paired_unanimity_2": (2, "strict")}  # fmt: skip


def _priced_grid(
    rng: random.Random, k: int, leans: list[str]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    """A full grid with a random outcome (drawn from the pair's `leans` letters) and a random
    price for every call: the calls' rows, their costs' rows, and each pair's truth."""
    rows, cost_rows, truth = [], [], {}
    for p, lean in enumerate(leans):
        outs = {(s, o): rng.choice(lean) for s in range(k) for o in (0, 1)}
        costs = {c: Fraction(rng.randint(1, 9), 10_000) for c in outs}
        for (s, o), out in outs.items():
            base = {"judge": "j", "config": "c", "dataset": "d", "pair_id": f"p{p}", "seed": s}
            rows.append({**base, "order": ORDERS[o], "outcome": out, "key": "A"})
            cost_rows.append({**base, "order": ORDERS[o], "usd": float(costs[(s, o)])})
        truth[f"p{p}"] = (outs, costs)
    return rows, cost_rows, truth


@pytest.mark.parametrize(("k", "pairs"), [(2, 8), (4, 8), (6, 3)])
def test_paired_money_equals_a_literal_enumeration(k: int, pairs: int) -> None:
    rows, cost_rows, truth = _priced_grid(random.Random(100 + k), k, ["AABBTMIX"] * pairs)
    result = replay(
        pa.Table.from_pylist(rows), designs=["balanced"], policies=["full", *FAMILY],
        costs=pa.Table.from_pylist(cost_rows),
    )  # fmt: skip
    checked = 0
    for r in result.replay.to_pylist():
        if r["policy"] not in FAMILY:
            continue
        outs, costs = truth[r["pair_id"]]
        values = [
            _paired_rule([(s, a[s]) for s in range(k)], outs, costs, *FAMILY[r["policy"]])
            for a in _assignments("balanced", k)
        ]
        want = sum(values, Fraction(0)) / len(values)
        assert r["expected_usd"] == pytest.approx(float(want), rel=1e-12, abs=1e-15), r
        checked += 1
    assert checked == pairs * len(FAMILY)


def _assignment_usd(
    k: int, policy: str, cells: list[tuple[int, int]], outs: dict, costs: dict
) -> Fraction:
    """Expected USD of one assignment's reference calls `cells`: a call is sent with the
    chance E[calls with its outcome executed] / (calls with it) over every order of the calls
    for the sequential policies (calls with one outcome are exchangeable), every time under
    `full`; under a paired policy with the chance `paired_table` gives a call of its side and
    class on that split of counts (the per-assignment rule the tests above check literally)."""
    if policy == "full":
        return sum((costs[c] for c in cells), Fraction(0))
    if policy in FAMILY:
        side = side_counts(k // 2)
        position = {tuple(s): i for i, s in enumerate(side.tolist())}
        klass = {"A": 0, "B": 1}
        held = [[outs[c] for c in cells if c[1] == o] for o in (0, 1)]
        state = [position[(h.count("A"), h.count("B"))] for h in held]
        sent = paired_table(k, PAIRED[policy]).sent[state[0], state[1]]
        return sum(
            (costs[c] * Fraction(sent[c[1], klass.get(outs[c], 2)]) for c in cells), Fraction(0)
        )
    shares = executed_shares(tuple(outs[c] for c in cells), policy)
    return sum((costs[c] * shares[outs[c]] for c in cells), Fraction(0))


@pytest.mark.slow
@pytest.mark.parametrize(("k", "pairs"), [(8, 2), (10, 2), (12, 1)])
def test_money_at_larger_k_equals_every_assignment(k: int, pairs: int) -> None:
    """Every design's assignments enumerated one by one at K = 8, 10 and 12."""
    leans = ["AABBT", "AB"][:pairs]
    rows, cost_rows, truth = _priced_grid(random.Random(200 + k), k, leans)
    result = replay(
        pa.Table.from_pylist(rows), policies=["full", "nonstrict", "strict", *FAMILY],
        costs=pa.Table.from_pylist(cost_rows),
    )  # fmt: skip
    checked = 0
    for r in result.replay.to_pylist():
        outs, costs = truth[r["pair_id"]]
        every = _assignments(r["design"], k)
        values = [
            _assignment_usd(k, r["policy"], [(s, a[s]) for s in range(k)], outs, costs)
            for a in every
        ]
        want = sum(values, Fraction(0)) / len(every)
        assert r["expected_usd"] == pytest.approx(float(want), rel=1e-12, abs=1e-15), r
        checked += 1
    assert checked == pairs * (3 * 3 + len(FAMILY))
