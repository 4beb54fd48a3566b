"""Judge specifications: which endpoint, model, decoding and reasoning settings a run uses.

A run configuration (YAML) holds a list of these. One judge per endpoint profile::

    judges:
      - name: gpt-small                  # OpenAI chat completions (profile openai, the default)
        base_url: https://api.openai.com/v1
        model: gpt-4o-mini
        api_key_env: OPENAI_API_KEY
        configs:
          - {name: default}
      - name: o4-mini                    # an OpenAI reasoning model
        base_url: https://api.openai.com/v1
        model: o4-mini
        reasoning: true                  # no temperature, max_completion_tokens
        api_key_env: OPENAI_API_KEY
        configs:
          - {name: low, reasoning_effort: low}
          - {name: high, reasoning_effort: high, max_tokens: 16000}
      - name: claude                     # Anthropic Messages, extended thinking
        provider: anthropic
        base_url: https://api.anthropic.com
        model: claude-sonnet-4-5
        thinking: {type: enabled, budget_tokens: 4000}   # max_tokens defaults to 5024
        anthropic_beta: [interleaved-thinking-2025-05-14]
        api_key_env: ANTHROPIC_API_KEY
      - name: azure-gpt                  # Azure OpenAI, a deployment URL
        profile: azure
        base_url: https://my-res.openai.azure.com/openai/deployments/gpt-4o?api-version=2024-10-21
        model: gpt-4o
        api_key_env: AZURE_OPENAI_API_KEY   # sent as `api-key`
      - name: azure-v1                   # Azure OpenAI, the v1 API
        profile: azure
        base_url: https://my-res.openai.azure.com/openai/v1/
        model: my-o4-mini-deployment
        reasoning: true
        api_key_env: AZURE_OPENAI_API_KEY
      - name: llama                      # vLLM, Ollama, llama.cpp, OpenRouter, LiteLLM, ...
        profile: openai_compatible       # seed sent only when set
        base_url: https://openrouter.ai/api/v1
        model: meta-llama/llama-3.3-70b-instruct
        api_key_env: OPENROUTER_API_KEY
        headers: {HTTP-Referer: "https://example.org", X-Title: judgeline}
        seed: plan                       # send the plan's seed after all
        price: {input: 0.12, output: 0.30, as_of: 2025-10-01}   # USD per million tokens

Decoding fields (`temperature`, `max_tokens`, `seed`, `top_p`, `stop`, `response_format`,
`reasoning_effort`, `thinking`, `system_role`) can be set per judge and per config; a
config's value wins, and `null` removes the field from the request. `extra` and the
configs' `extra` are passed through unchanged after them.

Keys are never stored here: only the name of the environment variable or of the Prefect
Secret block that holds one (`api_key_env`/`api_key_secret`, and `{env: NAME}` or
`{secret: NAME}` as a header's value).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

from schemas.cost import Price
from schemas.decoding import (
    DECODING_FIELDS,
    RESERVED_HEADERS,
    Decoding,
    ReasoningConfig,
    SecretRef,
    check_decoding,
    thinking_on,
)
from schemas.profiles import (
    NEW_FIELDS,
    TIMEOUT_BASE_S,
    TIMEOUT_FLOOR_S,
    TIMEOUT_S_PER_TOKEN,
    TIMEOUT_UNBOUNDED_S,
    Profile,
    PromptCache,
    Provider,
    Verdict,
    profile_defaults,
    provider_of,
)


class JudgeSpec(Decoding):
    """One judge: an endpoint, a model, decoding fields and its reasoning configs.

    Left-out decoding fields take the profile's defaults: temperature 0 and max_tokens 1024;
    for a reasoning model (`reasoning: true`) or with `thinking` on, no temperature and
    max_tokens 4096 (or thinking's budget_tokens + 1024); seed `plan` for the openai and
    azure profiles, none for openai_compatible and anthropic.

    The call key holds the provider, model and every decoding field as sent, plus what
    reshapes a request: `system_role` other than `system`, an `anthropic_version` other than
    the default, `anthropic_beta` (betas can change replies). The seed of the planned call
    always enters it, sent or not, and so does the repeat index: the K calls of a judge that
    sends no seed stay K distinct calls. Profile, base URL, `headers` (e.g. `X-Title`),
    `query` (e.g. `api-version`), `batch`, `prompt_cache` (and the caching fields it adds to
    a request), credentials, timeouts, concurrency, rate limits, retries, prices and names do
    not.
    """

    name: str = Field(min_length=1, description="Judge name used in every table of the run.")
    provider: Provider = Field(default="openai", description="API dialect of the endpoint.")
    profile: Profile | None = Field(
        default=None, description="Endpoint kind (see `Profile`); default: the provider's."
    )
    base_url: str = Field(
        description="API root as the vendor's SDK writes it, e.g. `https://api.openai.com/v1`, "
        "`https://api.anthropic.com`; a query string is kept on every request."
    )
    model: str = Field(min_length=1, description="Model name sent in each request.")
    reasoning: bool = Field(
        default=False,
        description="OpenAI dialect: a reasoning model (o-series, gpt-5): no default "
        "temperature, and (openai, azure) max_tokens sent as `max_completion_tokens`.",
    )
    api_key_env: str | None = Field(
        default=None, description="Environment variable holding the API key."
    )
    api_key_secret: str | None = Field(
        default=None, description="Prefect Secret block holding the API key."
    )
    anthropic_version: str | None = Field(
        default=None, min_length=1, description="Anthropic: the `anthropic-version` header."
    )
    anthropic_beta: list[str] = Field(
        default_factory=list, description="Anthropic: `anthropic-beta` features (keyed)."
    )
    headers: dict[str, str | SecretRef] = Field(
        default_factory=dict,
        description="Extra request headers (not keyed); a value may be `{env: NAME}` or "
        "`{secret: NAME}`.",
    )
    query: dict[str, str] = Field(
        default_factory=dict,
        description="Extra query parameters (not keyed; no secrets: URLs get logged).",
    )
    simulated: bool = Field(
        default=False,
        description="The endpoint is judgeline's simulated judge: each request carries the "
        "call key in `X-Judgeline-Call-Key` (its request log and seedless repeats use it).",
    )
    batch: bool = Field(
        default=False,
        description="Send this judge's calls through the provider's batch API (OpenAI Batch, "
        "Anthropic Message Batches: half price, replies within 24 h) instead of one request "
        "each; not part of the call key (a reply is the same however it was sent).",
    )
    prompt_cache: PromptCache = Field(
        default="auto",
        description="The provider's prompt cache across repeats (see `PromptCache`): `auto`, "
        "`off`, or `1h` (Anthropic's 1-hour lifetime); not part of the call key.",
    )
    verdict: Verdict = Field(
        default="text",
        description="`text`: the verdict in the template's own format; `json`: a structured "
        "verdict held to a JSON schema of the template's labels (keyed).",
    )
    store: bool = Field(
        default=False,
        description="Responses API: let the vendor keep the judged answers (`store: true`); "
        "judgeline sends `store: false` unless this is set (not keyed).",
    )
    extra: dict[str, Any] = Field(
        default_factory=dict, description="Request parameters passed through unchanged."
    )
    price: Price | None = Field(
        default=None,
        description="USD per million tokens, dated (not keyed); default: the built-in table "
        "`tasks.judging.prices` for the model, if it lists it.",
    )
    configs: list[ReasoningConfig] = Field(
        default_factory=lambda: [ReasoningConfig(name="default")],
        min_length=1,
        description="Reasoning configurations; every call is made once per config.",
    )
    timeout_s: float | None = Field(
        default=None,
        gt=0,
        description="Per-request timeout (seconds); default: grows with each config's "
        "output budget (`request_timeout`).",
    )
    max_concurrency: int = Field(default=16, ge=1, description="Requests in flight at most.")
    requests_per_minute: float | None = Field(
        default=None, gt=0, description="Client-side rate limit; None for no limit."
    )
    tokens_per_minute: float | None = Field(
        default=None,
        gt=0,
        description="The provider's tokens-per-minute limit: requests wait for budget before "
        "they are sent, shared by every run on this machine (`tasks.judging.token_budget`).",
    )
    max_retries: int = Field(default=4, ge=0, description="Retries after the first attempt.")

    @model_validator(mode="before")
    @classmethod
    def _fill(cls, data: Any) -> Any:
        """Fill left-out fields with the profile's defaults, so a dump reads back the same."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        profile = data.get("profile")
        implied = provider_of(profile)
        if "provider" not in data and implied is not None:
            data["provider"] = implied
        provider = data.get("provider", "openai")
        if profile is None:
            own = provider in ("anthropic", "openai-responses")
            data["profile"] = provider if own else "openai"
        defaults = profile_defaults(
            provider,
            data["profile"],
            bool(data.get("reasoning")),
            data.get("thinking"),
            data.get("anthropic_version"),
        )
        for field in ("temperature", "max_tokens", "seed", "system_role", "anthropic_version"):
            data.setdefault(field, defaults[field])
        return data

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Fields at their profile defaults are left out: a judge configured as before these
        # fields existed dumps as it did then, and reads back the same.
        data: dict[str, Any] = handler(self)
        defaults = profile_defaults(
            self.provider, self.profile or "", self.reasoning, self.thinking, self.anthropic_version
        )
        return {k: v for k, v in data.items() if k not in NEW_FIELDS or v != defaults.get(k)}

    @model_validator(mode="after")
    def _check(self) -> JudgeSpec:
        who = f"judge {self.name!r}"
        if self.api_key_env and self.api_key_secret:
            raise ValueError(f"{who}: set api_key_env or api_key_secret, not both")
        names = [c.name for c in self.configs]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"{who}: duplicate config names {dupes}")
        if not self.base_url.startswith(("http://", "https://")):
            raise ValueError(f"{who}: base_url must start with http:// or https://")
        anthropic = self.provider == "anthropic"
        if (provider_of(self.profile) or self.profile) != self.provider:
            raise ValueError(f"{who}: profile {self.profile!r} needs another provider")
        if anthropic and self.reasoning:
            raise ValueError(f"{who}: reasoning is for OpenAI-dialect judges; Claude: thinking")
        if not anthropic and (self.anthropic_version or self.anthropic_beta):
            raise ValueError(f"{who}: anthropic_version/anthropic_beta need provider anthropic")
        for header in self.headers:
            if header.lower() in RESERVED_HEADERS:
                raise ValueError(f"{who}: headers.{header} is set by judgeline, not headers")
        if self.profile in ("azure", "azure-responses"):
            self._check_azure()
        self._check_new_fields(who)
        if self.prompt_cache == "1h" and not anthropic:
            raise ValueError(
                f"{who}: prompt_cache: 1h is Anthropic's 1-hour cache lifetime; an OpenAI-dialect "
                "judge takes auto or off (its provider decides how long a prefix stays cached)"
            )
        if self.batch and self.profile not in ("openai", "anthropic", "openai-responses"):
            raise ValueError(
                f"{who}: batch: true needs profile openai, openai-responses or anthropic (the "
                f"OpenAI Batch or Anthropic Message Batches API), not {self.profile}"
            )
        for config in (None, *self.configs):
            check_decoding(
                self.decoding(config),
                provider=self.provider,
                profile=self.profile,
                anthropic_version=self.anthropic_version,
                where=who + (f" config {config.name!r}" if config else ""),
            )
        return self

    def _check_new_fields(self, who: str) -> None:
        """`verdict`, `store` and `extra` against the profile."""
        extras = [("extra", self.extra)] + [
            (f"config {c.name!r} extra", c.extra) for c in self.configs
        ]
        for where, extra in extras:
            if "store" in extra:
                raise ValueError(
                    f"{who}: {where}.store: whether the vendor keeps the judged answers is the "
                    "judge's `store:` field (Responses API judges send store: false unless it is "
                    "true); remove it from extra"
                )
        if self.store and self.provider != "openai-responses":
            raise ValueError(
                f"{who}: store: true is for the Responses API profiles (openai-responses, "
                f"azure-responses), not {self.profile}"
            )
        if self.verdict == "json":
            if self.profile == "openai_compatible":
                raise ValueError(
                    f"{who}: verdict: json needs an API that holds a reply to a JSON schema; "
                    "profile openai_compatible cannot be assumed to (use verdict: text, or a "
                    "profile naming the vendor)"
                )
            set_format = [c.name for c in self.configs if self.decoding(c).get("response_format")]
            if set_format:
                raise ValueError(
                    f"{who}: verdict: json sets the reply format itself; configs {set_format} "
                    "also set response_format (remove one)"
                )

    def _check_azure(self) -> None:
        path = urlsplit(self.base_url).path.rstrip("/")
        query = dict(parse_qsl(urlsplit(self.base_url).query)) | self.query
        if self.profile == "azure-responses" and not path.endswith("/openai/v1"):
            raise ValueError(
                f"judge {self.name!r}: an azure-responses base_url ends in /openai/v1 (Azure "
                "OpenAI's v1 API serves the Responses API)"
            )
        if "/openai/deployments/" in path:
            if "api-version" not in query:
                raise ValueError(
                    f"judge {self.name!r}: an Azure deployment base_url needs an api-version "
                    "(`?api-version=2024-10-21` or `query: {api-version: ...}`)"
                )
        elif not path.endswith("/openai/v1"):
            raise ValueError(
                f"judge {self.name!r}: an Azure base_url ends in /openai/deployments/"
                "<deployment> or /openai/v1"
            )

    def decoding(self, config: ReasoningConfig | None = None) -> dict[str, Any]:
        """The decoding fields of a call under `config`: the config's win, None = not sent."""
        fields = {f: getattr(self, f) for f in DECODING_FIELDS}
        if config is not None:
            if "thinking" in config.overrides and thinking_on(config.thinking):
                fields["temperature"] = None
            fields.update({f: getattr(config, f) for f in config.overrides})
        return fields

    def request_timeout(self, config: ReasoningConfig | None = None) -> float:
        """Seconds to wait for one reply under `config`: `timeout_s` when set, else
        TIMEOUT_BASE_S plus TIMEOUT_S_PER_TOKEN per token of the config's `max_tokens` (its
        output budget, reasoning or thinking included), at least TIMEOUT_FLOOR_S; a config
        that sends no `max_tokens` waits TIMEOUT_UNBOUNDED_S."""
        if self.timeout_s is not None:
            return self.timeout_s
        limit = self.decoding(config).get("max_tokens")
        if not isinstance(limit, int):
            return TIMEOUT_UNBOUNDED_S
        return max(TIMEOUT_FLOOR_S, TIMEOUT_BASE_S + TIMEOUT_S_PER_TOKEN * limit)

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
