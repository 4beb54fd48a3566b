"""Every policy, core and paired family, against a literal enumeration in exact fractions.

The reference follows docs/design.md#stopping-policies and docs/design.md#paired-family word
for word: it enumerates every assignment of the design, every arrangement of the calls that
run in random order (each distinct arrangement of a multiset of outcomes is equally likely)
and, for the paired policies, every perfect matching x couple order. It caches each law by
the multisets it was computed on (of (order, outcome), and of the calls executed and left),
which is what makes K = 8 affordable.
"""

from __future__ import annotations

import itertools
import random
from collections import Counter
from collections.abc import Iterator
from fractions import Fraction
from functools import cache

import pyarrow as pa
import pytest

from schemas.vocabulary import POLICIES
from tasks.replay.engine import replay

Law = tuple[tuple[Fraction, str, int], ...]  # (probability, decision, calls)
RULES = {  # policy -> (couples in the paired start, boundary on the rest)
    "paired_unanimity": (1, None),
    "paired_nonstrict": (1, "nonstrict"),
    "paired_strict": (1, "strict"),
    "paired_unanimity_2": (2, "strict"),
}


def decide(outcomes: tuple[str, ...]) -> str:
    n_a, n_b = outcomes.count("A"), outcomes.count("B")
    return "A" if n_a > n_b else "B" if n_b > n_a else "N"


def arrangements(items: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
    """Every distinct arrangement of a multiset, once each."""
    if not items:
        yield ()
        return
    for first in sorted(set(items)):
        rest = list(items)
        rest.remove(first)
        for tail in arrangements(tuple(rest)):
            yield (first, *tail)


def run_on(k: int, executed: tuple[str, ...], rest: tuple[str, ...], boundary: str | None) -> Law:
    """Stop after call t when the boundary is met, over every arrangement of `rest`. Only the
    multisets matter (the arrangements of `rest` are enumerated from its multiset, and the
    boundary and decision count the executed calls), so each pair of them is run once."""
    return run_multisets(k, tuple(sorted(executed)), tuple(sorted(rest)), boundary)


def stops(k: int, done: tuple[str, ...], boundary: str | None) -> bool:
    """The boundary after the executed calls `done`: |#A - #B| against the K - t calls left."""
    margin, left = abs(done.count("A") - done.count("B")), k - len(done)
    return (boundary == "strict" and margin > left) or (boundary == "nonstrict" and margin >= left)


@cache
def run_multisets(
    k: int, executed: tuple[str, ...], rest: tuple[str, ...], boundary: str | None
) -> Law:
    seen: Counter[tuple[str, int]] = Counter()
    every = list(arrangements(rest))
    for order in every:
        done = list(executed)
        for outcome in order:
            done.append(outcome)
            if stops(k, tuple(done), boundary):
                break
        seen[(decide(tuple(done)), len(done))] += 1
    if not every:
        seen[(decide(executed), len(executed))] += 1
        every = [()]
    return tuple((Fraction(n, len(every)), d, c) for (d, c), n in seen.items())


@cache
def sequential(outcomes: tuple[str, ...], boundary: str | None) -> Law:
    return run_on(len(outcomes), (), outcomes, boundary)


@cache
def paired(ab: tuple[str, ...], ba: tuple[str, ...], couples: int, boundary: str | None) -> Law:
    """Every perfect matching x couple order; the first `couples` couples stop when unanimous
    or when they meet the boundary, else the rest run under it."""
    k = 2 * len(ab)
    seen: Counter[tuple[str, int]] = Counter()
    total = 0
    for matched in itertools.permutations(ba):
        for run in itertools.permutations(list(zip(ab, matched, strict=True))):
            m = min(couples, len(run))
            start = tuple(x for couple in run[:m] for x in couple)
            rest = tuple(x for couple in run[m:] for x in couple)
            total += 1
            if start.count("A") == 2 * m or start.count("B") == 2 * m:
                seen[(start[0], 2 * m)] += 1
                continue
            if stops(k, start, boundary):  # the boundary, checked right after the start
                seen[(decide(start), 2 * m)] += 1
                continue
            for p, d, c in run_on(k, start, rest, boundary):
                seen[(d, c)] += p
    return tuple((Fraction(n) / total, d, c) for (d, c), n in seen.items())


def assignments(design: str, k: int) -> list[tuple[str, ...]]:
    every = list(itertools.product(("AB", "BA"), repeat=k))
    if design == "common":
        return [("AB",) * k, ("BA",) * k]
    if design == "independent":
        return every
    return [a for a in every if a.count("AB") == k // 2]


def expect(grid: dict, k: int, design: str, policy: str) -> dict[str, Fraction]:
    """The per-pair policy metrics (A-scores: the tables use no key)."""
    a_score = {"A": Fraction(1), "B": Fraction(0), "N": Fraction(1, 2)}
    names = ("expected_calls", "p_change", "p_neutral_to_decisive", "p_decisive_to_neutral")
    sums = dict.fromkeys((*names, "p_reversal", "expected_score", "added_variance"), Fraction(0))
    table = assignments(design, k)
    for assignment in table:
        outcomes = tuple(grid[(s, o)] for s, o in enumerate(assignment))
        full = decide(outcomes)
        if policy == "full":
            law: Law = ((Fraction(1), full, k),)
        elif policy in RULES:
            ab = tuple(sorted(x for x, o in zip(outcomes, assignment, strict=True) if o == "AB"))
            ba = tuple(sorted(x for x, o in zip(outcomes, assignment, strict=True) if o == "BA"))
            law = paired(ab, ba, *RULES[policy])
        else:
            law = sequential(tuple(sorted(outcomes)), policy)
        mean = sum(p * a_score[d] for p, d, _ in law)
        w = Fraction(1, len(table))
        sums["expected_calls"] += w * sum(p * c for p, _, c in law)
        sums["p_change"] += w * sum(p for p, d, _ in law if d != full)
        sums["p_neutral_to_decisive"] += w * sum(p for p, d, _ in law if full == "N" != d)
        sums["p_decisive_to_neutral"] += w * sum(p for p, d, _ in law if full != "N" == d)
        sums["p_reversal"] += w * sum(p for p, d, _ in law if {d, full} == {"A", "B"})
        sums["expected_score"] += w * mean
        sums["added_variance"] += w * sum(p * (a_score[d] - mean) ** 2 for p, d, _ in law)
    return sums


def random_grids(rng: random.Random, spec: list[tuple[int, int]]) -> tuple[pa.Table, dict]:
    """Random outcome grids; `spec` is (K, pairs). The first pair of each K may hold all six
    codes."""
    rows, grids = [], {}
    for k, n in spec:
        for p in range(n):
            leans = ["ABTXIM", "AAABTM", "BBBAXI", "AB", "AAB", "ABBI"]
            lean = leans[0] if p == 0 else rng.choice(leans)
            grid = {(s, o): rng.choice(lean) for s in range(k) for o in ("AB", "BA")}
            grids[(f"k{k}", f"p{p}")] = (grid, k)
            for (s, o), outcome in grid.items():
                rows.append(
                    {
                        "judge": f"k{k}",
                        "config": "cfg",
                        "dataset": "ds",
                        "pair_id": f"p{p}",
                        "seed": s,
                        "order": o,
                        "outcome": outcome,
                        "key": None,
                    }
                )
    return pa.Table.from_pylist(rows, schema=_SCHEMA), grids


_SCHEMA = pa.schema(
    [(n, pa.string()) for n in ("judge", "config", "dataset", "pair_id")]
    + [("seed", pa.int64())]
    + [(n, pa.string()) for n in ("order", "outcome", "key")]
)


def _check(spec: list[tuple[int, int]], designs: tuple[str, ...], seed: int) -> None:
    table, grids = random_grids(random.Random(seed), spec)
    assert set(table["outcome"].to_pylist()) == set("ABTXIM")
    result = replay(table, designs=designs, policies=POLICIES)
    rows = result.replay.to_pylist()
    got = {(r["judge"], r["pair_id"], r["design"], r["policy"]): r for r in rows}
    checked = 0
    for (judge, pair_id), (grid, k) in grids.items():
        for (j, p, design, policy), row in got.items():
            if (j, p) != (judge, pair_id):
                continue
            for name, value in expect(grid, k, design, policy).items():
                assert row[name] == pytest.approx(float(value), abs=1e-12), (
                    judge,
                    pair_id,
                    design,
                    policy,
                    name,
                )
                checked += 1
    assert checked == sum(n for _, n in spec) * 7 * (3 * len(designs) + 4 * ("balanced" in designs))


def test_every_policy_matches_literal_enumeration_k2_to_k6() -> None:
    _check([(2, 6), (4, 14), (6, 4)], ("common", "independent", "balanced"), seed=3)


@pytest.mark.slow
def test_every_policy_matches_literal_enumeration_k8() -> None:
    _check([(8, 2)], ("common", "independent", "balanced"), seed=5)


def _one_pair(k: int, grid: dict[tuple[int, str], str]) -> pa.Table:
    rows = [
        {"judge": "j", "config": "c", "dataset": "d", "pair_id": "p", "seed": s, "order": o,
         "outcome": grid[(s, o)], "key": None}
        for s in range(k) for o in ("AB", "BA")
    ]  # fmt: skip
    return pa.Table.from_pylist(rows, schema=_SCHEMA)


def _policy_rows(table: pa.Table) -> dict[str, dict]:
    result = replay(table, designs=("balanced",), policies=POLICIES)
    return {r["policy"]: r for r in result.replay.to_pylist()}


def test_the_boundary_is_checked_right_after_the_paired_start() -> None:
    """docs/design.md#paired-family: after the first m couples, if they are not unanimous,
    the boundary is checked at once (t = 2m) before another call runs. At K = 4 no start that
    is not unanimous can meet it (margin <= 2m - 1 = 1 < K - 2 = 2); at K = 6 the two couples
    of paired_unanimity_2 can (3 A and a tie: margin 3 > 6 - 4)."""
    # K = 4: every seed A in both orders but one tie seed. paired_strict's first couple holds
    # the tie with probability 1/2 (then one more A settles it: 3 calls), else stops at 2.
    k4 = {(s, o): "A" if s < 3 else "T" for s in range(4) for o in ("AB", "BA")}
    rows = _policy_rows(_one_pair(4, k4))
    assert rows["paired_strict"]["expected_calls"] == pytest.approx(2.5, abs=1e-12)
    assert rows["paired_unanimity_2"]["expected_calls"] == pytest.approx(4.0, abs=1e-12)
    # K = 6, same shape: the two couples are unanimous (4 calls) or hold the tie (3 A and T,
    # margin 3 > 2 calls left: settled, stop at 4 as well). Never a fifth call.
    k6 = {(s, o): "A" if s < 5 else "T" for s in range(6) for o in ("AB", "BA")}
    rows = _policy_rows(_one_pair(6, k6))
    assert rows["paired_unanimity_2"]["expected_calls"] == pytest.approx(4.0, abs=1e-12)
    assert rows["paired_unanimity_2"]["p_change"] == 0.0
    assert expect(k6, 6, "balanced", "paired_unanimity_2")["expected_calls"] == 4
