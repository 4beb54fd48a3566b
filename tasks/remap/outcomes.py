"""Remapping slot labels to identity outcomes through the trusted presentation map, and its gate.

Identities come from one place only: the presentation map (`presentations.parquet`). The gate
refuses a run whose calls point outside the map, whose hashes disagree with the run, whose
answers were not the manifest's bytes, or where anything else claims to know identities.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from schemas import CallRecord, LabelRecord, OutcomeRow, column_names, conform
from schemas.vocabulary import DISPOSITIONS, OUTCOMES
from tasks.errors import GateError, InputError, IntegrityError
from tasks.remap.dispositions import (
    compute_disclosure,
    compute_dispositions,
    disclosure_table,
    dispositions_table,
)
from tasks.remap.gate import STAGE, RunRef, check_call_columns, check_remap
from tasks.runfolder import RunFolder
from tasks.storage import write_parquet_atomic
from tasks.workdir import WorkDir

# --- parsing stored replies ------------------------------------------------------------------


class ParsedLike(Protocol):
    @property
    def label(self) -> Any: ...
    @property
    def strength(self) -> Any: ...
    @property
    def note(self) -> Any: ...


Parser = Callable[[str, str, str | None], ParsedLike]
"""`parse_reply(template_id, text, finish_reason)`, from tasks.parsing."""


def parse_labels(
    calls: pa.Table, replies: pa.Table, parse: Parser, parser_version: str
) -> pa.Table:
    """LabelRecord per (call_key, template_id) of the run that has a stored reply.

    Parsing reads only the stored reply text: a new parser version re-labels without a call.
    """
    wanted = calls.select(["call_key", "template_id"]).to_pandas().drop_duplicates()
    texts = replies.select(["call_key", "raw_reply", "finish_reason"]).to_pandas()
    todo = wanted.merge(texts.drop_duplicates("call_key"), on="call_key", how="inner")
    finish = [f if isinstance(f, str) else None for f in todo["finish_reason"]]
    parsed = [
        parse(t, r, f)
        for t, r, f in zip(todo["template_id"], todo["raw_reply"], finish, strict=True)
    ]
    frame = pd.DataFrame(
        {
            "call_key": todo["call_key"].to_numpy(),
            "template_id": todo["template_id"].to_numpy(),
            "parser_version": parser_version,
            "label": [p.label for p in parsed],
            "strength": [p.strength for p in parsed],
            "note": [p.note for p in parsed],
        },
        columns=column_names(LabelRecord),
    )
    table = pa.Table.from_pandas(frame, preserve_index=False)
    return conform(table, LabelRecord, where="labels")


# --- remapping ---------------------------------------------------------------------------------


def remap_outcomes(
    calls: pa.Table, labels: pa.Table, presentations: pa.Table, manifest: pa.Table
) -> pa.Table:
    """OutcomeRow per planned slot: every (judge, config) of the run x every map presentation.

    Slot labels become identities by the map alone (joined on presentation_id); the key
    comes from the manifest. A slot with no stored reply is `M` (with its call's error
    category); a slot no call was made for is `M` without a call_key.
    """
    pres = presentations.select(
        ["presentation_id", "pair_id", "seed", "order", "left_identity", "right_identity"]
    ).to_pandas()
    pairs = manifest.select(["pair_id", "dataset", "key"]).to_pandas()
    call_df = calls.select(
        ["judge", "config", "presentation_id", "call_key", "template_id", "error_category"]
    ).to_pandas()
    judges = call_df[["judge", "config"]].drop_duplicates()
    slots = judges.merge(pres, how="cross").merge(pairs, on="pair_id", how="left")
    slots = slots.merge(call_df, on=["judge", "config", "presentation_id"], how="left")
    lab = labels.select(["call_key", "template_id", "label", "strength"]).to_pandas()
    slots = slots.merge(lab, on=["call_key", "template_id"], how="left")

    label = slots["label"]
    outcome = np.select(
        [
            label == "Left",
            label == "Right",
            label == "Tie",
            label == "Abstain",
            label == "Invalid",
        ],
        [slots["left_identity"], slots["right_identity"], "T", "X", "I"],
        default="M",
    )
    missing = outcome == "M"
    frame = pd.DataFrame(
        {
            "judge": slots["judge"],
            "config": slots["config"],
            "dataset": slots["dataset"],
            "pair_id": slots["pair_id"],
            "seed": slots["seed"],
            "order": slots["order"],
            "outcome": outcome,
            "key": slots["key"].astype(object).where(slots["key"].notna(), None),
            "presentation_id": slots["presentation_id"],
            "call_key": slots["call_key"].astype(object).where(slots["call_key"].notna(), None),
            "label": label.astype(object).where(label.notna(), None),
            "strength": slots["strength"].astype(object).where(slots["strength"].notna(), None),
            "error_category": slots["error_category"]
            .astype(object)
            .where(missing & slots["error_category"].notna(), None),
        }
    )
    frame = frame.sort_values(
        ["judge", "config", "dataset", "pair_id", "seed", "order"], kind="stable"
    )
    table = pa.Table.from_pandas(frame.reset_index(drop=True), preserve_index=False)
    return conform(table, OutcomeRow, where="outcomes")


# --- one run, end to end -----------------------------------------------------------------------

OUTPUT_TABLES = ("labels", "outcomes", "dispositions", "disclosure")


@dataclass(frozen=True)
class RemapResult:
    """The tables one remap produced (all written only after every check passed)."""

    run: RunRef
    parser_version: str
    labels: pa.Table
    outcomes: pa.Table
    dispositions: pa.Table
    disclosure: pa.Table

    def counts(self) -> dict[str, Any]:
        """Outcome and disposition counts, for logs and the CLI."""
        outcomes = self.outcomes.column("outcome").to_pylist()
        dispositions = self.dispositions.column("disposition").to_pylist()
        return {
            "run_id": self.run.run_id,
            "parser_version": self.parser_version,
            "planned": len(outcomes),
            "outcomes": {o: outcomes.count(o) for o in OUTCOMES},
            "dispositions": {d: dispositions.count(d) for d in DISPOSITIONS},
        }


def read_run_ref(work: WorkDir, run_id: str) -> RunRef:
    """The plan and manifest a run names in its `run.json`."""
    info = RunFolder(work, run_id).read_info()
    return RunRef(run_id=run_id, plan_id=info.plan_id, manifest_hash=info.manifest_hash)


def read_calls(work: WorkDir, run: RunRef) -> pa.Table:
    """A run's planned calls, refusing any column beyond CallRecord's and foreign run ids."""
    path = RunFolder(work, run.run_id).calls
    if not path.is_file():
        raise InputError(f"run {run.run_id!r} has no calls table: {path} does not exist")
    raw = pq.read_table(path)
    check_call_columns(raw, where=str(path))
    try:
        calls = conform(raw, CallRecord, where=str(path))
    except ValueError as exc:
        raise IntegrityError(str(exc)) from None
    foreign = set(calls.column("run_id").to_pylist()) - {run.run_id}
    if foreign:
        raise IntegrityError(f"{path}: rows of other runs {sorted(foreign)[:3]}")
    return calls


def remap_run(work: WorkDir, run_id: str) -> RemapResult:
    """Parse, gate and remap one run's calls; compute dispositions and disclosure.

    Reads only stored data: no judge is called. Raises before anything is written.
    """
    from tasks.ingest.manifest import read_manifest
    from tasks.judging.cache import read_replies
    from tasks.parsing import PARSER_VERSION, parse_reply
    from tasks.plan import read_plan

    run = read_run_ref(work, run_id)
    plan_info, presentations = read_plan(work, run.plan_id)
    if plan_info.manifest_hash != run.manifest_hash:
        raise GateError(
            STAGE,
            [
                f"plan {run.plan_id} was made from manifest {plan_info.manifest_hash}, "
                f"but run {run_id} names manifest {run.manifest_hash}"
            ],
        )
    manifest_info, manifest = read_manifest(work, run.manifest_hash)
    if manifest_info.manifest_hash != run.manifest_hash:
        raise GateError(
            STAGE,
            [f"stored manifest says {manifest_info.manifest_hash}, run names {run.manifest_hash}"],
        )
    calls = read_calls(work, run)
    replies = read_replies(work, calls.column("call_key").to_pylist())
    check_remap(run, calls, presentations, manifest, replies, memo_dir=work.gate_memos)
    labels = parse_labels(calls, replies, parse_reply, PARSER_VERSION)
    outcomes = remap_outcomes(calls, labels, presentations, manifest)
    frame = outcomes.to_pandas()
    disp = compute_dispositions(frame)
    return RemapResult(
        run=run,
        parser_version=PARSER_VERSION,
        labels=labels,
        outcomes=outcomes,
        dispositions=dispositions_table(disp),
        disclosure=disclosure_table(compute_disclosure(frame, disp)),
    )


def write_remap(work: WorkDir, result: RemapResult) -> dict[str, Path]:
    """Write the run's labels, outcomes, dispositions and disclosure (replacing old ones)."""
    folder = RunFolder(work, result.run.run_id).create()
    paths = {name: folder.table(name) for name in OUTPUT_TABLES}
    for name, path in paths.items():
        write_parquet_atomic(getattr(result, name), path, overwrite=True)
    return paths
