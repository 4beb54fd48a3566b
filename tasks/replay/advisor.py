"""The stopping-policy advisor: the cheapest policy within a change budget (docs/design.md#advice).

Per (judge, config) the pairs (every dataset) are split into two random halves. On the
selection half each candidate policy's savings and change are the means of its exact
per-pair replay under `balanced`; the advised policy is the one with the largest positive
savings whose change is at most the budget, the runner-up the next one. The held-out half then says
what the advised policy saves and changes on pairs it was not chosen on. Every interval is a
percentile bootstrap over pairs; the predicted change is a prediction interval for the mean
change of another half of the same size (the selection interval widened by sqrt 2).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from schemas.advice import AdviceRow
from schemas.arrow import arrow_schema
from schemas.vocabulary import POLICIES
from tasks.errors import InputError
from tasks.replay.engine import replay

__all__ = ["ADVISED_POLICIES", "advise", "advised_policies", "interval"]

ADVISED_POLICIES = tuple(p for p in POLICIES if p != "full")
"""The candidates: every policy but `full`, under `balanced` (where the paired ones live)."""
_BOOTSTRAP_CELLS = 1 << 22


def interval(
    values: np.ndarray, rng: np.random.Generator, *, resamples: int, level: float
) -> np.ndarray:
    """Percentile bootstrap intervals of the column means of `values` (pairs x columns):
    shape (2, columns), low then high."""
    n = len(values)
    if n == 0:
        return np.full((2, values.shape[1]), np.nan)
    chunk = max(1, _BOOTSTRAP_CELLS // max(n, 1))
    means = []
    for start in range(0, resamples, chunk):
        size = min(chunk, resamples - start)
        picks = rng.integers(0, n, size=(size, n))
        means.append(values[picks].mean(axis=1))
    tail = (1.0 - level) / 2.0
    return np.quantile(np.concatenate(means), [tail, 1.0 - tail], axis=0)


def _per_pair(outcomes: pa.Table, where: str) -> pd.DataFrame:
    """Per (judge, config, dataset, pair_id): savings and change of every candidate."""
    policies = ("full", *ADVISED_POLICIES)
    result = replay(outcomes, designs=["balanced"], policies=policies, where=where)
    rows = result.replay.select(
        ["judge", "config", "dataset", "pair_id", "policy", "expected_calls", "p_change"]
    ).to_pandas()
    wide = rows.pivot_table(
        index=["judge", "config", "dataset", "pair_id"],
        columns="policy",
        values=["expected_calls", "p_change"],
        observed=True,
        sort=False,
    )
    k = wide[("expected_calls", "full")]
    columns = {}
    for policy in ADVISED_POLICIES:
        columns[("savings", policy)] = 1.0 - wide[("expected_calls", policy)] / k
        columns[("change", policy)] = wide[("p_change", policy)]
    frame = pd.DataFrame(columns, index=wide.index)
    return frame.reset_index()


def _halves(frame: pd.DataFrame, rng_seed: int) -> np.ndarray:
    """True for the selection half: one random half of the (dataset, pair_id)s, the same for
    every judge configuration."""
    keys = frame[["dataset", "pair_id"]].drop_duplicates().sort_values(["dataset", "pair_id"])
    rng = np.random.default_rng(rng_seed)
    chosen = rng.permutation(len(keys)) < (len(keys) + 1) // 2
    index = pd.MultiIndex.from_frame(keys)
    lookup = pd.Series(chosen, index=index)
    return lookup.reindex(pd.MultiIndex.from_frame(frame[["dataset", "pair_id"]])).to_numpy(bool)


def _config_rows(
    part: pd.DataFrame,
    selection: np.ndarray,
    *,
    max_change: float,
    rng: np.random.Generator,
    resamples: int,
    level: float,
) -> list[dict[str, object]]:
    """The advised and runner-up rows of one (judge, config)."""
    savings = part["savings"][list(ADVISED_POLICIES)].to_numpy()
    change = part["change"][list(ADVISED_POLICIES)].to_numpy()
    sel_savings, sel_change = savings[selection].mean(0), change[selection].mean(0)
    qualified = [
        i
        for i in np.argsort(-sel_savings, kind="stable")
        if sel_change[i] <= max_change and sel_savings[i] > 0.0
    ]
    base: dict[str, object] = {
        "max_change": max_change,
        "level": level,
        "selection_pairs": int(selection.sum()),
        "holdout_pairs": int((~selection).sum()),
    }
    if not qualified:
        return [
            {
                **base,
                "rank": "advised",
                "policy": None,
                "note": f"no policy saves calls and changes at most {max_change:.2%} of "
                "decisions on the selection half: keep full",
            }
        ]
    rows = []
    for rank, i in zip(("advised", "runner_up"), qualified[:2], strict=False):
        both = np.stack([savings[:, i], change[:, i]], axis=1)
        sel = interval(both[selection], rng, resamples=resamples, level=level)
        held = interval(both[~selection], rng, resamples=resamples, level=level)
        held_mean = both[~selection].mean(0)
        widen = np.sqrt(2.0)
        low = max(0.0, sel_change[i] - widen * (sel_change[i] - sel[0, 1]))
        high = min(1.0, sel_change[i] + widen * (sel[1, 1] - sel_change[i]))
        within = "within" if held_mean[1] <= max_change else "over"
        rows.append(
            {
                **base,
                "rank": rank,
                "policy": ADVISED_POLICIES[i],
                "selection_savings": float(sel_savings[i]),
                "selection_savings_low": float(sel[0, 0]),
                "selection_savings_high": float(sel[1, 0]),
                "selection_change": float(sel_change[i]),
                "selection_change_low": float(sel[0, 1]),
                "selection_change_high": float(sel[1, 1]),
                "predicted_change_low": float(low),
                "predicted_change_high": float(high),
                "holdout_savings": float(held_mean[0]),
                "holdout_savings_low": float(held[0, 0]),
                "holdout_savings_high": float(held[1, 0]),
                "holdout_change": float(held_mean[1]),
                "holdout_change_low": float(held[0, 1]),
                "holdout_change_high": float(held[1, 1]),
                "note": f"held out: saves {held_mean[0]:.1%} of calls, changes "
                f"{held_mean[1]:.2%} of decisions ({within} the {max_change:.2%} budget)",
            }
        )
    return rows


def advise(
    outcomes: pa.Table,
    *,
    max_change: float,
    rng_seed: int = 0,
    resamples: int = 2000,
    level: float = 0.95,
    where: str = "replay input",
) -> pa.Table:
    """The advice table (AdviceRow) for every (judge, config) of a replay input."""
    if not 0.0 <= max_change <= 1.0:
        raise InputError(f"max change {max_change} is not a share between 0 and 1 (1% is 0.01)")
    frame = _per_pair(outcomes, where)
    if frame[["dataset", "pair_id"]].drop_duplicates().shape[0] < 2:
        raise InputError("advice needs at least two pairs: one for each half", file=where)
    selection = _halves(frame, rng_seed)
    rng = np.random.default_rng(rng_seed)
    rows: list[dict[str, object]] = []
    for (judge, config), part in frame.groupby(["judge", "config"], sort=False, observed=True):
        mask = selection[part.index.to_numpy()]
        for row in _config_rows(
            part, mask, max_change=max_change, rng=rng, resamples=resamples, level=level
        ):
            rows.append({"judge": judge, "config": config, "rng_seed": rng_seed, **row})
    return pa.Table.from_pylist(rows, schema=arrow_schema(AdviceRow))


def advised_policies(advice: pa.Table) -> dict[tuple[str, str], str | None]:
    """The advised policy per (judge, config) of an advice table."""
    return {
        (r["judge"], r["config"]): r["policy"] for r in advice.to_pylist() if r["rank"] == "advised"
    }
