"""One finished run seen from outside: its pairs, and per judge config its reference decisions
and headline figures, read from the run folder (never from another run).

A pair is the same pair in two runs when its dataset, id, question and both answers are the
same bytes (the manifest's SHA-256 of each answer, and of the question here): a pair whose
text changed under the same id counts as removed and added.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from schemas.run import RunRecord
from tasks.agreement.tables import order_value_counts
from tasks.errors import InputError, IntegrityError
from tasks.ingest.manifest import read_manifest
from tasks.runs.check import check_readable
from tasks.runs.folder import RunFolder
from tasks.storage import read_parquet
from tasks.store.workdir import WorkDir

__all__ = ["CONFIG_KEYS", "PAIR_KEYS", "RunView", "read_run_view"]

PAIR_KEYS = ["dataset", "pair_id"]
CONFIG_KEYS = ["judge", "config"]


@dataclass(frozen=True)
class RunView:
    """A run's pairs (`pairs`: dataset, pair_id, fingerprint, key) and, per (judge, config,
    dataset, pair_id), the decision of all 2K calls, its calls of each value per order and the
    reference score under SCORE_DESIGN, NaN without a replay (`decisions`), plus per judge
    config its headline figures (`figures`) and judge-stage counts."""

    record: RunRecord
    pairs: pd.DataFrame
    decisions: pd.DataFrame
    figures: pd.DataFrame
    calls: dict[str, object]


def _fingerprints(work: WorkDir, manifest_hash: str) -> pd.DataFrame:
    _, manifest = read_manifest(work, manifest_hash, gate=False)
    frame = manifest.select(
        ["dataset", "pair_id", "question", "answer_a_sha256", "answer_b_sha256", "key"]
    ).to_pandas()
    question = [hashlib.sha256(q.encode("utf-8")).hexdigest() for q in frame["question"]]
    frame["fingerprint"] = [
        hashlib.sha256(f"{q}|{a}|{b}".encode()).hexdigest()[:32]
        for q, a, b in zip(
            question, frame["answer_a_sha256"], frame["answer_b_sha256"], strict=True
        )
    ]
    return frame[["dataset", "pair_id", "fingerprint", "key"]]


SCORE_DESIGN = "balanced"
"""The reference design whose expected score a diff compares (the report's headline design);
a run that did not replay it falls back to the first design it did replay."""


_GRID_KEYS = [*CONFIG_KEYS, *PAIR_KEYS]


def _sorted(table: pa.Table, keys: list[str]) -> pa.Table:
    return table.sort_by([(k, "ascending") for k in keys])


def _grid_decisions(folder: RunFolder) -> pa.Table:
    """Per (judge, config, dataset, pair): the decision of all 2K calls, `A`, `B` or `N`
    (more A outcomes than B, fewer, or as many: docs/design.md#decisions-and-scores), and its
    calls of each value in each order (`COUNT_COLUMNS`, for agreement); in no particular
    order."""
    outcomes = read_parquet(folder.table("outcomes"), columns=[*_GRID_KEYS, "order", "outcome"])
    counts = order_value_counts(outcomes, _GRID_KEYS)
    a = pc.add(counts.column("n_AB_A"), counts.column("n_BA_A"))
    b = pc.add(counts.column("n_AB_B"), counts.column("n_BA_B"))
    decision = pc.if_else(pc.greater(a, b), "A", pc.if_else(pc.greater(b, a), "B", "N"))
    return counts.add_column(len(_GRID_KEYS), "decision", decision)


def _reference_scores(folder: RunFolder) -> pa.Table:
    """Per (judge, config, dataset, pair): the expected score of the reference decision under
    SCORE_DESIGN (every policy's row of a design carries it: the first row's is taken); no
    rows for a run that was not replayed (K = 1 or odd K)."""
    if not folder.table("replay").is_file():
        empty = {k: pa.array([], pa.string()) for k in _GRID_KEYS}
        return pa.table(empty | {"reference_score": pa.array([], pa.float64())})
    replay = read_parquet(
        folder.table("replay"), columns=[*_GRID_KEYS, "design", "reference_score"]
    )
    designs = replay.column("design")
    scored = pc.any(pc.equal(designs, SCORE_DESIGN)).as_py()
    design = SCORE_DESIGN if scored else designs[0].as_py()
    chosen = replay.filter(pc.equal(designs, design))
    first = pc.ScalarAggregateOptions(skip_nulls=False)
    found = chosen.group_by(_GRID_KEYS, use_threads=False).aggregate(
        [("reference_score", "first", first)]
    )
    return found.select([*_GRID_KEYS, "reference_score_first"]).rename_columns(
        [*_GRID_KEYS, "reference_score"]
    )


def _counts(table: pa.Table, flag: pa.ChunkedArray) -> dict[tuple[str, str], tuple[int, int]]:
    """Per (judge, config) of `table`: its rows where `flag` (one per row) holds, and its
    rows."""
    flagged = table.select(CONFIG_KEYS).append_column("flag", flag.fill_null(False))
    every = pc.ScalarAggregateOptions(min_count=0)
    sums = flagged.group_by(CONFIG_KEYS).aggregate([("flag", "sum", every), ([], "count_all")])
    return {
        (str(j), str(c)): (int(n), int(rows))
        for j, c, n, rows in zip(
            *(sums.column(k).to_pylist() for k in (*CONFIG_KEYS, "flag_sum", "count_all")),
            strict=True,
        )
    }


def _figures(folder: RunFolder) -> pd.DataFrame:
    """Per judge config (all datasets): valid share, consistency, position-bias share among
    order conflicts (the left slot won both orders) and failed calls."""
    counted = ["planned", "valid", "stable", "conflicting", "mixed"]
    disclosure = read_parquet(folder.table("disclosure"), columns=[*CONFIG_KEYS, *counted])
    sums = _sorted(
        disclosure.group_by(CONFIG_KEYS).aggregate([(c, "sum") for c in counted]), CONFIG_KEYS
    )
    per = {k: sums.column(k) for k in CONFIG_KEYS}
    per |= {c: sums.column(f"{c}_sum").to_numpy() for c in counted}
    configs = list(zip(*(sums.column(k).to_pylist() for k in CONFIG_KEYS), strict=True))
    dispositions = read_parquet(
        folder.table("dispositions"), columns=[*CONFIG_KEYS, "disposition", "outcome_ab"]
    )
    conflicts = dispositions.filter(pc.equal(dispositions.column("disposition"), "order_conflict"))
    left = _counts(conflicts, pc.equal(conflicts.column("outcome_ab"), "A"))
    share = {k: n / rows for k, (n, rows) in left.items()}  # a config without one: NaN
    per["left_share"] = np.array([share.get(k, math.nan) for k in configs], dtype=float)
    # As in the disclosure (docs/design.md#disclosure): stable / (stable + conflicting + mixed).
    decided = per["stable"] + per["conflicting"] + per["mixed"]
    with np.errstate(divide="ignore", invalid="ignore"):  # NaN or inf, as pandas divides
        per["consistency"] = per["stable"] / np.where(decided > 0, decided, np.nan)
        per["valid_share"] = per["valid"] / per["planned"]
    calls = read_parquet(folder.calls, columns=[*CONFIG_KEYS, "status"])
    failed = _counts(calls, pc.equal(calls.column("status"), "failed"))
    per["failed_calls"] = np.array([failed.get(k, (0, 0))[0] for k in configs], dtype=np.int64)
    return pa.table(per).to_pandas()


def read_run_view(work: WorkDir, run_id: str) -> RunView:
    """The run's pairs, decisions, reference scores (NaN for a run not replayed) and
    figures; an InputError if it has no outcomes, an IntegrityError naming every damaged
    file if it cannot be read."""
    folder = RunFolder(work, run_id)
    record = folder.read_record()
    if record.manifest_hash is None or not folder.outcomes.is_file():
        raise InputError(
            f"run {run_id!r} has no outcomes to compare (status {record.status}); only a run "
            "that finished its remap can be compared"
        )
    check_readable(folder, results_only=True)
    try:
        pairs = _fingerprints(work, record.manifest_hash)
        decisions = _sorted(
            _grid_decisions(folder).join(
                _reference_scores(folder), keys=_GRID_KEYS, join_type="left outer"
            ),
            _GRID_KEYS,
        ).to_pandas()
        figures = _figures(folder)
    except (OSError, ValueError, pa.ArrowException) as exc:  # damaged past its footer
        raise IntegrityError(
            f"run {run_id!r} cannot be read: {type(exc).__name__}: {exc}"[:600]
        ) from exc
    info = folder.read_info() if folder.info.is_file() else None
    return RunView(
        record=record,
        pairs=pairs,
        decisions=decisions,
        figures=figures,
        calls=dict(info.counts or {}) if info is not None else dict(record.calls),
    )
