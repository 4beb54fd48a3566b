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
import pyarrow as pa
import pyarrow.compute as pc

from schemas import CallRecord, LabelRecord, OutcomeRow, conform
from schemas.vocabulary import DISPOSITIONS, OUTCOMES
from tasks.errors import GateError, InputError, IntegrityError
from tasks.remap.dispositions import compute_disclosure, compute_dispositions
from tasks.remap.gate import STAGE, RunRef, check_call_columns, check_remap
from tasks.remap.keys import first_rows, places, row_codes, rows_in, sort_order, taken
from tasks.runs.folder import RunFolder
from tasks.storage import read_parquet, write_parquet_atomic
from tasks.store.workdir import WorkDir

# --- parsing stored replies ------------------------------------------------------------------


class ParsedLike(Protocol):
    @property
    def label(self) -> Any: ...
    @property
    def strength(self) -> Any: ...
    @property
    def note(self) -> Any: ...


Parser = Callable[[str, str, str | None], ParsedLike]
"""`parse_reply(template_id, text, finish_reason)`, from tasks.prompts.parsing."""


def parse_labels(
    calls: pa.Table, replies: pa.Table, parse: Parser, parser_version: str
) -> pa.Table:
    """LabelRecord per (call_key, template_id) of the run that has a stored reply, in the
    order of the calls (a call key's first stored reply is parsed).

    Parsing reads only the stored reply text: a new parser version re-labels without a call.
    """
    keys = [calls["call_key"], calls["template_id"]]
    wanted = calls.select(["call_key", "template_id"]).take(pa.array(first_rows(row_codes(keys))))
    reply = rows_in([wanted["call_key"]], [replies["call_key"]])
    found = reply >= 0
    todo = wanted.filter(pa.array(found))
    texts = replies.select(["raw_reply", "finish_reason"]).take(pa.array(reply[found]))
    parsed = [
        parse(t, r, f)
        for t, r, f in zip(
            todo["template_id"].to_pylist(),
            texts["raw_reply"].to_pylist(),
            texts["finish_reason"].to_pylist(),
            strict=True,
        )
    ]
    table = pa.table(
        {
            "call_key": todo["call_key"],
            "template_id": todo["template_id"],
            "parser_version": pa.array([parser_version] * len(parsed), pa.string()),
            "label": pa.array([p.label for p in parsed], pa.string()),
            "strength": pa.array([p.strength for p in parsed], pa.string()),
            "note": pa.array([p.note for p in parsed], pa.string()),
        }
    )
    return conform(table, LabelRecord, where="labels")


# --- remapping ---------------------------------------------------------------------------------

_LABELS = pa.array(["Left", "Right", "Tie", "Abstain", "Invalid"])
_OUTCOME_OF_LABEL = pa.array(["", "", "T", "X", "I", "M"])
"""The outcome of each label in `_LABELS` but Left and Right (their slot's identity), then M."""
OUTCOME_ORDER = ["judge", "config", "dataset", "pair_id", "seed", "order"]
"""How an outcomes table is sorted."""


def _judges(calls: pa.Table) -> tuple[pa.Table, np.ndarray]:
    """The run's (judge, config)s, sorted, and each call's among them."""
    codes = row_codes([calls["judge"], calls["config"]])
    judges = calls.select(["judge", "config"]).take(pa.array(first_rows(codes)))
    order = sort_order([judges["judge"], judges["config"]])
    return judges.take(pa.array(order)), places(order)[codes]


def _sorted_map(presentations: pa.Table, manifest: pa.Table) -> tuple[pa.Table, np.ndarray]:
    """The map's presentations with their pair's dataset and key, sorted by dataset, pair,
    seed and order, and the sorted position of each map row."""
    pair = rows_in(
        [presentations["pair_id"]],
        [manifest["pair_id"]],
        repeats="outcomes: the manifest repeats a pair_id",
    )
    pres = presentations.select(
        ["pair_id", "seed", "order", "presentation_id", "left_identity", "right_identity"]
    )
    pres = pres.append_column("dataset", taken(manifest["dataset"], pair))
    pres = pres.append_column("key", taken(manifest["key"], pair))
    order = sort_order([pres[c] for c in OUTCOME_ORDER[2:]])
    return pres.take(pa.array(order)), places(order)


def remap_outcomes(
    calls: pa.Table, labels: pa.Table, presentations: pa.Table, manifest: pa.Table
) -> pa.Table:
    """OutcomeRow per planned slot: every (judge, config) of the run x every map presentation,
    sorted by `OUTCOME_ORDER`.

    Slot labels become identities by the map alone (joined on presentation_id); the key
    comes from the manifest. A slot with no stored reply is `M` (with its call's error
    category); a slot no call was made for is `M` without a call_key.
    """
    judges, judge_of_call = _judges(calls)
    pres, position = _sorted_map(presentations, manifest)
    # Slots are judge-major, each judge's in the sorted map's order: sorted by OUTCOME_ORDER
    # (a stable sort of the slots would leave ties in the map's order, as this does).
    mapped = rows_in(
        [calls["presentation_id"]],
        [presentations["presentation_id"]],
        repeats="outcomes: the presentation map repeats a presentation_id",
    )
    inside = mapped >= 0
    slot = judge_of_call[inside] * pres.num_rows + position[mapped[inside]]
    call = np.full(judges.num_rows * pres.num_rows, -1, dtype=np.int64)
    call[slot] = np.flatnonzero(inside)
    if np.count_nonzero(call >= 0) != len(slot):
        raise IntegrityError("outcomes: calls repeat a (judge, config, presentation_id)")
    label_row = rows_in(
        [calls["call_key"], calls["template_id"]],
        [labels["call_key"], labels["template_id"]],
        repeats="outcomes: the labels repeat a (call_key, template_id)",
    )
    label_row = np.where(call >= 0, label_row[call], -1)
    label = taken(labels["label"], label_row)

    def each_judge(name: str) -> pa.ChunkedArray:
        return pa.chunked_array(pres[name].chunks * judges.num_rows, pres.schema.field(name).type)

    def per_judge(name: str) -> pa.ChunkedArray:
        values = judges[name].to_pylist()
        return pa.chunked_array([pa.repeat(v, pres.num_rows) for v in values], pa.string())

    code = pc.fill_null(pc.index_in(label, value_set=_LABELS), len(_LABELS))
    outcome = pc.if_else(
        pc.equal(code, 0),
        each_judge("left_identity"),
        pc.if_else(pc.equal(code, 1), each_judge("right_identity"), _OUTCOME_OF_LABEL.take(code)),
    )
    missing = pc.equal(outcome, "M")
    table = pa.table(
        {
            "judge": per_judge("judge"),
            "config": per_judge("config"),
            **{c: each_judge(c) for c in ("dataset", "pair_id", "seed", "order")},
            "outcome": outcome,
            "key": each_judge("key"),
            "presentation_id": each_judge("presentation_id"),
            "call_key": taken(calls["call_key"], call),
            "label": label,
            "strength": taken(labels["strength"], label_row),
            "error_category": pc.if_else(
                missing, taken(calls["error_category"], call), pa.scalar(None, pa.string())
            ),
        }
    )
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
    raw = read_parquet(path)
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
    from tasks.plan import read_plan
    from tasks.prompts.parsing import PARSER_VERSION, parse_reply

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
    dispositions = compute_dispositions(outcomes)
    return RemapResult(
        run=run,
        parser_version=PARSER_VERSION,
        labels=labels,
        outcomes=outcomes,
        dispositions=dispositions,
        disclosure=compute_disclosure(outcomes, dispositions),
    )


def write_remap(work: WorkDir, result: RemapResult) -> dict[str, Path]:
    """Write the run's labels, outcomes, dispositions and disclosure (replacing old ones)."""
    folder = RunFolder(work, result.run.run_id).create()
    paths = {name: folder.table(name) for name in OUTPUT_TABLES}
    for name, path in paths.items():
        write_parquet_atomic(getattr(result, name), path, overwrite=True)
    return paths
