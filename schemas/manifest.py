"""The frozen manifest: one row per pair, with exact answer bytes and their SHA-256."""

from __future__ import annotations

import datetime as dt

from pydantic import BaseModel, ConfigDict, Field

from schemas.vocabulary import Identity

MANIFEST_FORMAT = "judgeline-manifest-v1"
"""Prefix of the canonical serialisation; bump it when the canonical form changes."""


class Pair(BaseModel):
    """One pair as a loader produces it, before freezing."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    pair_id: str = Field(description="Unique within the manifest, stable across reloads.")
    dataset: str = Field(description="Dataset name, e.g. `judgebench-gpt-4o`.")
    source: str = Field(description="Where the pair came from: original subset or file.")
    question: str = Field(description="The question shown to the judge, exactly as given.")
    answer_a: str = Field(description="Identity A's answer, exact text (never stripped).")
    answer_b: str = Field(description="Identity B's answer, exact text (never stripped).")
    key: Identity | None = Field(default=None, description="Independently established better.")
    reference: str | None = Field(default=None, description="Optional reference or rubric text.")
    rubric_revision: str = Field(default="r0", description="Revision of the rubric/criterion.")
    metadata: str = Field(default="{}", description="Canonical JSON of loader-specific tags.")


class ManifestRow(BaseModel):
    """A stored manifest row: the pair plus its answers' SHA-256 and the manifest hash."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    manifest_hash: str = Field(description="SHA-256 of the manifest's canonical serialisation.")
    pair_id: str
    dataset: str
    source: str
    question: str
    answer_a: str
    answer_b: str
    answer_a_sha256: str = Field(description="SHA-256 (hex) of answer_a's UTF-8 bytes.")
    answer_b_sha256: str = Field(description="SHA-256 (hex) of answer_b's UTF-8 bytes.")
    key: Identity | None = None
    reference: str | None = None
    rubric_revision: str = "r0"
    metadata: str = "{}"


class ManifestInfo(BaseModel):
    """Sidecar of a stored manifest (`manifest.json`)."""

    model_config = ConfigDict(extra="forbid")

    format: str = MANIFEST_FORMAT
    manifest_hash: str
    pairs: int
    datasets: dict[str, int] = Field(description="Pairs per dataset.")
    keys: dict[str, int] = Field(description="Pairs per key value (`A`, `B`, `none`).")
    sources: list[str] = Field(description="Input files or generators the pairs came from.")
    identical_answer_pairs: list[str] = Field(
        default_factory=list, description="Pairs whose A and B bytes are identical (kept)."
    )
    created_at: dt.datetime
