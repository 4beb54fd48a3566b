"""Decoding fields a judge or one of its reasoning configs sets, the rules each API dialect
puts on them, and secret header values.

Each decoding field present is sent and enters the call key; `null` removes it.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
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

NO_SAMPLING_VERSION = "2026-10-21"
"""The Messages API version that removed `temperature`, `top_p` and `top_k`: a Claude judge
sending it (or a later one) sends none of them."""

MIN_THINKING_BUDGET = 1024
"""The smallest `thinking.budget_tokens` the Messages API accepts."""


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


class ReasoningConfig(Decoding):
    """One reasoning configuration of a judge: decoding fields it overrides, and `extra`.

    A field the config sets replaces the judge's (`null` removes it); a config that turns
    `thinking` on also removes the temperature unless it sets one.
    """

    name: str = Field(min_length=1, description="Config name, e.g. `default`, `low`, `high`.")
    extra: dict[str, Any] = Field(
        default_factory=dict,
        description="Request parameters for this config (e.g. `reasoning_effort: high`); "
        "they override the judge's `extra` and are part of the call key.",
    )

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Only what was set: a dumped config read back overrides exactly the same fields.
        data: dict[str, Any] = handler(self)
        return {k: v for k, v in data.items() if k in ("name", "extra") or k in self.overrides}

    @property
    def overrides(self) -> frozenset[str]:
        """The decoding fields this config sets."""
        return frozenset(self.model_fields_set).intersection(DECODING_FIELDS)


def check_decoding(
    fields: dict[str, Any],
    *,
    provider: str,
    profile: str | None,
    anthropic_version: str | None,
    where: str,
) -> None:
    """Check the decoding fields of one call (`JudgeSpec.decoding`) against the judge's
    dialect and endpoint: a ValueError naming `where` for a field the API does not take."""
    if provider == "anthropic":
        bad = [f for f in (*OPENAI_ONLY, "system_role") if fields.get(f) is not None]
        if fields.get("seed") is not None:
            bad.append("seed")
        if bad:
            raise ValueError(f"{where}: {', '.join(bad)}: not a Messages API field")
        if fields.get("max_tokens") is None:
            raise ValueError(f"{where}: max_tokens: the Messages API requires one")
        version = anthropic_version or ANTHROPIC_VERSION
        sampling = [f for f in ("temperature", "top_p") if fields.get(f) is not None]
        if version >= NO_SAMPLING_VERSION and sampling:
            raise ValueError(
                f"{where}: {', '.join(sampling)}: removed in Messages API version "
                f"{NO_SAMPLING_VERSION} (anthropic_version {version}); set it to null"
            )
    elif provider == "openai-responses" and (
        bad := [f for f in ("seed", "stop") if fields.get(f) is not None]
    ):
        raise ValueError(
            f"{where}: {', '.join(bad)}: not a Responses API field (it takes neither a seed nor "
            "stop sequences); set it to null"
        )
    elif fields.get("thinking") is not None and profile != "openai_compatible":
        raise ValueError(f"{where}: thinking: an Anthropic field (OpenAI: reasoning_effort)")
    budget = (fields.get("thinking") or {}).get("budget_tokens")
    limit = fields.get("max_tokens")
    if isinstance(budget, int) and budget < MIN_THINKING_BUDGET:
        raise ValueError(f"{where}: thinking.budget_tokens must be at least {MIN_THINKING_BUDGET}")
    if isinstance(budget, int) and limit is not None and budget >= limit:
        raise ValueError(f"{where}: max_tokens must exceed thinking.budget_tokens")
