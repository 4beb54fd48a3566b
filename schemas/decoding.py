"""Decoding fields a judge or one of its configs sets, and secret header values.

Each decoding field present is sent and enters the call key; `null` removes it.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    model_validator,
)

ANTHROPIC_VERSION = "2023-06-01"
"""The `anthropic-version` header sent unless a judge sets another."""

DECODING_FIELDS = (
    "temperature",
    "max_tokens",
    "seed",
    "top_p",
    "stop",
    "response_format",
    "reasoning_effort",
    "thinking",
    "system_role",
)
"""Fields a judge sets and its configs may override (`null` removes the field)."""

RESERVED_HEADERS = frozenset(
    {"authorization", "api-key", "x-api-key", "anthropic-version", "anthropic-beta",
     "content-type", "content-length", "host", "x-judgeline-call-key"}
)  # fmt: skip
OPENAI_ONLY = ("response_format", "reasoning_effort")


class SecretRef(BaseModel):
    """A header value read when the run starts: from an environment variable or a Prefect
    Secret block. Its value is never written to a file or a log."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    env: str | None = Field(default=None, min_length=1, description="Environment variable.")
    secret: str | None = Field(default=None, min_length=1, description="Prefect Secret block.")

    @model_validator(mode="after")
    def _one(self) -> SecretRef:
        if (self.env is None) == (self.secret is None):
            raise ValueError("set exactly one of env and secret")
        return self


class Decoding(BaseModel):
    """Request fields that decide a reply; each one present is sent and enters the call key."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    temperature: float | None = Field(default=None, ge=0.0, description="Sampling temperature.")
    max_tokens: int | None = Field(
        default=None,
        ge=1,
        description="Reply length limit in tokens (reasoning and thinking tokens count), sent "
        "as `max_completion_tokens` to OpenAI and Azure reasoning models.",
    )
    seed: int | Literal["plan"] | None = Field(
        default=None,
        description="`plan`: the seed of each planned call; a number: that seed on every call.",
    )
    top_p: float | None = Field(default=None, gt=0.0, le=1.0, description="Nucleus sampling.")
    stop: str | list[str] | None = Field(
        default=None, description="Stop sequences (`stop_sequences` for Anthropic)."
    )
    response_format: dict[str, Any] | None = Field(
        default=None, description="OpenAI dialect: e.g. `{type: json_object}`."
    )
    reasoning_effort: str | None = Field(
        default=None, min_length=1, description="OpenAI dialect: e.g. `low`, `medium`, `high`."
    )
    thinking: dict[str, Any] | None = Field(
        default=None,
        description="Anthropic extended thinking, e.g. `{type: enabled, budget_tokens: 4000}`.",
    )
    system_role: Literal["system", "developer", "user"] | None = Field(
        default=None,
        description="OpenAI dialect: the role system prompts are sent as (`developer`), or "
        "`user` to prepend them to the first user message; Anthropic always sends `system`.",
    )


def thinking_on(thinking: dict[str, Any] | None) -> bool:
    """Whether a `thinking` value turns extended thinking on."""
    return thinking is not None and thinking.get("type") != "disabled"
