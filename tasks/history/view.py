"""One finished run seen from outside: its pairs, and per judge config its reference decisions
and headline figures, read from the run folder (never from another run).

A pair is the same pair in two runs when its dataset, id, question and both answers are the
same bytes (the manifest's SHA-256 of each answer, and of the question here): a pair whose
text changed under the same id counts as removed and added.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from schemas.run import RunRecord
from tasks.agreement.tables import order_value_counts
from tasks.errors import InputError, IntegrityError
from tasks.ingest.manifest import read_manifest
from tasks.runcheck import check_readable
from tasks.runfolder import RunFolder
from tasks.workdir import WorkDir

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


def _grid_decisions(folder: RunFolder) -> pd.DataFrame:
    """Per (judge, config, dataset, pair): the decision of all 2K calls, `A`, `B` or `N`
    (more A outcomes than B, fewer, or as many: docs/design.md#decisions-and-scores), and its
    calls of each value in each order (`COUNT_COLUMNS`, for agreement)."""
    outcomes = pd.read_parquet(
        folder.table("outcomes"), columns=[*CONFIG_KEYS, *PAIR_KEYS, "order", "outcome"]
    )
    counts = order_value_counts(outcomes, [*CONFIG_KEYS, *PAIR_KEYS])
    votes = (
        outcomes.assign(a=outcomes["outcome"] == "A", b=outcomes["outcome"] == "B")
        .groupby([*CONFIG_KEYS, *PAIR_KEYS], sort=True)[["a", "b"]]
        .sum()
        .reset_index()
    )
    pairs = zip(votes["a"], votes["b"], strict=True)
    votes["decision"] = ["A" if a > b else "B" if b > a else "N" for a, b in pairs]
    return votes[[*CONFIG_KEYS, *PAIR_KEYS, "decision"]].merge(
        counts, on=[*CONFIG_KEYS, *PAIR_KEYS], how="left"
    )


def _reference_scores(folder: RunFolder) -> pd.DataFrame:
    """Per (judge, config, dataset, pair): the expected score of the reference decision under
    SCORE_DESIGN (every policy's row of a design carries it); no rows for a run that was not
    replayed (K = 1 or odd K)."""
    columns = [*CONFIG_KEYS, *PAIR_KEYS, "reference_score"]
    if not folder.table("replay").is_file():
        return pd.DataFrame(columns=columns).astype({"reference_score": float})
    replay = pq.read_table(
        folder.table("replay"), columns=[*CONFIG_KEYS, *PAIR_KEYS, "design", "reference_score"]
    ).to_pandas()
    designs = list(dict.fromkeys(replay["design"]))
    design = SCORE_DESIGN if SCORE_DESIGN in designs else designs[0]
    chosen = replay[replay["design"] == design].drop_duplicates([*CONFIG_KEYS, *PAIR_KEYS])
    return chosen[columns]


def _figures(folder: RunFolder) -> pd.DataFrame:
    """Per judge config (all datasets): valid share, consistency, position-bias share among
    order conflicts (the left slot won both orders) and failed calls."""
    disclosure = pd.read_parquet(folder.table("disclosure"))
    per = disclosure.groupby(CONFIG_KEYS, sort=True)[
        ["planned", "valid", "stable", "conflicting", "mixed"]
    ].sum()
    dispositions = pd.read_parquet(
        folder.table("dispositions"), columns=[*CONFIG_KEYS, "disposition", "outcome_ab"]
    )
    conflicts = dispositions[dispositions["disposition"] == "order_conflict"]
    left = conflicts.assign(left=conflicts["outcome_ab"] == "A").groupby(CONFIG_KEYS)["left"]
    per["left_share"] = left.mean()
    # As in the disclosure (docs/design.md#disclosure): stable / (stable + conflicting + mixed).
    decided = per["stable"] + per["conflicting"] + per["mixed"]
    per["consistency"] = per["stable"] / decided.where(decided > 0)
    per["valid_share"] = per["valid"] / per["planned"]
    calls = pd.read_parquet(folder.calls, columns=[*CONFIG_KEYS, "status"])
    per["failed_calls"] = (
        (calls[calls["status"] == "failed"].groupby(CONFIG_KEYS).size().reindex(per.index))
        .fillna(0)
        .astype(int)
    )
    return per.reset_index()


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
        decisions = _grid_decisions(folder).merge(
            _reference_scores(folder), on=[*CONFIG_KEYS, *PAIR_KEYS], how="left"
        )
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
