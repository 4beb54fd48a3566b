"""Closed vocabularies (docs/design.md): identities, slots, orders, outcomes, designs, policies."""

from __future__ import annotations

from typing import Final, Literal, get_args

Identity = Literal["A", "B"]
"""An answer's identity inside a pair. Only the trusted presentation map assigns it to a slot."""

Order = Literal["AB", "BA"]
"""Display order: `AB` shows identity A in the left slot, `BA` shows identity B there."""

SlotLabel = Literal["Left", "Right", "Tie", "Abstain", "Invalid"]
"""What a parsed reply says, about slots only. `Invalid`: outside the template's contract."""

Strength = Literal["strong", "weak"]
"""Verdict strength where the template has one (`>>` is strong, `>` is weak)."""

Outcome = Literal["A", "B", "T", "X", "I", "M"]
"""Identity outcome of one planned call after remapping (docs/design.md#outcome-codes)."""

Disposition = Literal[
    "stable_A",
    "stable_B",
    "order_conflict",
    "stable_tie",
    "mixed",
    "incomplete_M",
    "incomplete_I",
    "incomplete_X",
]
"""Two-order disposition of one (pair, seed) judged in both orders (docs/design.md#dispositions)."""

Design = Literal["common", "independent", "balanced"]
"""Reference selection design: which order each of the K seeds uses (docs/design.md#designs)."""

PlanDesign = Literal["full", "common", "independent", "balanced"]
"""What a plan holds: the full 2K grid, or K presentations per pair drawn under one design."""

Policy = Literal[
    "full",
    "nonstrict",
    "strict",
    "paired_unanimity",
    "paired_nonstrict",
    "paired_strict",
    "paired_unanimity_2",
]
"""Stopping policy: how many of the reference's K calls run (docs/design.md#stopping-policies)."""

Decision = Literal["A", "B", "N"]
"""Decision of a multiset of outcomes: majority of A/B votes, else neutral."""

ErrorCategory = Literal[
    "auth",
    "quota",
    "bad_request",
    "rate_limited",
    "overloaded",
    "server_error",
    "timeout",
    "transport",
    "malformed_response",
    "refused",
    "client_error",
    "expired",
    "cancelled",
]
"""Why a judge call produced no reply. A call with one of these is `Missing`, never a result.

`auth` (401/403), `quota` (credit, spend limit or budget exhausted), `bad_request` (any other
4xx: the request or model is wrong) and `refused` never succeed when sent again; the others
are transient. `expired` and `cancelled`: a provider batch ended (24 h window over, or
cancelled) before it answered the request; sending it again can succeed. `client_error` is
no longer produced: it is how attempts logged before
`auth`, `quota` and `bad_request` existed name any 4xx, and stays readable."""

CallStatus = Literal["stored", "failed", "pending"]
"""State of a planned call in a run: a reply is stored, the last attempt failed, or not yet sent."""

IDENTITIES: Final = get_args(Identity)
ORDERS: Final = get_args(Order)
SLOT_LABELS: Final = get_args(SlotLabel)
OUTCOMES: Final = get_args(Outcome)
DISPOSITIONS: Final = get_args(Disposition)
DESIGNS: Final = get_args(Design)
PLAN_DESIGNS: Final = get_args(PlanDesign)
POLICIES: Final = get_args(Policy)
CORE_POLICIES: Final = POLICIES[:4]
"""The policies replayed unless others are asked for: `full`, `nonstrict`, `strict` and
`paired_unanimity`; the paired family beside them is replayed on request and by the advisor."""
ERROR_CATEGORIES: Final = get_args(ErrorCategory)

LEFT_IDENTITY: Final[dict[str, str]] = {"AB": "A", "BA": "B"}
"""The trusted meaning of an order: which identity sits in the left slot."""
RIGHT_IDENTITY: Final[dict[str, str]] = {"AB": "B", "BA": "A"}

FAILURE_RANK: Final[dict[str, int]] = {"M": 0, "I": 1, "X": 2}
"""Worst failure first when a two-order disposition is incomplete: M before I before X."""

MAX_K = 16
"""Largest K a plan or run may use, so K is an even number from 2 to 16: the replay's exact
counts (of call orders, in 64-bit integers) and its per-state tables are built and tested up to
16 (docs/design.md#exactness)."""
