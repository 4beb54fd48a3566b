"""Judge calls: planned calls of a run, stored replies (the cache), attempts and parsed labels."""

from __future__ import annotations

import datetime as dt

from pydantic import BaseModel, ConfigDict, Field

from schemas.arrow import ADDED_LATER
from schemas.vocabulary import CallStatus, ErrorCategory, SlotLabel, Strength


class CallRecord(BaseModel):
    """One planned judge call of a run: a presentation sent to one judge configuration.

    It names slots and hashes only. It never carries identities: the remap stage rejects
    a call table with any identity column.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    run_id: str
    judge: str = Field(description="Judge name from the run configuration.")
    config: str = Field(description="Reasoning configuration name of that judge.")
    dataset: str
    presentation_id: str
    call_key: str = Field(description="SHA-256 of what decides the reply; the cache key.")
    provider: str
    model: str
    template_id: str
    template_hash: str
    seed: int = Field(description="Seed index of the presentation (also the decoding seed).")
    left_sha256: str = Field(description="SHA-256 of the answer bytes placed in the left slot.")
    right_sha256: str = Field(description="SHA-256 of the answer bytes placed in the right slot.")
    status: CallStatus
    error_category: ErrorCategory | None = None


TRUNCATED_FINISH_REASONS: frozenset[str] = frozenset({"length", "max_tokens", "max_output_tokens"})
"""Finish reasons of a reply cut by the token limit: OpenAI `length`, Anthropic `max_tokens`,
the Responses API's `max_output_tokens` (its `incomplete_details.reason`)."""


class ReplyRecord(BaseModel):
    """A successful reply, stored verbatim in the content-addressed cache (immutable).

    A reply cut by the token limit is stored too (it was paid for, and sending it again buys
    the same cut); `truncated` says so, and parsing labels it Invalid. `prompt_tokens`
    counts every prompt token, cached ones included (Anthropic's input_tokens plus its
    cache reads and writes): cached_prompt_tokens and cache_write_tokens are parts of it.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    call_key: str
    provider: str
    model: str
    raw_reply: str = Field(description="The reply's text content, verbatim.")
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    latency_ms: float
    received_at: dt.datetime
    cached_prompt_tokens: int | None = Field(
        default=None,
        description="Prompt tokens read from the provider's prompt cache, part of "
        "prompt_tokens (OpenAI prompt_tokens_details.cached_tokens, Anthropic "
        "cache_read_input_tokens); None if not reported (older cache files).",
        json_schema_extra=ADDED_LATER,
    )
    reasoning_tokens: int | None = Field(
        default=None,
        description="Reasoning tokens, part of completion_tokens (OpenAI "
        "completion_tokens_details.reasoning_tokens); None if not reported.",
        json_schema_extra=ADDED_LATER,
    )
    cache_write_tokens: int | None = Field(
        default=None,
        description="Prompt tokens written to the provider's prompt cache, part of "
        "prompt_tokens (Anthropic cache_creation_input_tokens; OpenAI bills no writes apart "
        "and reports none); None if not reported.",
        json_schema_extra=ADDED_LATER,
    )
    cache_write_1h_tokens: int | None = Field(
        default=None,
        description="Of cache_write_tokens, those written with the 1-hour lifetime (Anthropic "
        "usage.cache_creation.ephemeral_1h_input_tokens); None if not reported.",
        json_schema_extra=ADDED_LATER,
    )
    sent_in_batch: bool | None = Field(
        default=None,
        description="True when the reply came back from a provider batch (billed at the "
        "price's batch discount); None for a reply sent on its own (and older cache files).",
        json_schema_extra=ADDED_LATER,
    )

    @property
    def truncated(self) -> bool:
        """Whether the reply was cut by the token limit (`TRUNCATED_FINISH_REASONS`)."""
        return self.finish_reason in TRUNCATED_FINISH_REASONS


class AttemptRecord(BaseModel):
    """One attempt to send a call, successful or not (the attempts log, append-only)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    call_key: str
    run_id: str
    attempt: int = Field(ge=1)
    ok: bool
    error_category: ErrorCategory | None = None
    http_status: int | None = None
    detail: str | None = Field(
        default=None,
        description="Why it failed, with the provider's own message (at most 4 KB); never "
        "holds a key.",
    )
    latency_ms: float
    started_at: dt.datetime


class LabelRecord(BaseModel):
    """A stored reply parsed under one parser version; re-parsing never calls the judge."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    call_key: str
    template_id: str
    parser_version: str
    label: SlotLabel
    strength: Strength | None = None
    note: str | None = Field(default=None, description="Why a reply is Invalid, if it is.")
