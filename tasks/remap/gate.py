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

import numpy as np
import pandas as pd
import pyarrow as pa

from schemas import CallRecord, column_names
from tasks.errors import GateError
from tasks.gates import Check, Expect, run_gate

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
        memo_dir=memo_dir,
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
                Expect("ExpectColumnValuesToBeUnique", column="slot"),
                "calls repeat a (judge, config, presentation_id)",
            ),
        ],
        id_column="call",
        memo_dir=memo_dir,
    )
