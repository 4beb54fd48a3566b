"""Agreement of a run's judges, from its outcomes (docs/design.md#agreement).

Per judge config (every dataset pooled, a unit being one pair):

- self-agreement of the K x 2 calls of a pair: Krippendorff's nominal alpha and Fleiss' kappa
  over the identity outcomes `A`, `B`, `T` (tie) and `X` (abstention), `I` and `M` missing
  data; over all calls (`all`), within each order (a unit per pair and order: `within`), and
  between the calls of one order and those of the other (`across`). Position bias shows as
  `across` below `within`;
- a confusion table of the decision over all 2K calls against the key: `A`, `B`, `tie`
  (equal votes) or `none` (no decisive call).

Per two judge configs of a run: Cohen's kappa and raw agreement of their decisions over all 2K
calls (`A`, `B`, `N`) on the pairs both judged. Every figure has a 95% interval over pairs
(`tasks.agreement.stats`: BCa bootstrap; Wilson for raw agreement).
"""

from __future__ import annotations

from itertools import combinations
from typing import Any, cast

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from tasks.agreement.stats import (
    Estimate,
    across_features,
    alpha_from_sums,
    decision_agreement,
    estimates,
    fleiss_from_sums,
    unit_features,
)
from tasks.bootstrap import BOOTSTRAP_RESAMPLES

__all__ = [
    "DECISION_CLASSES",
    "SCOPES",
    "COUNT_COLUMNS",
    "VALUES",
    "ConfigCounts",
    "alpha_change",
    "config_counts",
    "judge_agreement",
    "key_confusion",
    "order_value_counts",
    "scope_estimates",
    "scope_features",
    "self_agreement",
]

VALUES = ("A", "B", "T", "X")
"""Outcomes that are values of a call; `I` and `M` are missing data."""
SCOPES = ("all", "within", "across")
DECISION_CLASSES = ("A", "B", "tie", "none")
"""A pair's decision over all its calls: a majority, equal votes, or no decisive call."""
_ORDERS = ("AB", "BA")
UNIT = ["dataset", "pair_id"]
CONFIG = ["judge", "config"]


ConfigCounts = dict[tuple[str, str], tuple[pd.DataFrame, np.ndarray]]
"""Per (judge, config): its pairs and their value counts (`config_counts`)."""


def config_counts(outcomes: pd.DataFrame) -> ConfigCounts:
    """Per (judge, config): its pairs (dataset, pair_id, key: the first key given; sorted)
    and their value counts (pairs x 2 orders x VALUES)."""
    frame = outcomes[[*CONFIG, *UNIT, "order", "outcome", "key"]]
    # One grouping of every (judge, config, pair), sorted: each config's pairs are a run of
    # consecutive groups.
    grouped = frame.groupby([*CONFIG, *UNIT], sort=True, observed=True)
    units = grouped["key"].first().reset_index()
    ids = grouped.ngroup().to_numpy()
    order = frame["order"].map({o: i for i, o in enumerate(_ORDERS)}).to_numpy()
    value = frame["outcome"].map({v: i for i, v in enumerate(VALUES)})
    valid = value.notna().to_numpy() & (ids >= 0)
    counts = np.zeros((len(units), len(_ORDERS), len(VALUES)))
    np.add.at(
        counts,
        (ids[valid], order[valid].astype(int), value[valid].to_numpy().astype(int)),
        1.0,
    )
    found = cast(dict[tuple[Any, Any], np.ndarray], units.groupby(CONFIG, observed=True).indices)
    out = {}
    for judge, config in sorted(found):
        rows = found[(judge, config)]
        part = slice(rows[0], rows[-1] + 1)
        pairs = units.iloc[part][[*UNIT, "key"]].reset_index(drop=True)
        out[(str(judge), str(config))] = (pairs, counts[part])
    return out


def _counts_of(outcomes: pd.DataFrame | ConfigCounts) -> ConfigCounts:
    return config_counts(outcomes) if isinstance(outcomes, pd.DataFrame) else outcomes


def scope_features(counts: np.ndarray) -> dict[str, np.ndarray]:
    """Per scope, the per-pair features of alpha and Fleiss' kappa (`tasks.agreement.stats`)."""
    within = unit_features(counts[:, 0]) + unit_features(counts[:, 1])
    return {
        "all": unit_features(counts.sum(axis=1)),
        "within": within,
        "across": across_features(counts[:, 0], counts[:, 1]),
    }


STATISTICS = {"alpha": alpha_from_sums, "fleiss_kappa": fleiss_from_sums}


def _columns(statistic: Any, start: int, width: int) -> Any:
    """`statistic` of the summed features in columns start .. start + width."""
    return lambda sums: statistic(sums[..., start : start + width])


def scope_estimates(
    scopes: dict[str, np.ndarray],
    *,
    seed_parts: tuple[Any, ...],
    resamples: int = BOOTSTRAP_RESAMPLES,
) -> dict[tuple[str, str], Estimate]:
    """Alpha and Fleiss' kappa of every scope of `scope_features`, from the same resamples of
    the pairs."""
    features = np.hstack(list(scopes.values()))
    width = features.shape[1] // len(scopes)
    statistics = {
        (name, scope): _columns(statistic, i * width, width)
        for i, scope in enumerate(scopes)
        for name, statistic in STATISTICS.items()
    }
    return estimates(features, statistics, seed_parts=seed_parts, resamples=resamples)


def self_agreement(outcomes: pd.DataFrame | ConfigCounts) -> pd.DataFrame:
    """One row per (judge, config, statistic, scope): `value`, `low`, `high` (95% BCa
    bootstrap interval over pairs, all six from the same resamples) and `pairs` (pairs with
    values to compare in that scope: two or more, or one in each order for `across`)."""
    rows = []
    for (judge, config), (_, counts) in _counts_of(outcomes).items():
        scopes = scope_features(counts)
        found = scope_estimates(scopes, seed_parts=(judge, config))
        for (name, scope), est in found.items():
            rows.append(
                {
                    "judge": judge,
                    "config": config,
                    "statistic": name,
                    "scope": scope,
                    "value": est.value,
                    "low": est.low,
                    "high": est.high,
                    "pairs": int((scopes[scope][:, 2] > 0).sum()),
                }
            )
    columns = [*CONFIG, "statistic", "scope", "value", "low", "high", "pairs"]
    return pd.DataFrame(rows, columns=columns)


def _decision_class(counts: np.ndarray) -> np.ndarray:
    """Index into DECISION_CLASSES of each pair's decision over all its calls."""
    a, b = counts[:, :, 0].sum(axis=1), counts[:, :, 1].sum(axis=1)
    return np.select([a > b, b > a, a > 0], [0, 1, 2], 3)


def key_confusion(outcomes: pd.DataFrame | ConfigCounts) -> pd.DataFrame:
    """Per (judge, config, key, decision): the pairs with that key (`A`, `B`, or `none` for a
    pair without one) whose decision over all 2K calls is that class (DECISION_CLASSES);
    every combination is listed, zeros included."""
    rows = []
    for (judge, config), (pairs, counts) in _counts_of(outcomes).items():
        decided = np.array(DECISION_CLASSES)[_decision_class(counts)]
        keys = pairs["key"].fillna("none").to_numpy()
        for key in ("A", "B", "none"):
            for cls in DECISION_CLASSES:
                n = int(((keys == key) & (decided == cls)).sum())
                rows.append(
                    {"judge": judge, "config": config, "key": key, "decision": cls, "pairs": n}
                )
    return pd.DataFrame(rows, columns=[*CONFIG, "key", "decision", "pairs"])


def judge_agreement(outcomes: pd.DataFrame | ConfigCounts) -> pd.DataFrame:
    """One row per two judge configs (in sorted order): the pairs both judged, Cohen's kappa
    and raw agreement of their decisions (`A`, `B`, `N`: a tie and no decisive call are both
    `N`), each with its 95% interval over pairs (`rater_agreement`)."""
    per_config = _counts_of(outcomes)
    # Every pair any config judged, in sorted order; per config its decision of each (-1:
    # not judged), so two configs' shared pairs come in that order.
    judged = {
        key: list(zip(pairs["dataset"].tolist(), pairs["pair_id"].tolist(), strict=True))
        for key, (pairs, _) in per_config.items()
    }
    place = {unit: i for i, unit in enumerate(sorted({u for us in judged.values() for u in us}))}
    decided = {}
    for key, (_, counts) in per_config.items():
        decided[key] = np.full(len(place), -1, dtype=np.int64)
        decided[key][[place[u] for u in judged[key]]] = np.minimum(_decision_class(counts), 2)
    rows = []
    for one, two in combinations(per_config, 2):
        pairs, kappa, raw = decision_agreement(decided[one], decided[two], seed_parts=(*one, *two))
        rows.append(
            {
                "judge_1": one[0],
                "config_1": one[1],
                "judge_2": two[0],
                "config_2": two[1],
                "pairs": pairs,
                "kappa": kappa.value,
                "kappa_low": kappa.low,
                "kappa_high": kappa.high,
                "raw": raw.value,
                "raw_low": raw.low,
                "raw_high": raw.high,
            }
        )
    columns = [
        "judge_1",
        "config_1",
        "judge_2",
        "config_2",
        "pairs",
        "kappa",
        "kappa_low",
        "kappa_high",
        "raw",
        "raw_low",
        "raw_high",
    ]
    return pd.DataFrame(rows, columns=columns)


COUNT_COLUMNS = [f"n_{order}_{value}" for order in _ORDERS for value in VALUES]
"""The value counts of a pair's calls per order, as columns (`order_value_counts`)."""


def order_value_counts(outcomes: pa.Table, keys: list[str]) -> pa.Table:
    """Per group of `keys` (a judge config's pair), its calls of each value in each order
    (COUNT_COLUMNS, int64); `I` and `M` are not counted. One grouping pass over the rows;
    the groups come in no particular order."""
    order, outcome = outcomes.column("order"), outcomes.column("outcome")
    flags = {
        f"n_{o}_{v}": pc.and_(pc.equal(order, o), pc.equal(outcome, v))
        for o in _ORDERS
        for v in VALUES
    }
    counted = pa.table({**{k: outcomes.column(k) for k in keys}, **flags})
    every = pc.ScalarAggregateOptions(min_count=0)  # a group with no such call counts 0
    sums = counted.group_by(keys).aggregate([(c, "sum", every) for c in COUNT_COLUMNS])
    return pa.table(
        {k: sums.column(k) for k in keys}
        | {c: pc.cast(sums.column(f"{c}_sum"), pa.int64()) for c in COUNT_COLUMNS}
    )


def alpha_change(
    before: np.ndarray, after: np.ndarray, *, seed_parts: tuple[Any, ...]
) -> tuple[float, float, Estimate]:
    """Alpha over all calls of the same pairs in two runs (counts: pairs x 2 orders x VALUES,
    row i the same pair in both) and the change, after minus before, with its 95% BCa
    interval from resampling the pairs together (a paired bootstrap)."""
    first, second = unit_features(before.sum(axis=1)), unit_features(after.sum(axis=1))
    width = first.shape[1]
    statistics = {
        "before": lambda sums: alpha_from_sums(sums[..., :width]),
        "after": lambda sums: alpha_from_sums(sums[..., width:]),
        "change": lambda sums: (
            alpha_from_sums(sums[..., width:]) - alpha_from_sums(sums[..., :width])
        ),
    }
    found = estimates(np.hstack([first, second]), statistics, seed_parts=seed_parts)
    return found["before"].value, found["after"].value, found["change"]
