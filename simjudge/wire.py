"""The simulated judge's wire formats: OpenAI, Azure and Anthropic messages, replies, errors."""

from __future__ import annotations

import base64
import hashlib
import json
import time
from collections.abc import Mapping
from typing import Any

from starlette.responses import JSONResponse, Response

from tasks.prompts.templates import message_text

__all__ = [
    "CACHE_FIELDS",
    "anthropic_error",
    "anthropic_reply",
    "azure_error",
    "credential",
    "log_fields",
    "messages_digest",
    "messages_of",
    "openai_error",
    "openai_reply",
    "reply_identity",
    "without_cache_fields",
]

CACHE_FIELDS = ("prompt_cache_key", "prompt_cache_retention", "cache_control")
"""Request fields that steer the provider's prompt cache and never the reply."""


_PROMPT_FIELDS = ("messages", "system", "input", "instructions")


def log_fields(body: Any) -> dict[str, Any] | None:
    """A request body's fields but its prompt (messages, system, input, instructions)."""
    if not isinstance(body, dict):
        return None
    return {k: v for k, v in body.items() if k not in _PROMPT_FIELDS}


def credential(headers: Mapping[str, str], api: str) -> str | None:
    """The key a request presents the way its API reads keys (None: none)."""
    if api == "anthropic" and ("x-api-key" in headers or "anthropic-version" not in headers):
        # x-api-key wins; a bearer key counts from clients that name an API version.
        return headers.get("x-api-key")
    if api == "azure" and "api-key" in headers:
        return headers["api-key"]
    bearer = headers.get("authorization", "")
    return bearer[len("Bearer ") :] if bearer.startswith("Bearer ") else None


def messages_of(body: Any, anthropic: bool) -> tuple[list[dict[str, Any]] | None, str | None]:
    """The request's messages with any Anthropic `system` put first, or a problem."""
    if not isinstance(body, dict):
        return None, "request body must be a JSON object"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return None, "messages: a non-empty list is required"
    if not all(isinstance(m, dict) and isinstance(m.get("role"), str) for m in messages):
        return None, "messages: each message needs a role"
    if not anthropic:
        return messages, None
    if not isinstance(body.get("max_tokens"), int):
        return None, "max_tokens: Field required"
    system = body.get("system")
    if system is None:
        return messages, None
    text = message_text(system)
    if text is None:
        return None, "system: must be a string or a list of text blocks"
    return [{"role": "system", "content": text}, *messages], None


def without_cache_fields(body: dict[str, Any]) -> dict[str, Any] | None:
    """The body without its prompt-cache fields (`CACHE_FIELDS`, on the body and on content
    blocks; a content list left with one plain text block becomes that text), or None when
    it has none: the vendors document that caching never changes a reply, so the judge's
    reply depends on the rest only."""
    found = False

    def plain(content: Any) -> Any:
        nonlocal found
        if not isinstance(content, list):
            return content
        marked = [isinstance(p, dict) and "cache_control" in p for p in content]
        if not any(marked):
            return content
        found = True
        parts = [
            {k: v for k, v in p.items() if k != "cache_control"} if mark else p
            for p, mark in zip(content, marked, strict=True)
        ]
        if len(parts) == 1 and parts[0].keys() == {"type", "text"}:
            return parts[0]["text"]
        return parts

    out = {k: v for k, v in body.items() if k not in CACHE_FIELDS}
    found = len(out) < len(body)
    if "system" in out:
        out["system"] = plain(out["system"])
    if isinstance(out.get("messages"), list):
        out["messages"] = [
            {**m, "content": plain(m["content"])} if isinstance(m, dict) and "content" in m else m
            for m in out["messages"]
        ]
    return out if found else None


def reply_identity(raw: bytes, body: dict[str, Any]) -> bytes:
    """The bytes a reply is a function of: the request body as sent, or, when it carries
    prompt-cache fields, the body the same request without them is sent as (compact JSON, as
    httpx and the SDKs encode it)."""
    plain = without_cache_fields(body)
    if plain is None:
        return raw
    return json.dumps(plain, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def messages_digest(body: Any) -> str | None:
    """SHA-256 of a request's prompt as text: its `system` (Anthropic), then each message's
    role and text, whatever content shape carried them (None: no messages list)."""
    if isinstance(body, dict) and "input" in body and "messages" not in body:
        from simjudge.responses import chat_view  # a Responses request

        body, _ = chat_view(body)
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
        return None
    parts = [] if body.get("system") is None else [["system", message_text(body["system"])]]
    for m in body["messages"]:
        if isinstance(m, dict):
            parts.append([m.get("role"), message_text(m.get("content"))])
    return hashlib.sha256(json.dumps(parts).encode("utf-8")).hexdigest()


_OPENAI_TYPES = {
    "authentication": ("invalid_request_error", "invalid_api_key"),
    "invalid_request": ("invalid_request_error", None),
    "not_found": ("invalid_request_error", "model_not_found"),
    "rate_limit": ("requests", "rate_limit_exceeded"),
    "quota": ("insufficient_quota", "insufficient_quota"),
    "server": ("server_error", None),
    "overloaded": ("server_error", None),
}
_ANTHROPIC_TYPES = {
    "authentication": "authentication_error",
    "invalid_request": "invalid_request_error",
    "not_found": "not_found_error",
    "rate_limit": "rate_limit_error",
    "quota": "invalid_request_error",
    "server": "api_error",
    "overloaded": "overloaded_error",
}


def openai_error(
    status: int, kind: str, message: str, param: str | None = None, code: str | None = None
) -> Response:
    """An OpenAI error body: `{"error": {message, type, param, code}}`."""
    kind_type, default_code = _OPENAI_TYPES[kind]
    error = {"message": message, "type": kind_type, "param": param, "code": code or default_code}
    return JSONResponse({"error": error}, status_code=status)


def azure_error(
    status: int, kind: str, message: str, param: str | None = None, code: str | None = None
) -> Response:
    """Azure OpenAI's errors: its own shape for 401 and 404, OpenAI's for the rest."""
    if status in (401, 404):
        return JSONResponse(
            {"error": {"code": code or str(status), "message": message}}, status_code=status
        )
    return openai_error(status, kind, message, param, code)


def anthropic_error(
    status: int, kind: str, message: str, param: str | None = None, code: str | None = None,
    *, request_id: str | None = None,
) -> Response:  # fmt: skip
    """An Anthropic error body: `{"type": "error", "error": {type, message}, "request_id"}`."""
    error = {"type": _ANTHROPIC_TYPES[kind], "message": message}
    body: dict[str, Any] = {"type": "error", "error": error}
    if request_id is not None:
        body["request_id"] = request_id
    return JSONResponse(body, status_code=status)


def openai_reply(
    digest: str, model: str, text: str, usage: tuple[int, int],
    finish_reason: str = "stop", reasoning_tokens: int | None = None, cached_tokens: int = 0,
    cache_write_tokens: int | None = None, refusal: str | None = None,
) -> dict[str, Any]:  # fmt: skip
    """A chat completion; `reasoning_tokens` (reasoning models) adds the usage details;
    `cached_tokens` of the prompt tokens came from the prompt cache, `cache_write_tokens`
    (models that report writes) were written to it; a `refusal` replaces the text."""
    message = {"role": "assistant", "content": None if refusal else text, "refusal": refusal}
    choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason}
    reply: dict[str, Any] = {
        "id": f"chatcmpl-sim{digest[:24]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": "judgeline-simjudge-1",
        "choices": [choice],
        "usage": {
            "prompt_tokens": usage[0],
            "completion_tokens": usage[1],
            "total_tokens": usage[0] + usage[1],
            "prompt_tokens_details": {"cached_tokens": cached_tokens},
        },
    }
    if cache_write_tokens is not None:
        reply["usage"]["prompt_tokens_details"]["cache_write_tokens"] = cache_write_tokens
    if reasoning_tokens is not None:
        reply["usage"]["completion_tokens_details"] = {"reasoning_tokens": reasoning_tokens}
    return reply


def anthropic_reply(
    digest: str, model: str, text: str | None, usage: tuple[int, int],
    stop_reason: str = "end_turn", thinking: str | None = None,
    cache: tuple[int, int, int] = (0, 0, 0),
) -> dict[str, Any]:  # fmt: skip
    """A Messages reply: a thinking block (if any) before the text block (None: no text).

    `usage[0]` counts every prompt token; `cache` is (read, written for 5 minutes, written
    for 1 hour) of them, and `input_tokens` the rest, as the Messages API reports them."""
    read, write_5m, write_1h = cache
    content: list[dict[str, Any]] = []
    if thinking is not None:
        signature = base64.b64encode(hashlib.sha256(f"{digest}:thinking".encode()).digest())
        content.append(
            {"type": "thinking", "thinking": thinking, "signature": signature.decode("ascii")}
        )
    if text is not None:
        content.append({"type": "text", "text": text})
    return {
        "id": f"msg_sim{digest[:24]}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {
            "input_tokens": usage[0] - read - write_5m - write_1h,
            "output_tokens": usage[1],
            "cache_creation_input_tokens": write_5m + write_1h,
            "cache_read_input_tokens": read,
            "cache_creation": {
                "ephemeral_5m_input_tokens": write_5m,
                "ephemeral_1h_input_tokens": write_1h,
            },
        },
    }
