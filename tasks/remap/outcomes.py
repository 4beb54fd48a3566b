"""Remapping slot labels to identity outcomes through the trusted presentation map, and its gate.

Identities come from one place only: the presentation map (`presentations.parquet`). The gate
refuses a run whose calls point outside the map, whose hashes disagree with the run, whose
answers were not the manifest's bytes, or where anything else claims to know identities.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
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
from tasks.gates import Check, run_gate
from tasks.remap.dispositions import (
    compute_disclosure,
    compute_dispositions,
    disclosure_table,
    dispositions_table,
)
from tasks.runfolder import RunFolder
from tasks.storage import write_parquet_atomic
from tasks.workdir import WorkDir

STAGE = "remap"

# --- the identity-claim detector -----------------------------------------------------------

IDENTITY_CLAIM_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    # The map's own field names (`left_identity`, `winner_identity`, ...): no answer or
    # reply has a reason to spell them.
    (
        "identity field name",
        re.compile(r"\b(?:left|right|winner|loser|true|real|actual|slot)_identit(?:y|ies)\b", re.I),
    ),
    # A JSON or dict key `"identity":` (optionally prefixed, e.g. `"winner_identity":`).
    ("identity JSON key", re.compile(r"""["'](?:\w+_)?identity["']\s*:""", re.I)),
    # Naming the map itself, or identity metadata, e.g. "per the presentation map ...".
    (
        "names the presentation map",
        re.compile(
            r"\b(?:presentation|identity|trusted|slot)[ _-]+(?:map|mapping)\b"
            r"|\bidentity[ _-]+(?:metadata|assignment|labels?)\b",
            re.I,
        ),
    ),
    # "Answer A is identity B", "the left response is actually answer B",
    # "Assistant B corresponds to identity A": a slot or answer said to be an identity.
    (
        "claims which answer is which",
        re.compile(
            r"\b(?:answer|response|assistant|candidate|output|slot|left|right|first|second)"
            r"(?:\s+(?:answer|response|slot))?(?:\s*\(?[AB12]\)?)?\s+"
            r"(?:is|was|=|corresponds\s+to|maps\s+to|belongs\s+to|should\s+count\s+as)\s+"
            r"(?:(?:actually|really|in\s+fact|truly|secretly)\s+)?"
            r"(?:identity\s+[AB]\b|(?:the\s+)?(?:real|true|original|actual)\s+"
            r"(?:answer|response|identity)\s+[AB]\b)",
            re.I,
        ),
    ),
    # Arrow notation of the worksheet's map, "Left→B", "Right -> identity A".
    (
        "slot-to-identity arrow",
        re.compile(r"\b(?:left|right)(?:\s+slot)?\s*(?:→|->|=>)\s*(?:identity\s+)?[AB]\b", re.I),
    ),
    # Instructions to swap or override identities.
    (
        "asks to swap identities",
        re.compile(
            r"\b(?:swap|switch|reverse|override|ignore)\s+(?:the\s+)?"
            r"(?:identities|identity|presentation\s+map|answer\s+labels)\b",
            re.I,
        ),
    ),
)
"""Patterns of identity metadata outside the trusted map, each with the name a gate reports.

Slot words alone are ordinary ("Assistant A is better", "[[B>A]]", "the answer is (B)"):
every pattern needs an identity-specific word (`identity`, `map`, an `_identity` field) or
an explicit slot-to-identity arrow, so judge verdicts and multiple-choice answers pass.
"""


def identity_claims(text: str | None) -> list[str]:
    """Names of the identity-claim patterns that match `text` (empty: no claim)."""
    if not text:
        return []
    return [name for name, pattern in IDENTITY_CLAIM_PATTERNS if pattern.search(text)]


def _claims_column(texts: Iterable[str | None]) -> list[str]:
    return ["; ".join(identity_claims(t)) for t in texts]


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


# --- the gate ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunRef:
    """What a run says it used: the map (plan) and the manifest, by hash."""

    run_id: str
    plan_id: str
    manifest_hash: str


def check_call_columns(calls: pa.Table, *, where: str) -> None:
    """Refuse a call table with any column beyond CallRecord's: identities come from the map."""
    allowed = set(column_names(CallRecord))
    extra = [c for c in calls.column_names if c not in allowed]
    if extra:
        raise GateError(
            STAGE,
            [
                f"{where}: column {c!r} is not a CallRecord column; a call record may not "
                "carry identity or verdict metadata (identities come only from the "
                "presentation map)"
                for c in extra
            ],
        )


def _expect_true(column: str, says: str) -> Check:
    import great_expectations as gx

    return Check(gx.expectations.ExpectColumnValuesToBeInSet(column=column, value_set=[True]), says)


def _with_claims(ids: pd.Series, claims: list[str]) -> pd.Series:
    """An id column whose offending rows also say which pattern matched."""
    return pd.Series(
        [f"{i} [{c}]" if c else str(i) for i, c in zip(ids, claims, strict=True)],
        index=ids.index,
    )


def check_remap(
    run: RunRef,
    calls: pa.Table,
    presentations: pa.Table,
    manifest: pa.Table,
    replies: pa.Table,
) -> None:
    """The remap gate: raise GateError naming the offending map rows, pairs or calls."""
    import great_expectations as gx

    # The map and the manifest must be the ones the run names.
    pres = presentations.select(["presentation_id", "plan_id", "manifest_hash"]).to_pandas()
    run_gate(
        STAGE,
        pres,
        [
            Check(
                gx.expectations.ExpectColumnValuesToBeInSet(
                    column="plan_id", value_set=[run.plan_id]
                ),
                f"presentation map rows belong to another plan than run {run.run_id}'s "
                f"plan {run.plan_id}",
            ),
            Check(
                gx.expectations.ExpectColumnValuesToBeInSet(
                    column="manifest_hash", value_set=[run.manifest_hash]
                ),
                f"presentation map rows were planned from another manifest than run "
                f"{run.run_id}'s manifest {run.manifest_hash}",
            ),
            Check(
                gx.expectations.ExpectColumnValuesToBeUnique(column="presentation_id"),
                "presentation map repeats a presentation_id",
            ),
        ],
        id_column="presentation_id",
    )

    man = manifest.select(["pair_id", "manifest_hash", "answer_a", "answer_b"]).to_pandas()
    man["hash_ok"] = man["manifest_hash"] == run.manifest_hash
    claims_a = _claims_column(man["answer_a"])
    claims_b = _claims_column(man["answer_b"])
    man["answer_a_ok"] = [not c for c in claims_a]
    man["answer_b_ok"] = [not c for c in claims_b]
    either = [a or b for a, b in zip(claims_a, claims_b, strict=True)]
    man["pair"] = _with_claims(man["pair_id"], either)
    run_gate(
        STAGE,
        man,
        [
            _expect_true(
                "hash_ok",
                f"manifest rows carry another manifest hash than run {run.run_id}'s "
                f"{run.manifest_hash}",
            ),
            _expect_true("answer_a_ok", "answer A's text claims identities or the map"),
            _expect_true("answer_b_ok", "answer B's text claims identities or the map"),
        ],
        id_column="pair",
    )

    # Per call: in the map, same seed and dataset, and the bytes sent are the manifest's.
    cols = ["judge", "config", "dataset", "presentation_id", "call_key", "seed"]
    df = calls.select([*cols, "left_sha256", "right_sha256"]).to_pandas()
    mapped = presentations.select(
        ["presentation_id", "pair_id", "seed", "left_identity", "right_identity"]
    ).to_pandas()
    hashes = manifest.select(["pair_id", "dataset", "answer_a_sha256", "answer_b_sha256"])
    df = df.merge(
        mapped.rename(columns={"seed": "map_seed"}), on="presentation_id", how="left"
    ).merge(
        hashes.to_pandas().rename(columns={"dataset": "pair_dataset"}), on="pair_id", how="left"
    )
    df["in_map"] = df["pair_id"].notna().to_numpy(dtype=bool)
    df["in_manifest"] = (~df["in_map"] | df["answer_a_sha256"].notna()).to_numpy(dtype=bool)
    df["seed_ok"] = (~df["in_map"] | (df["seed"] == df["map_seed"])).to_numpy(dtype=bool)
    ds_ok = ~df["in_manifest"] | ~df["in_map"] | (df["dataset"] == df["pair_dataset"])
    df["dataset_ok"] = ds_ok.to_numpy(dtype=bool)
    want_left = np.where(df["left_identity"] == "A", df["answer_a_sha256"], df["answer_b_sha256"])
    want_right = np.where(df["right_identity"] == "A", df["answer_a_sha256"], df["answer_b_sha256"])
    known = (df["in_map"] & df["in_manifest"]).to_numpy(dtype=bool)
    df["left_bytes_ok"] = ~known | (df["left_sha256"].to_numpy() == want_left)
    df["right_bytes_ok"] = ~known | (df["right_sha256"].to_numpy() == want_right)
    texts = replies.select(["call_key", "raw_reply"]).to_pandas().drop_duplicates("call_key")
    texts = texts[texts["call_key"].isin(df["call_key"])]
    claim_of = dict(zip(texts["call_key"], _claims_column(texts["raw_reply"]), strict=True))
    claims = [claim_of.get(k, "") for k in df["call_key"]]
    df["reply_ok"] = [not c for c in claims]
    df["call"] = _with_claims(df["call_key"], claims)
    df["slot"] = df["judge"] + "/" + df["config"] + "/" + df["presentation_id"]
    run_gate(
        STAGE,
        df,
        [
            _expect_true("in_map", "calls name a presentation_id that is not in the map"),
            _expect_true("in_manifest", "the map puts calls on a pair the manifest lacks"),
            _expect_true("seed_ok", "calls carry another seed than their presentation"),
            _expect_true("dataset_ok", "calls carry another dataset than their pair"),
            _expect_true(
                "left_bytes_ok",
                "the left answer sent (left_sha256) is not the manifest's answer for the "
                "identity the map puts in the left slot: a changed answer needs a new manifest",
            ),
            _expect_true(
                "right_bytes_ok",
                "the right answer sent (right_sha256) is not the manifest's answer for the "
                "identity the map puts in the right slot: a changed answer needs a new manifest",
            ),
            _expect_true("reply_ok", "stored replies claim identities or the presentation map"),
            Check(
                gx.expectations.ExpectColumnValuesToBeUnique(column="slot"),
                "calls repeat a (judge, config, presentation_id)",
            ),
        ],
        id_column="call",
    )


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
    check_remap(run, calls, presentations, manifest, replies)
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
