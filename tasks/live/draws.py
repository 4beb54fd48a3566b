"""Live paired unanimity's draws: the reference calls each pair executes, and each wave's calls.

Per pair, the draws fix a balanced reference (K/2 seeds shown `AB`, K/2 shown `BA`), a uniform
perfect matching of its `AB` seeds to its `BA` seeds, and a uniform order of the matched
couples. Wave 1 is the first couple of every pair; wave 2 the other K-2 reference calls of the
pairs that did not stop.

Every judge and config of a run uses the same draws (they depend on the rng seed and the
pair id only), so judges are compared on the same reference calls.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from schemas import LiveDrawRow, conform, rows_to_table
from tasks.errors import InputError, IntegrityError
from tasks.hashing import sha256_text
from tasks.judging.planned import PlannedCall
from tasks.plan import check_k
from tasks.runs.folder import RunFolder
from tasks.storage import write_parquet_atomic
from tasks.store.workdir import WorkDir

__all__ = [
    "Group",
    "Slot",
    "draw_live",
    "draw_pair",
    "slots_of",
    "wave_calls",
    "write_draws",
]


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
    path = RunFolder(work, run_id).live_draws
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
