"""Identity outcomes after remapping, two-order dispositions and their disclosure counts."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from schemas.vocabulary import (
    Disposition,
    ErrorCategory,
    Identity,
    Order,
    Outcome,
    SlotLabel,
    Strength,
)


class OutcomeRow(BaseModel):
    """One planned slot remapped to an identity outcome. Its first eight columns are the
    replay input (docs/design.md#replay-input)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    judge: str
    config: str
    dataset: str
    pair_id: str
    seed: int = Field(ge=0)
    order: Order
    outcome: Outcome
    key: Identity | None = None
    presentation_id: str
    call_key: str | None = Field(default=None, description="None only if never planned a call.")
    label: SlotLabel | None = Field(default=None, description="Parsed slot label; None if M.")
    strength: Strength | None = None
    error_category: ErrorCategory | None = Field(default=None, description="Why M, if M.")


REPLAY_INPUT_COLUMNS = ("judge", "config", "dataset", "pair_id", "seed", "order", "outcome", "key")
"""The replay input contract (docs/design.md#replay-input), a prefix of OutcomeRow."""


class ReplayInputRow(BaseModel):
    """One row of the replay input (docs/design.md#replay-input)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    judge: str
    config: str
    dataset: str
    pair_id: str
    seed: int = Field(ge=0)
    order: Order
    outcome: Outcome
    key: Identity | None = None


class DispositionRow(BaseModel):
    """The two-order disposition of one (pair, seed) judged in both orders."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    judge: str
    config: str
    dataset: str
    pair_id: str
    seed: int = Field(ge=0)
    outcome_ab: Outcome
    outcome_ba: Outcome
    disposition: Disposition
    key: Identity | None = None
    correct: bool | None = Field(
        default=None, description="For stable_A/stable_B with a key: does it equal the key."
    )


class DisclosureRow(BaseModel):
    """Disclosure counts per (judge, config, dataset). Consistency and correctness apart."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    judge: str
    config: str
    dataset: str
    planned: int = Field(description="Planned calls (slots).")
    valid: int = Field(description="Slots with A, B or T.")
    missing: int
    invalid: int
    abstained: int
    tied: int = Field(description="Slots with T.")
    conflicting: int = Field(description="(pair, seed) with order_conflict.")
    mixed: int
    stable: int = Field(description="(pair, seed) with stable_A or stable_B.")
    stable_tie: int
    incomplete: int
    stable_correct: int = Field(description="Stable and equal to the key.")
    stable_wrong: int = Field(description="Stable and different from the key: consistent, wrong.")
    consistency: float | None = Field(description="stable / (stable + conflicting + mixed).")
    accuracy_of_stable: float | None = Field(description="stable_correct / keyed stable.")
