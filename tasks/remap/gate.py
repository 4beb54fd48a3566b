"""The remap gate and the identity-claim detector: only the presentation map names identities.

The gate refuses a run whose calls point outside the map, whose hashes disagree with the run,
whose answers were not the manifest's bytes, or where anything else claims to know identities
(`identity_claims`, one documented detector for replies, answers and call records).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from schemas import CallRecord, column_names
from tasks.errors import GateError
from tasks.gates import Check, Expect, run_gate
from tasks.remap.keys import rows_in, taken

if TYPE_CHECKING:
    import pandas as pd

STAGE = "remap"

# --- the identity-claim detector -----------------------------------------------------------

IDENTITY_CLAIM_PATTERNS: tuple[tuple[str, re.Pattern[str], tuple[str, ...]], ...] = (
    # The map's own field names (`left_identity`, `winner_identity`, ...): no answer or
    # reply has a reason to spell them.
    (
        "identity field name",
        re.compile(r"\b(?:left|right|winner|loser|true|real|actual|slot)_identit(?:y|ies)\b", re.I),
        ("identit",),
    ),
    # A JSON or dict key `"identity":` (optionally prefixed, e.g. `"winner_identity":`).
    ("identity JSON key", re.compile(r"""["'](?:\w+_)?identity["']\s*:""", re.I), ("identity",)),
    # Naming the map itself, or identity metadata, e.g. "per the presentation map ...".
    (
        "names the presentation map",
        re.compile(
            r"\b(?:presentation|identity|trusted|slot)[ _-]+(?:map|mapping)\b"
            r"|\bidentity[ _-]+(?:metadata|assignment|labels?)\b",
            re.I,
        ),
        ("map", "identity"),
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
        ("identity", "real", "true", "original", "actual"),
    ),
    # Arrow notation of the worksheet's map, "Left→B", "Right -> identity A".
    (
        "slot-to-identity arrow",
        re.compile(r"\b(?:left|right)(?:\s+slot)?\s*(?:→|->|=>)\s*(?:identity\s+)?[AB]\b", re.I),
        ("→", "->", "=>"),
    ),
    # Instructions to swap or override identities.
    (
        "asks to swap identities",
        re.compile(
            r"\b(?:swap|switch|reverse|override|ignore)\s+(?:the\s+)?"
            r"(?:identities|identity|presentation\s+map|answer\s+labels)\b",
            re.I,
        ),
        ("identit", "presentation", "labels"),
    ),
)
"""Patterns of identity metadata outside the trusted map, each with the name a gate reports.

Slot words alone are ordinary ("Assistant A is better", "[[B>A]]", "the answer is (B)"):
every pattern needs an identity-specific word (`identity`, `map`, an `_identity` field) or
an explicit slot-to-identity arrow, so judge verdicts and multiple-choice answers pass.
The third item lists words one of which a match must contain (in the folded text): texts
without any are not searched, which keeps the gate cheap on long replies.
"""

# Case-insensitive regexes also match these letters to ASCII i, s and k: fold them first, so
# that a needle test never skips a text its pattern would match.
_FOLD = str.maketrans({"\u0130": "i", "\u0131": "i", "\u017f": "s", "\u212a": "k"})
_FOLDED_LETTERS = re.compile("[\u0130\u0131\u017f\u212a]")


def identity_claims(text: str | None) -> list[str]:
    """Names of the identity-claim patterns that match `text` (empty: no claim)."""
    if not text:
        return []
    folded = (text.translate(_FOLD) if _FOLDED_LETTERS.search(text) else text).lower()
    return [
        name
        for name, pattern, needles in IDENTITY_CLAIM_PATTERNS
        if any(n in folded for n in needles) and pattern.search(text)
    ]


def _claims_column(texts: Iterable[str | None]) -> list[str]:
    return ["; ".join(identity_claims(t)) for t in texts]


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
    return Check(Expect("ExpectColumnValuesToBeInSet", column=column, value_set=[True]), says)


def _with_claims(ids: pa.ChunkedArray, claims: list[str]) -> pa.Array:
    """An id column whose offending rows also say which pattern matched."""
    return pa.array(
        [f"{i} [{c}]" if c else str(i) for i, c in zip(ids.to_pylist(), claims, strict=True)],
        pa.string(),
    )


def _true(values: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    """A comparison's result, false where it is null."""
    return pc.fill_null(values, False)


def _reply_claims(calls: pa.Table, replies: pa.Table) -> list[str]:
    """Per call, the identity claims of its stored reply (a call key's first), or ""."""
    reply = rows_in([calls["call_key"]], [replies["call_key"]])
    used = np.unique(reply[reply >= 0])
    texts = replies["raw_reply"].take(pa.array(used)).to_pylist()
    claim = dict(zip(used.tolist(), _claims_column(texts), strict=True))
    return [claim.get(r, "") for r in reply.tolist()]


def _calls_frame(
    calls: pa.Table, presentations: pa.Table, manifest: pa.Table, replies: pa.Table
) -> pd.DataFrame:
    """The calls, each with its map row and its pair's hashes (left joins), and each check's
    column."""
    cols = ["judge", "config", "dataset", "presentation_id", "call_key", "seed"]
    df = calls.select([*cols, "left_sha256", "right_sha256"])
    mapped = presentations.select(
        ["pair_id", "seed", "left_identity", "right_identity"]
    ).rename_columns(["pair_id", "map_seed", "left_identity", "right_identity"])
    map_row = rows_in([df["presentation_id"]], [presentations["presentation_id"]])
    for name in mapped.column_names:
        df = df.append_column(name, taken(mapped[name], map_row))
    hashes = manifest.select(["dataset", "answer_a_sha256", "answer_b_sha256"]).rename_columns(
        ["pair_dataset", "answer_a_sha256", "answer_b_sha256"]
    )
    pair_row = rows_in([df["pair_id"]], [manifest["pair_id"]])
    for name in hashes.column_names:
        df = df.append_column(name, taken(hashes[name], pair_row))
    in_map = pc.is_valid(df["pair_id"])
    outside = pc.invert(in_map)
    in_manifest = pc.or_(outside, pc.is_valid(df["answer_a_sha256"]))
    known = pc.and_(in_map, in_manifest)
    wanted = {
        side: pc.if_else(
            _true(pc.equal(df[f"{side}_identity"], "A")),
            df["answer_a_sha256"],
            df["answer_b_sha256"],
        )
        for side in ("left", "right")
    }
    claims = _reply_claims(calls, replies)
    checks = {
        "in_map": in_map,
        "in_manifest": in_manifest,
        "seed_ok": pc.or_(outside, _true(pc.equal(df["seed"], df["map_seed"]))),
        "dataset_ok": pc.or_(
            pc.or_(pc.invert(in_manifest), outside),
            _true(pc.equal(df["dataset"], df["pair_dataset"])),
        ),
        **{
            f"{side}_bytes_ok": pc.or_(
                pc.invert(known), _true(pc.equal(df[f"{side}_sha256"], wanted[side]))
            )
            for side in ("left", "right")
        },
        "reply_ok": pa.array([not c for c in claims], pa.bool_()),
        "call": _with_claims(df["call_key"], claims),
        "slot": pc.binary_join_element_wise(df["judge"], df["config"], df["presentation_id"], "/"),
    }
    for name, column in checks.items():
        df = df.append_column(name, column)
    return df.to_pandas()


def check_remap(
    run: RunRef,
    calls: pa.Table,
    presentations: pa.Table,
    manifest: pa.Table,
    replies: pa.Table,
    *,
    memo_dir: Path | None = None,
) -> None:
    """The remap gate: raise GateError naming the offending map rows, pairs or calls.
    With `memo_dir`, tables that already passed are not validated again (`run_gate`)."""

    # The map and the manifest must be the ones the run names.
    pres = presentations.select(["presentation_id", "plan_id", "manifest_hash"]).to_pandas()
    run_gate(
        STAGE,
        pres,
        [
            Check(
                Expect("ExpectColumnValuesToBeInSet", column="plan_id", value_set=[run.plan_id]),
                f"presentation map rows belong to another plan than run {run.run_id}'s "
                f"plan {run.plan_id}",
            ),
            Check(
                Expect(
                    "ExpectColumnValuesToBeInSet",
                    column="manifest_hash",
                    value_set=[run.manifest_hash],
                ),
                f"presentation map rows were planned from another manifest than run "
                f"{run.run_id}'s manifest {run.manifest_hash}",
            ),
            Check(
                Expect("ExpectColumnValuesToBeUnique", column="presentation_id"),
                "presentation map repeats a presentation_id",
            ),
        ],
        id_column="presentation_id",
        memo_dir=memo_dir,
    )

    man = manifest.select(["pair_id", "manifest_hash", "answer_a", "answer_b"])
    claims_a = _claims_column(man["answer_a"].to_pylist())
    claims_b = _claims_column(man["answer_b"].to_pylist())
    either = [a or b for a, b in zip(claims_a, claims_b, strict=True)]
    man_checks = {
        "hash_ok": _true(pc.equal(man["manifest_hash"], run.manifest_hash)),
        "answer_a_ok": pa.array([not c for c in claims_a], pa.bool_()),
        "answer_b_ok": pa.array([not c for c in claims_b], pa.bool_()),
        "pair": _with_claims(man["pair_id"], either),
    }
    for name, column in man_checks.items():
        man = man.append_column(name, column)
    run_gate(
        STAGE,
        man.to_pandas(),
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
        memo_dir=memo_dir,
    )

    # Per call: in the map, same seed and dataset, and the bytes sent are the manifest's.
    run_gate(
        STAGE,
        _calls_frame(calls, presentations, manifest, replies),
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
                Expect("ExpectColumnValuesToBeUnique", column="slot"),
                "calls repeat a (judge, config, presentation_id)",
            ),
        ],
        id_column="call",
        memo_dir=memo_dir,
    )
