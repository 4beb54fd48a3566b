"""The replay engine against a slow literal reference in exact fractions (docs/design.md#exactness).

The reference enumerates every assignment of the design, every call order (all K!
permutations) and every perfect matching x pair order, and follows docs/design.md's words with no
shortcut; the engine must agree with it to 1e-12 on random outcome tables.
"""

from __future__ import annotations

import itertools
import math
import random
from collections import Counter
from fractions import Fraction

import pyarrow as pa
import pytest

from tasks.replay.engine import replay

Grid = dict[tuple[int, str], str]  # (seed, order) -> outcome code
Call = tuple[int, str, str]  # (seed, order, outcome)

DESIGNS = ("common", "independent", "balanced")
HALF = Fraction(1, 2)


def decide(outcomes: list[str]) -> str:
    n_a, n_b = outcomes.count("A"), outcomes.count("B")
    return "A" if n_a > n_b else "B" if n_b > n_a else "N"


def score(decision: str, key: str | None) -> Fraction:
    if decision == "N":
        return HALF
    return Fraction(int(decision == (key or "A")))


def design_assignments(design: str, k: int) -> list[tuple[str, ...]]:
    every = list(itertools.product(("AB", "BA"), repeat=k))
    if design == "common":
        return [("AB",) * k, ("BA",) * k]
    if design == "independent":
        return every
    return [a for a in every if a.count("AB") == k // 2]


def sequential(reference: list[Call], strict: bool) -> list[tuple[Fraction, str, int]]:
    """(probability, stopped decision, calls) over every call order of the reference."""
    k = len(reference)
    seen: Counter[tuple[str, int]] = Counter()
    for order in itertools.permutations(reference):
        executed: list[str] = []
        for t, call in enumerate(order, start=1):
            executed.append(call[2])
            margin = abs(executed.count("A") - executed.count("B"))
            if (margin > k - t) if strict else (margin >= k - t):
                break
        seen[(decide(executed), len(executed))] += 1
    return [(Fraction(n, math.factorial(k)), d, calls) for (d, calls), n in seen.items()]


def paired(reference: list[Call]) -> list[tuple[Fraction, str, int]]:
    """(probability, decision, calls) over every perfect matching of AB to BA calls and
    every order of the matched pairs."""
    k = len(reference)
    ab = [c for c in reference if c[1] == "AB"]
    ba = [c for c in reference if c[1] == "BA"]
    seen: Counter[tuple[str, int]] = Counter()
    for matched in itertools.permutations(ba):
        couples = list(zip(ab, matched, strict=True))
        for run in itertools.permutations(couples):
            first = [run[0][0][2], run[0][1][2]]
            if first[0] == first[1] and first[0] in "AB":
                seen[(first[0], 2)] += 1
            else:
                seen[(decide([c[2] for c in reference]), k)] += 1
    total = math.factorial(len(ab)) ** 2
    return [(Fraction(n, total), d, calls) for (d, calls), n in seen.items()]


def pair_reference(grid: Grid, k: int, key: str | None) -> dict[str, dict]:
    """Every metric of one pair, exactly, keyed by design then policy (or "design")."""
    out: dict[str, dict] = {}
    for design in DESIGNS:
        table = design_assignments(design, k)
        w = Fraction(1, len(table))
        design_metrics = {"expected_score": Fraction(0), "p_neutral": Fraction(0)}
        design_metrics["expected_agreement"] = Fraction(0)
        policies = ["full", "nonstrict", "strict"] + (
            ["paired_unanimity"] if design == "balanced" else []
        )
        sums = {
            p: dict.fromkeys(
                [
                    "expected_calls",
                    "p_change",
                    "p_neutral_to_decisive",
                    "p_decisive_to_neutral",
                    "p_reversal",
                    "expected_score",
                    "reference_score",
                    "added_variance",
                ],
                Fraction(0),
            )
            for p in policies
        }
        components = [Fraction(0)] * (k + (1 if design == "balanced" else 0))
        for assignment in table:
            reference = [(s, o, grid[(s, o)]) for s, o in enumerate(assignment)]
            outcomes = [c[2] for c in reference]
            full = decide(outcomes)
            design_metrics["expected_score"] += w * score(full, key)
            design_metrics["p_neutral"] += w * (full == "N")
            same = [
                outcomes[s] == outcomes[t] and outcomes[s] in "ABT"
                for s, t in itertools.combinations(range(k), 2)
            ]
            design_metrics["expected_agreement"] += w * Fraction(sum(same), len(same))
            for size in range(1, k + 1):
                subsets = list(itertools.combinations(outcomes, size))
                hit = sum(decide(list(sub)) == full for sub in subsets)
                components[size - 1] += w * Fraction(hit, len(subsets))
            if design == "balanced":
                ab = [c[2] for c in reference if c[1] == "AB"]
                ba = [c[2] for c in reference if c[1] == "BA"]
                hit = sum(decide([x, y]) == full for x in ab for y in ba)
                components[k] += w * Fraction(hit, len(ab) * len(ba))
            for policy in policies:
                if policy == "full":
                    runs: list[tuple[Fraction, str, int]] = [(Fraction(1), full, k)]
                elif policy == "paired_unanimity":
                    runs = paired(reference)
                else:
                    runs = sequential(reference, strict=policy == "strict")
                mean = sum(p * score(d, key) for p, d, _ in runs)
                row = sums[policy]
                row["expected_calls"] += w * sum(p * n for p, _, n in runs)
                row["p_change"] += w * sum(p for p, d, _ in runs if d != full)
                row["p_neutral_to_decisive"] += w * sum(
                    p for p, d, _ in runs if full == "N" and d != "N"
                )
                row["p_decisive_to_neutral"] += w * sum(
                    p for p, d, _ in runs if full != "N" and d == "N"
                )
                row["p_reversal"] += w * sum(
                    p for p, d, _ in runs if "N" not in (full, d) and d != full
                )
                row["expected_score"] += w * mean
                row["reference_score"] += w * score(full, key)
                row["added_variance"] += w * sum(
                    p * (score(d, key) - mean) ** 2 for p, d, _ in runs
                )
        out[design] = {"design": design_metrics, "components": components, **sums}
    return out


def cheapest_mixture(costs: list[int], agreements: list[Fraction], target: Fraction) -> Fraction:
    """Least cost of a mixture reaching `target`: an optimal mixture needs two components."""
    best = min((Fraction(c) for c, g in zip(costs, agreements, strict=True) if g >= target))
    for (c0, g0), (c1, g1) in itertools.permutations(zip(costs, agreements, strict=True), 2):
        if g0 < target <= g1:
            best = min(best, c0 + (target - g0) / (g1 - g0) * (c1 - c0))
    return best


def random_table(rng: random.Random, spec: list[tuple[str, int, int]]) -> tuple[pa.Table, dict]:
    """Random outcomes with all six codes; `spec` is (judge, K, pairs). Returns the table and
    the grids by (judge, pair_id)."""
    rows, grids = [], {}
    for judge, k, n in spec:
        for p in range(n):
            lean = rng.choice(["ABTXIM", "AAABTM", "BBBAXI", "AB", "ABT", "AAB"])
            key = rng.choice(["A", "B", None])
            grid = {(s, o): rng.choice(lean) for s in range(k) for o in ("AB", "BA")}
            grids[(judge, f"p{p}")] = (grid, k, key)
            cells = list(grid.items())
            rng.shuffle(cells)  # row order must not matter
            for (s, o), outcome in cells:
                rows.append(
                    {
                        "judge": judge,
                        "config": "cfg",
                        "dataset": "ds",
                        "pair_id": f"p{p}",
                        "seed": s,
                        "order": o,
                        "outcome": outcome,
                        "key": key,
                    }
                )
    return pa.Table.from_pylist(rows), grids


@pytest.mark.parametrize("seed", [1, 2])
def test_engine_matches_literal_reference(seed: int) -> None:
    rng = random.Random(seed)
    table, grids = random_table(rng, [("k2", 2, 12), ("k4", 4, 30), ("k6", 6, 2)])
    result = replay(table)
    got = {
        (r["judge"], r["pair_id"], r["design"], r["policy"]): r for r in result.replay.to_pylist()
    }
    got_design = {(r["judge"], r["pair_id"], r["design"]): r for r in result.design.to_pylist()}
    summary = {(r["judge"], r["design"], r["policy"]): r for r in result.summary.to_pylist()}
    assert len(got) == 12 * 10 + 30 * 10 + 2 * 10
    per_group: dict[tuple[str, str], list[dict]] = {}
    for (judge, pair_id), (grid, k, key) in grids.items():
        expect = pair_reference(grid, k, key)
        for design, metrics in expect.items():
            per_group.setdefault((judge, design), []).append(metrics)
            for name, value in metrics["design"].items():
                assert got_design[(judge, pair_id, design)][name] == pytest.approx(
                    float(value), abs=1e-12
                ), (judge, pair_id, design, name)
            for policy, row in metrics.items():
                if policy in ("design", "components"):
                    continue
                for name, value in row.items():
                    assert got[(judge, pair_id, design, policy)][name] == pytest.approx(
                        float(value), abs=1e-12
                    ), (judge, pair_id, design, policy, name)

    for (judge, design), pairs in per_group.items():
        k = {"k2": 2, "k4": 4, "k6": 6}[judge]
        n = len(pairs)
        n_comp = len(pairs[0]["components"])
        agreements = [sum(p["components"][i] for p in pairs) / n for i in range(n_comp)]
        costs = list(range(1, k + 1)) + ([2] if design == "balanced" else [])
        for policy in pairs[0]:
            if policy in ("design", "components"):
                continue
            row = summary[(judge, design, policy)]
            assert row["pairs"] == n
            means = {m: sum(p[policy][m] for p in pairs) / n for m in pairs[0][policy]}
            for name, value in means.items():
                assert row[name] == pytest.approx(float(value), abs=1e-12)
            assert row["savings"] == pytest.approx(
                float(1 - means["expected_calls"] / k), abs=1e-12
            )
            if policy == "full":
                assert row["match_cost"] is None and row["match_extra"] is None
                continue
            cost = cheapest_mixture(costs, agreements, 1 - means["p_change"])
            assert row["match_cost"] == pytest.approx(float(cost), abs=1e-9)
            extra = cost / means["expected_calls"] - 1
            assert row["match_extra"] == pytest.approx(float(extra), abs=1e-9)
