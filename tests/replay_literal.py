"""The replay's random choices enumerated literally, in exact fractions, for the replay tests.

Each function follows docs/design.md#stopping-policies and docs/design.md#paired-family word for
word, with no shortcut but these two, both exact:

- calls that run in a uniformly random order are enumerated as every distinct arrangement of
  their outcomes (each equally likely), followed call by call; the arrangements that share the
  calls run before the stop are counted together, and a law is cached by the multisets it was
  computed on (the calls executed and the calls left), which is what makes K = 12 affordable;
- a perfect matching of the `AB` calls to the `BA` calls is enumerated as every distinct
  arrangement of the `BA` outcomes against the `AB` calls in a fixed order, and a uniform order
  of the couples as every ordered choice of the couples that run first (the calls after them
  run in a fresh random order, so the order of the other couples never matters).
  `paired_every_order` enumerates every matching and every couple order instead, to check it.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Iterator
from fractions import Fraction
from functools import cache

Law = tuple[tuple[Fraction, str, int], ...]  # (probability, decision, calls)
DESIGNS = ("common", "independent", "balanced")
RULES = {  # paired policy -> (couples in the paired start, boundary on the rest)
    "paired_unanimity": (1, None),
    "paired_nonstrict": (1, "nonstrict"),
    "paired_strict": (1, "strict"),
    "paired_unanimity_2": (2, "strict"),
}


def decide(outcomes: tuple[str, ...] | list[str]) -> str:
    n_a, n_b = outcomes.count("A"), outcomes.count("B")
    return "A" if n_a > n_b else "B" if n_b > n_a else "N"


def assignments(design: str, k: int) -> list[tuple[str, ...]]:
    """Every assignment of an order to each seed that the design draws from, uniformly."""
    every = list(itertools.product(("AB", "BA"), repeat=k))
    if design == "common":
        return [("AB",) * k, ("BA",) * k]
    if design == "independent":
        return every
    return [a for a in every if a.count("AB") == k // 2]


def references(
    grid: dict[tuple[int, str], str], k: int, design: str
) -> list[tuple[Fraction, tuple[str, ...], tuple[str, ...]]]:
    """(probability, AB outcomes, BA outcomes) of the references of a grid ((seed, order) ->
    outcome) under the design: every assignment, those giving the same outcomes to each side
    (as multisets) taken together, since nothing the tests compute on a reference reads more."""
    every = assignments(design, k)
    seen: Counter[tuple[tuple[str, ...], tuple[str, ...]]] = Counter()
    for assignment in every:
        ab = tuple(sorted(grid[(s, o)] for s, o in enumerate(assignment) if o == "AB"))
        ba = tuple(sorted(grid[(s, o)] for s, o in enumerate(assignment) if o == "BA"))
        seen[(ab, ba)] += 1
    return [(Fraction(n, len(every)), ab, ba) for (ab, ba), n in seen.items()]


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


def stops(margin: int, left: int, boundary: str | None) -> bool:
    """Whether the run stops with |#A - #B| = margin and `left` calls not run yet."""
    if boundary == "strict":
        return margin > left
    return boundary == "nonstrict" and margin >= left


def run_on(k: int, executed: tuple[str, ...], rest: tuple[str, ...], boundary: str | None) -> Law:
    """After the calls `executed`, run `rest` in every order, stopping after call t when the
    boundary is met (t counts every executed call)."""
    laws = _run(k, tuple(sorted(executed)), tuple(sorted(rest)), boundary)
    return tuple((p, d, c) for (d, c, _), p in laws.items())


def _orders(outcomes: Counter[str]) -> int:
    """How many distinct arrangements a multiset of outcomes has."""
    count = math.factorial(sum(outcomes.values()))
    for n in outcomes.values():
        count //= math.factorial(n)
    return count


@cache
def _run(
    k: int, executed: tuple[str, ...], rest: tuple[str, ...], boundary: str | None
) -> dict[tuple[str, int, tuple[str, ...]], Fraction]:
    """P(the run stops with each (decision, calls, outcomes executed from `rest`)): every
    distinct order of `rest` followed call by call, the orders that share the calls run when it
    stops counted together (their number of arrangements of the calls never run)."""
    seen: Counter[tuple[str, int, tuple[str, ...]]] = Counter()

    def walk(done: list[str], left: Counter[str], n_a: int, n_b: int) -> None:
        for outcome in sorted(x for x, n in left.items() if n):
            done.append(outcome)
            left[outcome] -= 1
            a, b = n_a + (outcome == "A"), n_b + (outcome == "B")
            t = len(executed) + len(done)
            if t == k or stops(abs(a - b), k - t, boundary):
                ran = tuple(sorted(done))
                seen[(decide(executed + ran), t, ran)] += _orders(left)
            else:
                walk(done, left, a, b)
            left[outcome] += 1
            done.pop()

    if rest:
        walk([], Counter(rest), executed.count("A"), executed.count("B"))
    else:
        seen[(decide(executed), len(executed), ())] += 1
    total = _orders(Counter(rest))
    return {key: Fraction(n, total) for key, n in seen.items()}


def executed_shares(outcomes: tuple[str, ...], boundary: str | None) -> dict[str, Fraction]:
    """Per outcome, E[calls with that outcome executed] / (calls with it), over every order of
    the calls: the chance a given call is sent (calls with one outcome are exchangeable)."""
    held = Counter(outcomes)
    executed: dict[str, Fraction] = dict.fromkeys(held, Fraction(0))
    for (_, _, ran), p in _run(len(outcomes), (), tuple(sorted(outcomes)), boundary).items():
        for x, n in Counter(ran).items():
            executed[x] += p * n
    return {x: executed[x] / held[x] for x in held}


@cache
def sequential(outcomes: tuple[str, ...], boundary: str | None) -> Law:
    """`full` (boundary None), `nonstrict` or `strict` over every order of the calls."""
    return run_on(len(outcomes), (), outcomes, boundary)


def _after_start(k: int, start: list[str], rest: list[str], boundary: str | None) -> Law:
    """The first couples stop when unanimous or when they meet the boundary (checked right
    after them), else the rest run under it."""
    unanimous = start.count("A") == len(start) or start.count("B") == len(start)
    if unanimous or stops(abs(start.count("A") - start.count("B")), k - len(start), boundary):
        return ((Fraction(1), decide(start), len(start)),)
    return run_on(k, tuple(start), tuple(rest), boundary)


@cache
def paired(ab: tuple[str, ...], ba: tuple[str, ...], couples: int, boundary: str | None) -> Law:
    """Every perfect matching x every ordered choice of the first `couples` couples: unanimous
    or meeting the boundary, they stop; otherwise the rest runs under the boundary."""
    k = 2 * len(ab)
    m = min(couples, len(ab))
    seen: Counter[tuple[str, int]] = Counter()
    total = 0
    for matched in arrangements(tuple(sorted(ba))):
        pairs = list(zip(ab, matched, strict=True))
        for first in itertools.permutations(range(len(pairs)), m):
            start = [x for i in first for x in pairs[i]]
            rest = [x for i, pair in enumerate(pairs) if i not in first for x in pair]
            total += 1
            for p, d, c in _after_start(k, start, rest, boundary):
                seen[(d, c)] += p
    return tuple((Fraction(n) / total, d, c) for (d, c), n in seen.items())


def paired_every_order(
    ab: tuple[str, ...], ba: tuple[str, ...], couples: int, boundary: str | None
) -> Law:
    """As `paired`, over every permutation of the `BA` calls and every order of the couples."""
    k = 2 * len(ab)
    m = min(couples, len(ab))
    seen: Counter[tuple[str, int]] = Counter()
    total = 0
    for matched in itertools.permutations(ba):
        for run in itertools.permutations(list(zip(ab, matched, strict=True))):
            start = [x for couple in run[:m] for x in couple]
            rest = [x for couple in run[m:] for x in couple]
            total += 1
            for p, d, c in _after_start(k, start, rest, boundary):
                seen[(d, c)] += p
    return tuple((Fraction(n) / total, d, c) for (d, c), n in seen.items())


@cache
def subset_agreement(outcomes: tuple[str, ...], size: int) -> Fraction:
    """P(decision of a uniform `size`-subset of the calls == their full decision)."""
    full = decide(outcomes)
    subsets = list(itertools.combinations(outcomes, size))
    return Fraction(sum(decide(sub) == full for sub in subsets), len(subsets))
