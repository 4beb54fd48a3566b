"""The stopping-policy advisor: the cheapest policy certified within a change budget
(docs/design.md#advice).

Per (judge, config), over all its pairs (every dataset), each policy's savings and change are
the means of its exact per-pair replay under `balanced`. A policy whose pairs can never change
more decisions than the budget needs no certificate; every other change law is tested in a
fixed sequence (`tasks.replay.certify`), each test at the advice's level, the sequence ending
at the first law not certified, so the family-wise chance that any certified policy's true
change rate exceeds the budget is at most 1 - level. The advised policy is the certified one
that saves most; when no decision-changing policy is certified that is `strict` (or another
policy that changes nothing), or `full` when none saves calls.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa

from schemas.advice import AdviceRow
from schemas.arrow import arrow_schema
from schemas.vocabulary import POLICIES
from tasks.errors import InputError
from tasks.replay.certify import (
    certification_order,
    change_law,
    change_range,
    log_wealth,
    pairs_needed,
    upper_bound,
)
from tasks.replay.engine import replay

__all__ = [
    "SHOWN_RANKS",
    "ConfigValues",
    "advise",
    "advise_config",
    "per_pair",
    "shown",
]


@dataclass(frozen=True)
class ConfigValues:
    """The per-pair values of one (judge, config): arrays (pairs x POLICIES) and the K of
    each pair's group."""

    savings: np.ndarray
    change: np.ndarray
    reversal: np.ndarray
    ks: frozenset[int]


def per_pair(outcomes: pa.Table, where: str) -> dict[tuple[str, str], ConfigValues]:
    """Per (judge, config): every policy's savings, change and reversal on each pair, in
    (dataset, pair_id) order, from the exact replay under `balanced`."""
    result = replay(outcomes, designs=["balanced"], policies=POLICIES, where=where)
    rows = result.replay.select(
        [
            "judge",
            "config",
            "dataset",
            "pair_id",
            "policy",
            "expected_calls",
            "p_change",
            "p_reversal",
        ]
    ).to_pandas()
    wide = rows.pivot_table(
        index=["judge", "config", "dataset", "pair_id"],
        columns="policy",
        values=["expected_calls", "p_change", "p_reversal"],
        observed=True,
    ).sort_index()
    out = {}
    for (judge, config), part in wide.groupby(level=[0, 1], sort=False):
        k = part[("expected_calls", "full")].to_numpy()
        out[(str(judge), str(config))] = ConfigValues(
            savings=np.stack(
                [1.0 - part[("expected_calls", p)].to_numpy() / k for p in POLICIES], 1
            ),
            change=np.stack([part[("p_change", p)].to_numpy() for p in POLICIES], 1),
            reversal=np.stack([part[("p_reversal", p)].to_numpy() for p in POLICIES], 1),
            ks=frozenset(int(round(x)) for x in np.unique(k)),
        )
    return out


@dataclass(frozen=True)
class LawTest:
    """One change law's place in the fixed sequence: its certificate, the bound shown, about
    how many pairs would certify it and every law before it (None: none would), and for an
    untested law the policy whose law stopped the sequence."""

    certificate: str
    bound: float
    pairs_needed: int | None = None
    blocker: str | None = None


def _law_tests(
    values: ConfigValues, ranges: list[float], budget: float, alpha: float, bounds: bool
) -> dict[tuple[int, bool], LawTest]:
    """Test the change laws of the policies whose range exceeds the budget, in the fixed
    sequence, each at level alpha, stopping at the first that is not certified."""
    tested = [i for i, r in enumerate(ranges) if r > budget]
    out: dict[tuple[int, bool], LawTest] = {}
    blocker: str | None = None
    needed: int | None = 0
    for law in certification_order([POLICIES[i] for i in tested]):
        i = next(i for i in tested if change_law(POLICIES[i]) == law)
        column, scale = values.change[:, i], ranges[i]
        bound = upper_bound(column, scale=scale, budget=budget, alpha=alpha) if bounds else scale
        if blocker is None:
            z = np.clip(column / scale, 0.0, 1.0)
            wealth = log_wealth(z, np.array([budget / scale]))[0]
            if wealth >= math.log(1.0 / alpha):
                out[law] = LawTest("certified", bound)
                continue
        own = pairs_needed(column, scale=scale, budget=budget, alpha=alpha) if bounds else None
        needed = None if needed is None or own is None else max(needed, own)
        certificate = "over" if blocker is None else "untested"
        out[law] = LawTest(certificate, bound, needed, blocker)
        blocker = blocker or POLICIES[i]
    return out


@dataclass
class Verdict:
    """One policy's row of the advice (AdviceRow without judge, config and note)."""

    policy: str
    rank: str
    max_change: float
    level: float
    pairs: int
    savings: float
    change: float
    reversal: float
    change_range: float
    change_bound: float
    certificate: str
    pairs_needed: int | None
    blocker: str | None = None
    """For an untested policy: the policy of the law not certified before it."""

    def note(self) -> str:
        """What this policy's certificate says."""
        budget = f"{self.max_change:.2%}"
        if self.certificate == "construction":
            if self.change_range == 0.0:
                return "changes no decision by construction"
            return (
                f"no pair can change more than {self.change_range:.2%} of its decisions: within "
                f"the {budget} budget by construction"
            )
        change = f"changes {self.change:.2%} of decisions on these {self.pairs} pairs"
        bound = f"at most {self.change_bound:.2%} at {self.level:.0%}"
        if self.certificate == "certified":
            return f"{change}, {bound}: certified within the {budget} budget"
        if self.pairs_needed is None:
            more = "more pairs would not certify it"
        else:
            more = (
                f"about {self.pairs_needed} pairs changing decisions as these do would certify it"
            )
        if self.certificate == "untested":
            return (
                f"{change} ({bound} on its own); not tested, as {self.blocker} before it in the "
                f"fixed sequence was not certified; {more}"
            )
        return f"{change}, {bound}: over the {budget} budget; {more}"


def advise_config(
    values: ConfigValues, *, max_change: float, level: float = 0.95, bounds: bool = True
) -> list[dict[str, object]]:
    """One row (AdviceRow without judge and config) per policy; `bounds=False` skips the
    shown bounds and pair counts (the certificates and ranks do not use them)."""
    alpha = 1.0 - level
    ranges = [float(max(change_range(p, k) for k in values.ks)) for p in POLICIES]
    tests = _law_tests(values, ranges, max_change, alpha, bounds)
    per_policy = [
        tests[change_law(p)] if r > max_change else LawTest("construction", r)
        for p, r in zip(POLICIES, ranges, strict=True)
    ]
    savings, change = values.savings.mean(0), values.change.mean(0)
    ok = [t.certificate in ("construction", "certified") for t in per_policy]
    by_savings = sorted(range(len(POLICIES)), key=lambda i: -savings[i])
    chosen = [i for i in by_savings if ok[i] and savings[i] > 0.0]
    advised = chosen[0] if chosen else POLICIES.index("full")
    better = [i for i in by_savings if savings[i] > savings[advised]]
    candidates = [i for i in better if change[i] < max_change]
    ranks = ["other"] * len(POLICIES)
    ranks[advised] = "advised"
    if len(chosen) > 1:
        ranks[chosen[1]] = "runner_up"
    if candidates:
        ranks[candidates[0]] = "candidate"
    verdicts = [
        Verdict(
            policy=policy,
            rank=ranks[i],
            max_change=max_change,
            level=level,
            pairs=values.change.shape[0],
            savings=float(savings[i]),
            change=float(change[i]),
            reversal=float(values.reversal[:, i].mean()),
            change_range=ranges[i],
            change_bound=per_policy[i].bound,
            certificate=per_policy[i].certificate,
            pairs_needed=per_policy[i].pairs_needed,
            blocker=per_policy[i].blocker,
        )
        for i, policy in enumerate(POLICIES)
    ]
    notes = [v.note() for v in verdicts]
    notes[advised] = _advice_note(verdicts[advised], [verdicts[i] for i in better], candidates)
    return [
        {k: v for k, v in vars(verdict).items() if k != "blocker"} | {"note": note}
        for verdict, note in zip(verdicts, notes, strict=True)
    ]


def _advice_note(advised: Verdict, better: list[Verdict], candidates: list[int]) -> str:
    """The advice in one sentence: the advised policy, and why none that saves more is."""
    head = f"{advised.policy}: saves {advised.savings:.1%} of calls; {advised.note()}"
    if advised.certificate == "certified" or not better:
        return head
    refused = (
        f"{head}. No policy that saves more is certified within the {advised.max_change:.2%} budget"
    )
    if not candidates:
        return (
            f"{refused}: each changes at least that share of decisions on these "
            f"{advised.pairs} pairs, and at these rates more pairs would not certify them"
        )
    best = next(v for v in better if v.rank == "candidate")
    return f"{refused}: the best candidate, {best.policy} (saves {best.savings:.1%}), {best.note()}"


def advise(
    outcomes: pa.Table, *, max_change: float, level: float = 0.95, where: str = "replay input"
) -> pa.Table:
    """The advice table (AdviceRow) for every (judge, config) of a replay input."""
    if not 0.0 <= max_change <= 1.0:
        raise InputError(f"max change {max_change} is not a share between 0 and 1 (1% is 0.01)")
    if not 0.5 <= level < 1.0:
        raise InputError(f"level {level} is not a confidence between 0.5 and 1 (95% is 0.95)")
    rows: list[dict[str, object]] = []
    for (judge, config), values in per_pair(outcomes, where).items():
        for row in advise_config(values, max_change=max_change, level=level):
            rows.append({"judge": judge, "config": config, **row})
    return pa.Table.from_pylist(rows, schema=arrow_schema(AdviceRow))


SHOWN_RANKS = ("advised", "runner_up", "candidate")
"""The ranks the terminal and the report show, in this order."""


def shown(advice: pd.DataFrame) -> pd.DataFrame:
    """The rows worth reading, per (judge, config): advised, runner-up and the best candidate
    not certified, in that order."""
    order = advice["rank"].map({r: i for i, r in enumerate(SHOWN_RANKS)})
    kept = advice.assign(_order=order)[order.notna()]
    return kept.sort_values(["judge", "config", "_order"], kind="stable").drop(columns="_order")
