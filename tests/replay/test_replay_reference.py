"""The replay engine against a slow literal reference in exact fractions (docs/design.md#exactness).

The reference (tests/replay_literal.py) enumerates every assignment of the design, every call
order and every perfect matching x couple order, and follows docs/design.md's words with no
shortcut; the engine must agree with it to 1e-12 on random outcome tables, at K = 2 to 12.
"""

from __future__ import annotations

import itertools
import random
from fractions import Fraction

import pyarrow as pa
import pytest
from replay_literal import DESIGNS, decide, paired, references, sequential, subset_agreement

from tasks.replay.engine import replay

Grid = dict[tuple[int, str], str]  # (seed, order) -> outcome code
HALF = Fraction(1, 2)


def score(decision: str, key: str | None) -> Fraction:
    if decision == "N":
        return HALF
    return Fraction(int(decision == (key or "A")))


def pair_reference(grid: Grid, k: int, key: str | None) -> dict[str, dict]:
    """Every metric of one pair, exactly, keyed by design then policy (or "design")."""
    out: dict[str, dict] = {}
    for design in DESIGNS:
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
        for w, ab, ba in references(grid, k, design):
            outcomes = ab + ba
            full = decide(outcomes)
            design_metrics["expected_score"] += w * score(full, key)
            design_metrics["p_neutral"] += w * (full == "N")
            same = [
                outcomes[s] == outcomes[t] and outcomes[s] in "ABT"
                for s, t in itertools.combinations(range(k), 2)
            ]
            design_metrics["expected_agreement"] += w * Fraction(sum(same), len(same))
            for size in range(1, k + 1):
                components[size - 1] += w * subset_agreement(tuple(sorted(outcomes)), size)
            if design == "balanced":
                hit = sum(decide([x, y]) == full for x in ab for y in ba)
                components[k] += w * Fraction(hit, len(ab) * len(ba))
            for policy in policies:
                if policy == "full":
                    runs: tuple[tuple[Fraction, str, int], ...] = ((Fraction(1), full, k),)
                elif policy == "paired_unanimity":
                    runs = paired(ab, ba, 1, None)
                else:
                    runs = sequential(tuple(sorted(outcomes)), policy)
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


LEANS = ["ABTXIM", "AAABTM", "BBBAXI", "AB", "ABT", "AAB"]


def random_table(
    rng: random.Random, spec: list[tuple[str, int, int]], leans: list[str] = LEANS
) -> tuple[pa.Table, dict]:
    """Random outcomes drawn from one of `leans` per pair; `spec` is (judge, K, pairs). Returns
    the table and the grids by (judge, pair_id)."""
    rows, grids = [], {}
    for judge, k, n in spec:
        for p in range(n):
            lean = rng.choice(leans)
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


def check_against_reference(table: pa.Table, grids: dict) -> None:
    """Every per-pair, design, summary and component value of the replay of `table` against
    the literal reference of each pair's grid (K read from the judge name, `k<K>`)."""
    result = replay(table)
    got = {
        (r["judge"], r["pair_id"], r["design"], r["policy"]): r for r in result.replay.to_pylist()
    }
    got_design = {(r["judge"], r["pair_id"], r["design"]): r for r in result.design.to_pylist()}
    summary = {(r["judge"], r["design"], r["policy"]): r for r in result.summary.to_pylist()}
    components = {
        (r["judge"], r["design"], r["component"]): r for r in result.components.to_pylist()
    }
    assert len(got) == len(grids) * 10
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
        k = int(judge[1:])
        n = len(pairs)
        n_comp = len(pairs[0]["components"])
        agreements = [sum(p["components"][i] for p in pairs) / n for i in range(n_comp)]
        names = [f"k={size}" for size in range(1, k + 1)] + ["balanced pair"]
        for name, agreement in zip(names, agreements, strict=False):
            row = components[(judge, design, name)]
            assert row["agreement"] == pytest.approx(float(agreement), abs=1e-12), row
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


@pytest.mark.parametrize("seed", [1, 2])
def test_engine_matches_literal_reference(seed: int) -> None:
    rng = random.Random(seed)
    table, grids = random_table(rng, [("k2", 2, 12), ("k4", 4, 30), ("k6", 6, 2)])
    check_against_reference(table, grids)


@pytest.mark.slow
def test_engine_matches_literal_reference_k8_to_k12() -> None:
    """K = 8, 10 and 12 on a few pairs whose outcomes have few kinds (the literal reference
    enumerates every arrangement of them)."""
    rng = random.Random(8)
    spec = [("k8", 8, 2), ("k10", 10, 2), ("k12", 12, 2)]
    table, grids = random_table(rng, spec, ["AB", "AAAB", "ABBT", "AAAAAAM"])
    check_against_reference(table, grids)
