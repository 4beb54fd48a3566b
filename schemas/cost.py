"""Prices and money: what a judge's tokens cost, spent per run and estimated before one.

Money is in US dollars, always with the date of the price it was computed from: prices
change, and a figure without its date cannot be checked.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
)


class Price(BaseModel):
    """A model's list price in USD per million tokens, as of a date.

    `cached_input` prices prompt tokens the provider read from its prompt cache (default:
    `input`); `cache_write` prices prompt tokens written to it with the default lifetime and
    `cache_write_1h` those written for an hour (defaults: `input` and `cache_write`: OpenAI
    bills no writes apart before gpt-5.6, Anthropic states both); `reasoning` prices
    reasoning tokens (default: `output`, as OpenAI and Anthropic bill them).
    `batch_discount` is the fraction taken off by a provider's batch API (0.5 = half price);
    calls sent one by one pay the list price.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    input: float = Field(ge=0, description="USD per million prompt tokens.")
    output: float = Field(ge=0, description="USD per million completion tokens.")
    cached_input: float | None = Field(
        default=None, ge=0, description="USD per million cached prompt tokens (default: input)."
    )
    cache_write: float | None = Field(
        default=None,
        ge=0,
        description="USD per million prompt tokens written to the prompt cache (default: input).",
    )
    cache_write_1h: float | None = Field(
        default=None,
        ge=0,
        description="USD per million prompt tokens written for 1 hour (default: cache_write).",
    )
    reasoning: float | None = Field(
        default=None, ge=0, description="USD per million reasoning tokens (default: output)."
    )
    batch_discount: float = Field(default=0.0, ge=0, lt=1, description="Batch API discount.")
    as_of: dt.date = Field(description="The date these prices were read.")
    source: str | None = Field(default=None, description="Where they were read.")

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Write prices left unset are left out: a price dumped before they existed (in a
        # run's run.json) reads and compares the same.
        data: dict[str, Any] = handler(self)
        return {k: v for k, v in data.items() if k not in _WRITES or v is not None}

    def usd(
        self,
        prompt_tokens: int,
        completion_tokens: int,
        cached_tokens: int = 0,
        reasoning_tokens: int = 0,
        *,
        cache_write_tokens: int = 0,
        cache_write_1h_tokens: int = 0,
        batch: bool = False,
    ) -> float:
        """The price of one reply's tokens (prompt tokens include the cached and the
        written ones, cache writes the 1-hour ones, completion tokens the reasoning ones):
        the list price, less `batch_discount` when the reply came back from a provider batch
        (`batch`)."""
        cached_rate = self.input if self.cached_input is None else self.cached_input
        write_rate = self.input if self.cache_write is None else self.cache_write
        write_1h_rate = write_rate if self.cache_write_1h is None else self.cache_write_1h
        reasoning_rate = self.output if self.reasoning is None else self.reasoning
        return (
            (
                (prompt_tokens - cached_tokens - cache_write_tokens) * self.input
                + cached_tokens * cached_rate
                + (cache_write_tokens - cache_write_1h_tokens) * write_rate
                + cache_write_1h_tokens * write_1h_rate
                + (completion_tokens - reasoning_tokens) * self.output
                + reasoning_tokens * reasoning_rate
            )
            / 1e6
            * (1.0 - self.batch_discount if batch else 1.0)
        )


_WRITES = ("cache_write", "cache_write_1h")
"""`Price` fields added after prices were first recorded in runs."""


class SpendRow(BaseModel):
    """Tokens and money one run spent, per (judge, config): sent calls only.

    Calls answered from judgeline's cache cost nothing and are counted apart
    (`cached_calls`); `cached_prompt_tokens` and `cache_write_tokens` are the sent calls'
    prompt tokens the provider's own prompt cache read and wrote. `usd` is None when the
    judge has no price; `price_as_of` dates it.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    judge: str
    config: str
    sent_calls: int = Field(description="Calls this run sent and stored a reply for.")
    cached_calls: int = Field(description="Calls answered from the cache (cost nothing).")
    prompt_tokens: int
    cached_prompt_tokens: int = Field(description="Prompt tokens read from the provider's cache.")
    cache_write_tokens: int = Field(description="Prompt tokens written to the provider's cache.")
    completion_tokens: int
    reasoning_tokens: int
    usd: float | None = None
    prompt_cache_saved_usd: float | None = Field(
        default=None,
        description="What the provider's prompt cache saved: the same tokens with every prompt "
        "token at the input price, less `usd` (negative when writes were never read).",
    )
    price_as_of: dt.date | None = None


class EstimateRow(BaseModel):
    """What a run would send and cost, per (judge, config), before anything is sent.

    Input tokens follow `tasks.judging.estimate.INPUT_TOKEN_RULE`; output tokens are the
    mean of this judge config's stored replies, or `output_default` when it has none; the
    provider's prompt cache follows `tasks.judging.estimate.CACHE_RULE`. The money range runs
    from the low to the high output estimate, with the prompt cache (`usd_*`) and without
    (`uncached_usd_*`). `pu_expected_calls` is
    live paired unanimity's expected calls over the grid (from a replay; None without one),
    `pu_usd_*` its money for the calls not cached (cached calls taken as spread evenly).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    judge: str
    config: str
    planned_calls: int
    cached_calls: int
    calls_to_send: int
    input_tokens: int = Field(description="Estimated prompt tokens of the calls to send.")
    cached_share: float | None = Field(
        default=None,
        description="Share of `input_tokens` the provider's prompt cache is expected to serve.",
    )
    cache_write_tokens: int = Field(
        default=0, description="Prompt tokens expected to be written to a cache that bills them."
    )
    output_tokens_per_call: float
    output_source: str = Field(description="`cached replies (n)` or `default`.")
    usd_low: float | None = None
    usd_high: float | None = None
    uncached_usd_low: float | None = Field(
        default=None, description="`usd_low` were no prompt cached by the provider."
    )
    uncached_usd_high: float | None = None
    price_as_of: dt.date | None = None
    pu_expected_calls: float | None = Field(
        default=None, description="Live paired unanimity: expected calls (replay of cached data)."
    )
    pu_usd_low: float | None = None
    pu_usd_high: float | None = None
