"""Live paired unanimity's decisions: remapping executed calls, stops, summaries and their replay.

A live run executes the stopping policy instead of the full grid, over the draws of
`tasks.live.draws`. Wave 1 sends the first couple of every pair to every judge config; a pair
whose two outcomes are decisive and equal stops with that identity. Wave 2 sends the other K-2
reference calls of the pairs that did not stop; their decision is the full reference decision.
Failed calls (`M`) count as executed and are never decisive.

`replay_draws` computes the policy's result for given draws from a full grid's outcomes alone,
independently of the live path, so a live run can be checked against the replay of its own
draws.
"""

from __future__ import annotations

from typing import Final

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from schemas import LivePairRow, LiveSummaryRow, rows_to_table
from schemas.vocabulary import Design, Policy
from tasks.errors import InputError, IntegrityError
from tasks.live.draws import Group, Slot
from tasks.remap.dispositions import compute_disclosure, compute_dispositions
from tasks.remap.outcomes import RemapResult, remap_run
from tasks.runs.folder import RunFolder
from tasks.storage import read_parquet, write_parquet_atomic
from tasks.store.workdir import WorkDir

__all__ = [
    "LIVE_DESIGN",
    "LIVE_POLICY",
    "first_couple_stops",
    "live_pairs",
    "live_summary",
    "remap_executed",
    "remap_live",
    "replay_draws",
    "write_live_tables",
]

LIVE_POLICY: Final[Policy] = "paired_unanimity"
LIVE_DESIGN: Final[Design] = "balanced"

GROUP = ["judge", "config", "dataset"]
_DECISIVE = ("A", "B")


# --- executed calls ------------------------------------------------------------------------


def remap_executed(work: WorkDir, run_id: str, executed: set[Slot]) -> RemapResult:
    """Cut a live run's calls table down to the executed calls, then remap it (`remap_live`).

    The judge stage records every planned call of the plan; a live run keeps only those it
    executed, so its tables never hold an `M` for a call the policy did not make.
    """
    path = RunFolder(work, run_id).calls
    if not path.is_file():
        raise InputError(f"run {run_id!r} has no calls table: {path} does not exist")
    calls = read_parquet(path)
    slots = list(
        zip(
            calls.column("judge").to_pylist(),
            calls.column("config").to_pylist(),
            calls.column("presentation_id").to_pylist(),
            strict=True,
        )
    )
    absent = executed - set(slots)
    if absent:
        raise IntegrityError(
            f"run {run_id}: {len(absent)} executed calls are not in {path} "
            f"(e.g. {sorted(absent)[0]})"
        )
    keep = pa.array([s in executed for s in slots], type=pa.bool_())
    write_parquet_atomic(calls.filter(keep), path, overwrite=True)
    return remap_live(work, run_id)


def remap_live(work: WorkDir, run_id: str) -> RemapResult:
    """The remap stage for a live run: its gates, parsing and remapping, but outcomes only
    for the calls in the run's calls table (the executed ones), and dispositions of those."""
    result = remap_run(work, run_id)
    # Slots without a call of this run are the policy's unexecuted calls, not failures.
    outcomes = result.outcomes.filter(pc.is_valid(result.outcomes.column("call_key")))
    dispositions = compute_dispositions(outcomes)
    return RemapResult(
        run=result.run,
        parser_version=result.parser_version,
        labels=result.labels,
        outcomes=outcomes,
        dispositions=dispositions,
        disclosure=compute_disclosure(outcomes, dispositions),
    )


# --- stops and summaries -------------------------------------------------------------------


def _couples(outcomes: pa.Table, draws: pa.Table) -> pd.DataFrame:
    """Executed outcomes joined to the draws (seed, order) -> couple and position."""
    cols = ["judge", "config", "dataset", "pair_id", "seed", "order", "outcome", "key"]
    frame = outcomes.select(cols).to_pandas()
    return frame.merge(draws.to_pandas(), on=["pair_id", "seed", "order"], how="left")


def first_couple_stops(outcomes: pa.Table, draws: pa.Table) -> dict[Group, str | None]:
    """After wave 1: per (judge, config, pair) the identity it stops with, or None to go on."""
    frame = _couples(outcomes, draws)
    off_draw = frame["position"].isna()
    if off_draw.any():
        row = frame[off_draw].iloc[0]
        raise IntegrityError(
            f"outcome of pair {row.pair_id} seed {row.seed} {row.order} is not a drawn call"
        )
    stops: dict[Group, str | None] = {}
    for (judge, config, pair_id), rows in frame[frame["position"] == 0].groupby(
        ["judge", "config", "pair_id"], sort=False
    ):
        seen = dict(zip(rows["order"], rows["outcome"], strict=True))
        if len(rows) != 2 or set(seen) != {"AB", "BA"}:
            raise IntegrityError(
                f"judge {judge} config {config} pair {pair_id}: the first couple has "
                f"{len(rows)} executed calls, not one AB and one BA"
            )
        unanimous = seen["AB"] == seen["BA"] and seen["AB"] in _DECISIVE
        stops[(str(judge), str(config), str(pair_id))] = seen["AB"] if unanimous else None
    return stops


def live_pairs(outcomes: pa.Table, stops: dict[Group, str | None], k: int) -> pa.Table:
    """LivePairRow per (judge, config, pair) from the executed outcomes and wave 1's stops.

    A stopped pair must have executed its 2 calls, any other its K reference calls.
    """
    frame = outcomes.select(["judge", "config", "dataset", "pair_id", "outcome", "key"])
    rows = []
    for (judge, config, dataset, pair_id), group in frame.to_pandas().groupby(
        GROUP + ["pair_id"], sort=True
    ):
        stop = stops.get((judge, config, pair_id), "missing")
        if stop == "missing":
            raise IntegrityError(f"judge {judge} config {config} pair {pair_id}: not in wave 1")
        want = 2 if stop is not None else k
        if len(group) != want:
            raise IntegrityError(
                f"judge {judge} config {config} pair {pair_id}: executed {len(group)} calls, "
                f"the policy executes {want}"
            )
        votes = group["outcome"].value_counts()
        n_a, n_b = int(votes.get("A", 0)), int(votes.get("B", 0))
        full = "A" if n_a > n_b else "B" if n_b > n_a else "N"
        key = group["key"].iloc[0]
        rows.append(
            {
                "judge": judge,
                "config": config,
                "dataset": dataset,
                "pair_id": pair_id,
                "realised_calls": len(group),
                "stopped_early": stop is not None,
                "decision": stop if stop is not None else full,
                "key": None if pd.isna(key) else key,
            }
        )
    return rows_to_table(rows, LivePairRow)


def live_summary(pairs: pa.Table, k: int) -> pa.Table:
    """LiveSummaryRow per (judge, config, dataset): realised against planned (K per pair)."""
    frame = pairs.to_pandas()
    rows = []
    for (judge, config, dataset), group in frame.groupby(GROUP, sort=True):
        realised = int(group["realised_calls"].sum())
        planned = k * len(group)
        rows.append(
            LiveSummaryRow(
                judge=judge,
                config=config,
                dataset=dataset,
                design=LIVE_DESIGN,
                policy=LIVE_POLICY,
                pairs=len(group),
                stopped_early=int(group["stopped_early"].sum()),
                realised_calls=realised,
                planned_calls=planned,
                realised_savings=1.0 - realised / planned,
            )
        )
    return rows_to_table(rows, LiveSummaryRow)


def write_live_tables(work: WorkDir, run_id: str, pairs: pa.Table, summary: pa.Table) -> None:
    """Write `live.parquet` and `live_summary.parquet` (replacing a previous attempt's)."""
    folder = RunFolder(work, run_id).create()
    write_parquet_atomic(pairs, folder.live, overwrite=True)
    write_parquet_atomic(summary, folder.live_summary, overwrite=True)


# --- the replay of recorded draws ----------------------------------------------------------


def replay_draws(
    full_grid: pa.Table | pd.DataFrame, draws: pa.Table | pd.DataFrame
) -> pd.DataFrame:
    """What paired unanimity does with exactly these draws, read off a full grid's outcomes.

    One row per (judge, config, dataset, pair_id) of the grid: `calls`, `decision`,
    `stopped_early`. Uses the grid and the draws only, never a live run's tables.
    """
    grid = full_grid.to_pandas() if isinstance(full_grid, pa.Table) else full_grid
    drawn = draws.to_pandas() if isinstance(draws, pa.Table) else draws
    k = drawn.groupby("pair_id")["seed"].transform("size")
    drawn = drawn.assign(k=k)
    ref = grid[["judge", "config", "dataset", "pair_id", "seed", "order", "outcome"]].merge(
        drawn, on=["pair_id", "seed", "order"], how="inner"
    )
    keys = [*GROUP, "pair_id"]
    size = ref.groupby(keys)["outcome"].transform("size")
    short = ref[size != ref["k"]]
    if not short.empty:
        row = short.iloc[0]
        raise InputError(
            f"full grid lacks reference calls of judge {row.judge} config {row.config} "
            f"pair {row.pair_id}: has {int(size[short.index[0]])} of {int(row.k)}"
        )
    ref = ref.assign(
        is_a=(ref["outcome"] == "A").astype(int),
        is_b=(ref["outcome"] == "B").astype(int),
    )
    votes = ref.groupby(keys, sort=True).agg(n_a=("is_a", "sum"), n_b=("is_b", "sum"),
                                             k=("k", "first"))  # fmt: skip
    first = ref[ref["position"] == 0].pivot_table(
        index=keys, columns="order", values="outcome", aggfunc="first"
    )
    out = votes.join(first, how="left")
    stopped = (out["AB"] == out["BA"]) & out["AB"].isin(_DECISIVE)
    full = np.where(out["n_a"] > out["n_b"], "A", np.where(out["n_b"] > out["n_a"], "B", "N"))
    return pd.DataFrame(
        {
            "calls": np.where(stopped, 2, out["k"]).astype(np.int64),
            "decision": np.where(stopped, out["AB"], full),
            "stopped_early": stopped.to_numpy(dtype=bool),
        },
        index=out.index,
    ).reset_index()
