"""Trends: every judge config's history across runs, from the DuckDB warehouse.

Per run and judge config: the reference score (balanced design) with its 95% bootstrap
interval over pairs, consistency, the left slot's share of order conflicts, the valid share,
failed calls, the expected savings of paired unanimity, Krippendorff's alpha over each pair's
calls with its interval, and the calls the run sent with their USD (`tasks.judging.spend`;
NaN where the judge has no price). Runs are ordered by start time and named by their record;
a run folder without a readable record is left out.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from schemas.cost import SpendRow
from tasks.agreement.stats import alpha_from_sums, estimate, unit_features
from tasks.agreement.tables import VALUES
from tasks.bootstrap import bootstrap_interval
from tasks.errors import InputError
from tasks.judging.cache import read_attempts
from tasks.judging.spend import run_spend
from tasks.runs.record import list_records
from tasks.store.workdir import WorkDir
from tasks.warehouse import query

__all__ = ["TrendPoint", "trend_points"]


@dataclass(frozen=True)
class TrendPoint:
    """One run's figures for one judge config."""

    run_id: str
    name: str
    started_at: dt.datetime
    status: str
    judge: str
    config: str
    pairs: int
    score: float
    score_low: float
    score_high: float
    consistency: float
    left_share: float
    valid_share: float
    failed_calls: int
    pu_savings: float
    sent_calls: int = 0
    usd: float = math.nan
    alpha: float = math.nan
    alpha_low: float = math.nan
    alpha_high: float = math.nan
    """Krippendorff's alpha over all calls of each pair, with its 95% interval over pairs."""


def _num(value: Any) -> float:
    """A float, NaN for a missing value (no pairs, no conflicts, no replay)."""
    return float("nan") if value is None else float(value)


def _spend(work: WorkDir, run_id: str, attempts: pa.Table) -> dict[tuple[str, str], SpendRow]:
    """What a run sent and spent per (judge, config); nothing for a run without calls."""
    try:
        return {(r.judge, r.config): r for r in run_spend(work, run_id, attempts)}
    except InputError:
        return {}


def _alphas(counts: pd.DataFrame) -> dict[tuple[str, str, str], dict[str, float]]:
    """Per (run, judge, config): alpha over all calls of each pair, and its interval."""
    out = {}
    for key, group in counts.groupby(["run_id", "judge", "config"], sort=False):
        per_pair = group.pivot_table(
            index=["dataset", "pair_id"], columns="outcome", values="calls", aggfunc="sum"
        )
        values = per_pair.reindex(columns=list(VALUES), fill_value=0).fillna(0).to_numpy()
        est = estimate(unit_features(values), alpha_from_sums, seed_parts=tuple(key)[1:])
        out[(str(key[0]), str(key[1]), str(key[2]))] = {
            "alpha": est.value,
            "alpha_low": est.low,
            "alpha_high": est.high,
        }
    return out


def trend_points(work: WorkDir) -> list[TrendPoint]:
    """Every run's trend points, oldest run first, judge configs in name order."""
    records = {r.run_id: r for r in list_records(work)}
    rows = query(work, "report_trends")
    pairs = query(work, "report_trend_pairs")
    scores = {
        key: group["score"].to_numpy(dtype=float)
        for key, group in pairs.groupby(["run_id", "judge", "config"], sort=False)
    }
    alphas = _alphas(query(work, "report_trend_counts"))
    points = []
    spends: dict[str, dict[tuple[str, str], SpendRow]] = {}
    attempts = read_attempts(work)  # once for every run's spend
    for row in rows.to_dict("records"):
        record = records.get(str(row["run_id"]))
        if record is None:
            continue
        if record.run_id not in spends:
            spends[record.run_id] = _spend(work, record.run_id, attempts)
        spent = spends[record.run_id].get((str(row["judge"]), str(row["config"])))
        values = scores.get((row["run_id"], row["judge"], row["config"]), np.empty(0))
        low, high = bootstrap_interval(
            values, seed_parts=(row["judge"], row["config"], len(values))
        )
        points.append(
            TrendPoint(
                run_id=str(row["run_id"]),
                name=record.name,
                started_at=record.started_at,
                status=record.status,
                judge=str(row["judge"]),
                config=str(row["config"]),
                pairs=0 if math.isnan(_num(row["pairs"])) else int(row["pairs"]),
                score=_num(row["score"]),
                score_low=low,
                score_high=high,
                consistency=_num(row["consistency"]),
                left_share=_num(row["left_share"]),
                valid_share=_num(row["valid_share"]),
                failed_calls=int(row["failed_calls"]),
                pu_savings=_num(row["pu_savings"]),
                sent_calls=0 if spent is None else spent.sent_calls,
                usd=_num(None if spent is None else spent.usd),
                **alphas.get((row["run_id"], row["judge"], row["config"]), {}),
            )
        )
    return sorted(points, key=lambda p: (p.started_at, p.run_id, p.judge, p.config))
