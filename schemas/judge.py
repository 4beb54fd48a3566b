"""Judge specifications: which endpoint, model, decoding and reasoning settings a run uses.

A run configuration (YAML) holds a list of these, for example::

    judges:
      - name: gpt-small
        provider: openai
        base_url: https://api.example.com/v1
        model: gpt-4o-mini
        api_key_env: OPENAI_API_KEY
        configs:
          - name: low
            extra: {reasoning_effort: low}
          - name: high
            extra: {reasoning_effort: high}

Keys are never stored here: only the name of the environment variable or of the Prefect
Secret block that holds one.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Provider = Literal["openai", "anthropic"]
"""The API dialect a judge speaks: OpenAI chat completions or Anthropic Messages."""


class ReasoningConfig(BaseModel):
    """One reasoning configuration of a judge; its `extra` joins the request body."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, description="Config name, e.g. `default`, `low`, `high`.")
    extra: dict[str, Any] = Field(
        default_factory=dict,
        description="Request parameters for this config (e.g. `reasoning_effort: high`); "
        "they override the judge's `extra` and are part of the call key.",
    )


class JudgeSpec(BaseModel):
    """One judge: an endpoint, a model, decoding parameters and its reasoning configs.

    Everything that decides a reply (provider, model, decoding, extra) enters the call key;
    timeouts, concurrency, rate limits, retries, base URL and credentials do not.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, description="Judge name used in every table of the run.")
    provider: Provider = Field(default="openai", description="API dialect of the endpoint.")
    base_url: str = Field(description="API root including the version, e.g. `.../v1`.")
    model: str = Field(min_length=1, description="Model name sent in each request.")
    api_key_env: str | None = Field(
        default=None, description="Environment variable holding the API key."
    )
    api_key_secret: str | None = Field(
        default=None, description="Prefect Secret block holding the API key."
    )
    temperature: float = Field(default=0.0, ge=0.0, description="Decoding temperature.")
    top_p: float | None = Field(default=None, gt=0.0, le=1.0, description="Nucleus sampling.")
    max_tokens: int = Field(default=1024, ge=1, description="Reply length limit in tokens.")
    extra: dict[str, Any] = Field(
        default_factory=dict, description="Request parameters passed through unchanged."
    )
    configs: list[ReasoningConfig] = Field(
        default_factory=lambda: [ReasoningConfig(name="default")],
        min_length=1,
        description="Reasoning configurations; every call is made once per config.",
    )
    timeout_s: float = Field(default=120.0, gt=0, description="Per-request timeout (seconds).")
    max_concurrency: int = Field(default=16, ge=1, description="Requests in flight at most.")
    requests_per_minute: float | None = Field(
        default=None, gt=0, description="Client-side rate limit; None for no limit."
    )
    max_retries: int = Field(default=4, ge=0, description="Retries after the first attempt.")

    @model_validator(mode="after")
    def _check(self) -> JudgeSpec:
        if self.api_key_env and self.api_key_secret:
            raise ValueError(f"judge {self.name!r}: set api_key_env or api_key_secret, not both")
        names = [c.name for c in self.configs]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"judge {self.name!r}: duplicate config names {dupes}")
        if not self.base_url.startswith(("http://", "https://")):
            raise ValueError(f"judge {self.name!r}: base_url must start with http:// or https://")
        return self

    def config(self, name: str) -> ReasoningConfig:
        """The reasoning config called `name`."""
        for c in self.configs:
            if c.name == name:
                return c
        raise KeyError(f"judge {self.name!r} has no config {name!r}")


class JudgeFile(BaseModel):
    """The `judges:` section of a run configuration file."""

    model_config = ConfigDict(extra="allow")

    judges: list[JudgeSpec] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique(self) -> JudgeFile:
        names = [j.name for j in self.judges]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"duplicate judge names {dupes}")
        return self
