"""Where and how a judge's requests go: URL, query, headers and body, per endpoint profile.

`base_url` is read the way each vendor's SDK writes it: the OpenAI dialect posts to
`{base_url}/chat/completions` (`https://api.openai.com/v1`, `http://localhost:11434/v1`,
`https://R.openai.azure.com/openai/v1/`, an Azure deployment URL); the Anthropic dialect to
`{base_url}/v1/messages`, or `{base_url}/messages` when it already ends in `/v1`; the
Responses API to `{base_url}/responses` (`https://api.openai.com/v1`,
`https://R.openai.azure.com/openai/v1/`). A query
string in `base_url` (Azure's `api-version`) is kept on every request, with the judge's
`query` added; repeated slashes are collapsed.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from schemas.decoding import ANTHROPIC_VERSION, ReasoningConfig, SecretRef
from schemas.judge import JudgeSpec
from tasks.errors import InputError
from tasks.judging.callkey import decoding_params, messages_sha256
from tasks.judging.prompt_cache import apply_prompt_cache
from tasks.prompts.templates import DEFAULT_TEMPLATE, identify_template
from tasks.prompts.verdicts import format_field

__all__ = [
    "Endpoint",
    "anthropic_body",
    "auth_headers",
    "endpoint",
    "extra_headers",
    "openai_body",
    "responses_body",
]


@dataclass(frozen=True)
class Endpoint:
    """A judge's HTTP root (ending in `/`, no query), request path and query parameters."""

    root: str
    path: str
    params: dict[str, str]

    @property
    def url(self) -> str:
        """The full request URL without its query string."""
        return self.root + self.path


def endpoint(spec: JudgeSpec) -> Endpoint:
    """Where the judge's requests go."""
    parts = urlsplit(spec.base_url)
    path = re.sub("/{2,}", "/", parts.path).rstrip("/")
    params = dict(parse_qsl(parts.query, keep_blank_values=True))
    params.update(spec.query)
    if spec.provider == "anthropic":
        request_path = "messages" if path.endswith("/v1") else "v1/messages"
    elif spec.provider == "openai-responses":
        request_path = "responses"
    else:
        request_path = "chat/completions"
    root = urlunsplit((parts.scheme, parts.netloc, path + "/", "", ""))
    return Endpoint(root=root, path=request_path, params=params)


def auth_headers(spec: JudgeSpec, api_key: str | None) -> dict[str, str]:
    """Key and version headers: bearer (OpenAI, compatible servers), `api-key` (Azure),
    `x-api-key` with `anthropic-version` and `anthropic-beta` (Anthropic)."""
    headers: dict[str, str] = {}
    if spec.provider == "anthropic":
        headers["anthropic-version"] = spec.anthropic_version or ANTHROPIC_VERSION
        if spec.anthropic_beta:
            headers["anthropic-beta"] = ",".join(spec.anthropic_beta)
        if api_key:
            headers["x-api-key"] = api_key
    elif api_key:
        if spec.profile in ("azure", "azure-responses"):
            headers["api-key"] = api_key
        else:
            headers["Authorization"] = f"Bearer {api_key}"
    return headers


def _secret(ref: SecretRef, spec: JudgeSpec, header: str) -> str:
    where = f"judge {spec.name!r} header {header}"
    if ref.env is not None:
        value = os.environ.get(ref.env)
        if not value:
            raise InputError(f"{where}: environment variable {ref.env} is not set")
        return value
    from prefect.blocks.system import Secret

    name = str(ref.secret)
    try:
        # Forced synchronous: this runs once per judge, inside the judge stage's event loop.
        block: Any = Secret.load(name, _sync=True)  # type: ignore[call-arg]
    except ValueError as exc:
        raise InputError(f"{where}: no Prefect Secret block {name!r}") from exc
    value = block.get()
    if not isinstance(value, str) or not value:
        raise InputError(f"{where}: Secret {name!r} is not a string")
    return value


def extra_headers(spec: JudgeSpec) -> dict[str, str]:
    """The judge's `headers`, secrets read from their environment variable or Secret block."""
    return {
        name: value if isinstance(value, str) else _secret(value, spec, name)
        for name, value in spec.headers.items()
    }


def _openai_messages(messages: Sequence[dict[str, str]], role: str | None) -> list[dict[str, str]]:
    if role in (None, "system"):
        return list(messages)
    if role == "developer":
        return [{**m, "role": "developer"} if m["role"] == "system" else m for m in messages]
    system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
    rest = [m for m in messages if m["role"] != "system"]
    if not system:
        return rest
    for i, m in enumerate(rest):
        if m["role"] == "user":
            rest[i] = {**m, "content": f"{system}\n\n{m['content']}"}
            return rest
    return [{"role": "user", "content": system}, *rest]


def _verdict_format(
    spec: JudgeSpec,
    api: str,
    body: dict[str, Any],
    messages: Sequence[dict[str, str]],
    template_id: str | None,
) -> None:
    """Add the structured-verdict field of a `verdict: json` judge (in place): the schema of
    `template_id`'s labels (else of the template the messages were rendered with)."""
    if spec.verdict != "json":
        return
    template = template_id or identify_template(messages) or DEFAULT_TEMPLATE
    name, value = format_field(api, template)
    body[name] = value


def openai_body(
    spec: JudgeSpec,
    config: ReasoningConfig,
    messages: Sequence[dict[str, str]],
    seed: int,
    digest: str | None = None,
    template_id: str | None = None,
) -> dict[str, Any]:
    """A chat completions body: model, messages (system prompts as `system_role` says),
    the decoding parameters, a `verdict: json` judge's `response_format`, then the judge's
    prompt-caching fields (`prompt_cache_key`, from `digest`: the messages' SHA-256, computed
    when not given)."""
    role = spec.decoding(config)["system_role"]
    params = decoding_params(spec, config, seed)
    body = {"model": spec.model, "messages": _openai_messages(messages, role), **params}
    _verdict_format(spec, "chat", body, messages, template_id)
    apply_prompt_cache(spec, body, digest or messages_sha256(messages))
    return body


def responses_body(
    spec: JudgeSpec,
    config: ReasoningConfig,
    messages: Sequence[dict[str, str]],
    seed: int,
    digest: str | None = None,
    template_id: str | None = None,
) -> dict[str, Any]:
    """A Responses API body: model, the system prompts joined into `instructions` (or, with
    `system_role: user`, put before the first user message), the other messages as `input`,
    the decoding parameters (no seed: the API has none), `store` (false unless the judge says
    so), a `verdict: json` judge's `text.format`, then the prompt-caching fields."""
    role = spec.decoding(config)["system_role"]
    params = decoding_params(spec, config, seed)
    params.pop("seed", None)
    body: dict[str, Any] = {"model": spec.model}
    if role == "user":
        body["input"] = _openai_messages(messages, role)
    else:
        system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
        if system:
            body["instructions"] = system
        body["input"] = [m for m in messages if m["role"] != "system"]
    body.update(params)
    body.setdefault("store", spec.store)
    _verdict_format(spec, "responses", body, messages, template_id)
    apply_prompt_cache(spec, body, digest or messages_sha256(messages))
    return body


def anthropic_body(
    spec: JudgeSpec,
    config: ReasoningConfig,
    messages: Sequence[dict[str, str]],
    seed: int,
    digest: str | None = None,
    template_id: str | None = None,
) -> dict[str, Any]:
    """A Messages API body: system prompts joined into `system`, no seed, a `verdict: json`
    judge's `output_config.format`, the prompt's last block marked for the cache as the
    judge's `prompt_cache` says."""
    params = decoding_params(spec, config, seed)
    # The Messages API has no seed; it still tells repeats apart in the call key.
    params.pop("seed", None)
    system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
    rest = [m for m in messages if m["role"] != "system"]
    body: dict[str, Any] = {"model": spec.model, "messages": rest, **params}
    if system:
        body["system"] = system
    _verdict_format(spec, "anthropic", body, messages, template_id)
    apply_prompt_cache(spec, body, digest or "")
    return body
