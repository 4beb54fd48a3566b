"""The simulated judge's wire formats: OpenAI and Anthropic request checks, replies and errors."""

from __future__ import annotations

import time
from typing import Any

from starlette.responses import JSONResponse, Response

from tasks.templates import message_text

__all__ = ["anthropic_error", "anthropic_reply", "messages_of", "openai_error", "openai_reply"]


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


_OPENAI_TYPES = {
    "authentication": ("invalid_request_error", "invalid_api_key"),
    "invalid_request": ("invalid_request_error", None),
    "not_found": ("invalid_request_error", "model_not_found"),
    "rate_limit": ("requests", "rate_limit_exceeded"),
    "server": ("server_error", None),
}
_ANTHROPIC_TYPES = {
    "authentication": "authentication_error",
    "invalid_request": "invalid_request_error",
    "not_found": "not_found_error",
    "rate_limit": "rate_limit_error",
    "server": "api_error",
}


def openai_error(status: int, kind: str, message: str, param: str | None = None) -> Response:
    kind_type, code = _OPENAI_TYPES[kind]
    error = {"message": message, "type": kind_type, "param": param, "code": code}
    return JSONResponse({"error": error}, status_code=status)


def anthropic_error(status: int, kind: str, message: str, param: str | None = None) -> Response:
    error = {"type": _ANTHROPIC_TYPES[kind], "message": message}
    return JSONResponse({"type": "error", "error": error}, status_code=status)


def openai_reply(digest: str, model: str, text: str, usage: tuple[int, int]) -> dict[str, Any]:
    message = {"role": "assistant", "content": text, "refusal": None}
    return {
        "id": f"chatcmpl-sim{digest[:24]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": "judgeline-simjudge-1",
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": "stop"}],
        "usage": {
            "prompt_tokens": usage[0],
            "completion_tokens": usage[1],
            "total_tokens": usage[0] + usage[1],
        },
    }


def anthropic_reply(digest: str, model: str, text: str, usage: tuple[int, int]) -> dict[str, Any]:
    return {
        "id": f"msg_sim{digest[:24]}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": usage[0], "output_tokens": usage[1]},
    }
