"""Live paired unanimity: the recorded draws, the calls of each wave, decisions and their replay.

A live run executes the stopping policy instead of the full grid. Per pair, the draws fix a
balanced reference (K/2 seeds shown `AB`, K/2 shown `BA`), a uniform perfect matching of its
`AB` seeds to its `BA` seeds, and a uniform order of the matched couples. Wave 1 sends the
first couple of every pair to every judge config; a pair whose two outcomes are decisive
and equal stops with that identity. Wave 2 sends the other K-2 reference calls of the pairs
that did not stop; their decision is the full reference decision. Failed calls (`M`) count
as executed and are never decisive.

Every judge and config of a run uses the same draws (they depend on the rng seed and the
pair id only), so judges are compared on the same reference calls. `replay_draws` computes
the policy's result for given draws from a full grid's outcomes alone, independently of the
live path, so a live run can be checked against the replay of its own draws.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Final

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from schemas import LiveDrawRow, LivePairRow, LiveSummaryRow, conform, rows_to_table
from schemas.vocabulary import Design, Policy
from tasks.calls import PlannedCall
from tasks.dispositions import (
    compute_disclosure,
    compute_dispositions,
    disclosure_table,
    dispositions_table,
)
from tasks.errors import InputError, IntegrityError
from tasks.hashing import sha256_text
from tasks.plan import check_k
from tasks.remap import RemapResult, remap_run
from tasks.storage import write_json_atomic, write_parquet_atomic
from tasks.workdir import WorkDir

__all__ = [
    "DRAWS_FILE",
    "LIVE_DESIGN",
    "LIVE_POLICY",
    "PAIRS_FILE",
    "SUMMARY_FILE",
    "Slot",
    "draw_live",
    "draw_pair",
    "find_reference_run",
    "first_couple_stops",
    "is_live_run",
    "live_pairs",
    "live_summary",
    "read_live_summary",
    "record_live_info",
    "remap_executed",
    "remap_live",
    "replay_draws",
    "slots_of",
    "wave_calls",
    "write_draws",
    "write_live_tables",
]

DRAWS_FILE = "live_draws.parquet"
PAIRS_FILE = "live.parquet"
SUMMARY_FILE = "live_summary.parquet"
LIVE_POLICY: Final[Policy] = "paired_unanimity"
LIVE_DESIGN: Final[Design] = "balanced"

GROUP = ["judge", "config", "dataset"]
_DECISIVE = ("A", "B")
# Keeps live draws apart from a `balanced` plan drawn with the same rng seed.
_DOMAIN = int(sha256_text("judgeline live paired-unanimity draws")[:16], 16)

Slot = tuple[str, str, str]
"""(judge, config, presentation_id): one executed call of a run."""
Group = tuple[str, str, str]
"""(judge, config, pair_id): one pair under one judge config."""


# --- draws ---------------------------------------------------------------------------------


def _pair_rng(rng_seed: int, pair_id: str) -> np.random.Generator:
    """A generator per pair from (rng seed, pair id): a pair's draws ignore the other pairs."""
    word = int(sha256_text(pair_id)[:32], 16)
    return np.random.default_rng(np.random.SeedSequence([rng_seed, word, _DOMAIN]))


def _check_seed(rng_seed: Any) -> int:
    if isinstance(rng_seed, bool) or not isinstance(rng_seed, int) or rng_seed < 0:
        raise InputError(f"the live rng seed must be a non-negative integer, got {rng_seed!r}")
    return rng_seed


def draw_pair(rng_seed: int, pair_id: str, k: int) -> list[LiveDrawRow]:
    """The K reference calls of one pair: balanced orders, a matching and the couple order.

    Each draw is a uniform permutation: of K/2 `AB` and K/2 `BA` labels over the seeds, of
    the `BA` seeds against the `AB` seeds, and of the couples' places in execution order.
    """
    check_k(k)
    _check_seed(rng_seed)
    rng = _pair_rng(rng_seed, pair_id)
    half = k // 2
    is_ba = rng.permutation([0] * half + [1] * half)
    ab_seeds = [s for s in range(k) if not is_ba[s]]
    ba_seeds = [s for s in range(k) if is_ba[s]]
    partner = rng.permutation(half)
    place = rng.permutation(half)
    rows = []
    for couple in range(half):
        position = int(place[couple])
        rows.append(LiveDrawRow(pair_id=pair_id, seed=ab_seeds[couple], order="AB",
                                couple=couple, position=position))  # fmt: skip
        rows.append(LiveDrawRow(pair_id=pair_id, seed=ba_seeds[int(partner[couple])], order="BA",
                                couple=couple, position=position))  # fmt: skip
    return sorted(rows, key=lambda r: (r.position, r.order))


def draw_live(pair_ids: Iterable[str], k: int, rng_seed: int) -> pa.Table:
    """The LiveDrawRow table of every pair (K rows each), in pair order."""
    rows = [row for pair_id in dict.fromkeys(pair_ids) for row in draw_pair(rng_seed, pair_id, k)]
    return rows_to_table(rows, LiveDrawRow)


def write_draws(work: WorkDir, run_id: str, draws: pa.Table) -> Path:
    """Record a run's draws once; a run id already holding other draws is an error."""
    path = work.run_dir(run_id) / DRAWS_FILE
    if not write_parquet_atomic(draws, path):
        old = conform(pq.read_table(path), LiveDrawRow, where=str(path))
        if not old.equals(draws):
            raise IntegrityError(
                f"run {run_id}: {path} holds other draws (another rng seed, plan or manifest); "
                "use a new run id"
            )
    return path


# --- waves ---------------------------------------------------------------------------------


def wave_calls(
    planned: Sequence[PlannedCall],
    presentations: pa.Table,
    draws: pa.Table,
    *,
    first: bool,
    going_on: set[Group] | None = None,
) -> list[PlannedCall]:
    """The planned calls of wave 1 (`first`: the first couple of every pair and judge config)
    or of wave 2 (the other reference calls of the groups in `going_on`)."""
    order_of = dict(
        zip(
            presentations.column("presentation_id").to_pylist(),
            presentations.column("order").to_pylist(),
            strict=True,
        )
    )
    wanted = {
        (d["pair_id"], d["seed"], d["order"])
        for d in draws.select(["pair_id", "seed", "order", "position"]).to_pylist()
        if (d["position"] == 0) == first
    }
    out = []
    for call in planned:
        if (call.pair_id, call.seed, order_of[call.presentation_id]) not in wanted:
            continue
        if (
            going_on is not None
            and (call.judge.name, call.config.name, call.pair_id) not in going_on
        ):
            continue
        out.append(call)
    return out


def slots_of(calls: Iterable[PlannedCall]) -> set[Slot]:
    """The (judge, config, presentation_id) of each call."""
    return {(c.judge.name, c.config.name, c.presentation_id) for c in calls}


def remap_executed(work: WorkDir, run_id: str, executed: set[Slot]) -> RemapResult:
    """Cut a live run's calls table down to the executed calls, then remap it (`remap_live`).

    The judge stage records every planned call of the plan; a live run keeps only those it
    executed, so its tables never hold an `M` for a call the policy did not make.
    """
    path = work.run_dir(run_id) / "calls.parquet"
    if not path.is_file():
        raise InputError(f"run {run_id!r} has no calls table: {path} does not exist")
    calls = pq.read_table(path)
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
    frame = outcomes.to_pandas()
    disp = compute_dispositions(frame)
    return RemapResult(
        run=result.run,
        parser_version=result.parser_version,
        labels=result.labels,
        outcomes=outcomes,
        dispositions=dispositions_table(disp),
        disclosure=disclosure_table(compute_disclosure(frame, disp)),
    )


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
    folder = work.run_dir(run_id)
    write_parquet_atomic(pairs, folder / PAIRS_FILE, overwrite=True)
    write_parquet_atomic(summary, folder / SUMMARY_FILE, overwrite=True)


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


# --- runs ------------------------------------------------------------------------------------

_TRANSPORT = (
    "base_url", "api_key_env", "api_key_secret", "timeout_s", "max_concurrency",
    "requests_per_minute", "max_retries",
)  # fmt: skip


def _judge_identity(judges: Any) -> list[dict[str, Any]]:
    """The judge fields that decide replies (and the names tables use), not the transport."""
    if not isinstance(judges, list):
        return []
    return [
        {k: v for k, v in j.items() if k not in _TRANSPORT} for j in judges if isinstance(j, dict)
    ]


def _run_info(folder: Path) -> dict[str, Any] | None:
    try:
        info = json.loads((folder / "run.json").read_text("utf-8"))
    except (OSError, ValueError):
        return None
    return info if isinstance(info, dict) else None


def is_live_run(work: WorkDir, run_id: str) -> bool:
    """True if the run executed a live policy (it has live tables)."""
    return (work.root / "runs" / run_id / SUMMARY_FILE).is_file()


def find_reference_run(work: WorkDir, run_id: str) -> str | None:
    """The most recent full-grid run with replay tables of the same plan, template and judges.

    Judges match on what decides replies (model, decoding, configs, names); transport
    settings such as the base URL may differ. None if there is no such run.
    """
    runs = work.root / "runs"
    own = _run_info(runs / run_id)
    if own is None:
        return None
    fields = ("plan_id", "template_id", "template_hash")
    best: tuple[str, str] | None = None
    for folder in runs.iterdir() if runs.is_dir() else []:
        if folder.name == run_id or not (folder / "summary.parquet").is_file():
            continue
        if is_live_run(work, folder.name):
            continue
        info = _run_info(folder)
        if info is None or "live" in info or any(info.get(f) != own.get(f) for f in fields):
            continue
        if _judge_identity(info.get("judges")) != _judge_identity(own.get("judges")):
            continue
        stamp = (str(info.get("updated_at", "")), folder.name)
        best = stamp if best is None or stamp > best else best
    return None if best is None else best[1]


def read_live_summary(work: WorkDir, run_id: str) -> pa.Table | None:
    """A live run's summary table; None for a run that did not run live."""
    path = work.root / "runs" / run_id / SUMMARY_FILE
    if not path.is_file():
        return None
    return conform(pq.read_table(path), LiveSummaryRow, where=str(path))


def record_live_info(work: WorkDir, run_id: str, live: dict[str, Any]) -> None:
    """Add the live figures to the run's `run.json` (it also marks the run as live)."""
    path = work.run_dir(run_id) / "run.json"
    info = _run_info(path.parent) or {}
    info["live"] = live
    write_json_atomic(info, path, overwrite=True)
