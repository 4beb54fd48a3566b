"""The simulated judge's Responses API (`POST /v1/responses`, Azure's `/openai/v1/responses`).

A Responses request is read as the chat completion it amounts to (`chat_view`: the
`instructions` as a system message, `input` as the messages, `max_output_tokens` as the
limit, `reasoning.effort` as the effort, `text.format` as the reply format), so the same
personas, rules, faults and prompt cache answer it; the chat completion the judge would
send is then written as a Response object (`response_of`). What the API itself refuses
(a `seed`, `stop`, a limit under 16 tokens) is checked here, as OpenAI words it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from simjudge.rules import Problem

__all__ = ["MIN_OUTPUT_TOKENS", "chat_view", "response_of"]

MIN_OUTPUT_TOKENS = 16
"""The smallest `max_output_tokens` the Responses API takes."""

_NOT_SENT_ON = ("input", "instructions", "max_output_tokens", "reasoning", "text", "store",
                "include", "truncation", "metadata", "previous_response_id")  # fmt: skip


def _messages(body: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    given = body.get("input")
    if isinstance(given, str):
        items: list[Any] = [{"role": "user", "content": given}]
    elif isinstance(given, list):
        items = given
    else:
        return None
    out: list[dict[str, Any]] = []
    instructions = body.get("instructions")
    if isinstance(instructions, str):
        out.append({"role": "system", "content": instructions})
    for item in items:
        if not isinstance(item, dict) or item.get("type", "message") != "message":
            return None
        content = item.get("content")
        if isinstance(content, list):
            # input_text parts, as the SDK's typed input sends them
            content = [
                {"type": "text", "text": p.get("text")} if isinstance(p, dict) else p
                for p in content
            ]
        out.append({"role": item.get("role"), "content": content})
    return out


def chat_view(body: Any) -> tuple[dict[str, Any] | None, Problem | None]:
    """The chat completions body a Responses request amounts to, or what the API refuses."""
    if not isinstance(body, dict):
        return None, Problem(400, "invalid_request", "request body must be a JSON object")
    for name in ("seed", "stop", "messages", "max_tokens", "max_completion_tokens"):
        if name in body:
            return None, Problem(
                400, "invalid_request", f"Unsupported parameter: '{name}'.", name,
                "unsupported_parameter",
            )  # fmt: skip
    limit = body.get("max_output_tokens")
    if limit is not None and (not isinstance(limit, int) or limit < MIN_OUTPUT_TOKENS):
        return None, Problem(
            400, "invalid_request",
            f"Invalid 'max_output_tokens': integer below minimum value. Expected a value >= "
            f"{MIN_OUTPUT_TOKENS}, but got {limit} instead.",
            "max_output_tokens", "integer_below_min_value",
        )  # fmt: skip
    messages = _messages(body)
    if messages is None:
        return None, Problem(400, "invalid_request", "input: a string or a list of messages")
    chat = {k: v for k, v in body.items() if k not in _NOT_SENT_ON}
    chat["messages"] = messages
    if limit is not None:
        chat["max_completion_tokens"] = limit
    reasoning = body.get("reasoning")
    if isinstance(reasoning, dict) and reasoning.get("effort") is not None:
        chat["reasoning_effort"] = reasoning["effort"]
    text = body.get("text")
    fmt = text.get("format") if isinstance(text, dict) else None
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        spec = {k: v for k, v in fmt.items() if k != "type"}
        chat["response_format"] = {"type": "json_schema", "json_schema": spec}
    elif isinstance(fmt, dict):
        chat["response_format"] = fmt
    return chat, None


def response_of(completion: dict[str, Any], body: Mapping[str, Any]) -> dict[str, Any]:
    """A Response object saying what the chat completion `completion` says: a reasoning item
    (reasoning models), then the message (its text, or its refusal); `incomplete` with reason
    `max_output_tokens` when the limit cut it."""
    choice = completion["choices"][0]
    message = choice["message"]
    usage = completion["usage"]
    reasoning_tokens = (usage.get("completion_tokens_details") or {}).get("reasoning_tokens")
    prompt_details = usage.get("prompt_tokens_details") or {}
    rid = completion["id"].removeprefix("chatcmpl-sim")
    output: list[dict[str, Any]] = []
    if reasoning_tokens is not None:
        output.append({"type": "reasoning", "id": f"rs_sim{rid}", "summary": []})
    if message.get("refusal"):
        part: dict[str, Any] = {"type": "refusal", "refusal": message["refusal"]}
    else:
        part = {"type": "output_text", "text": message.get("content") or "", "annotations": []}
    cut = choice["finish_reason"] == "length"
    if not (cut and not message.get("content") and reasoning_tokens):
        output.append(
            {"type": "message", "id": f"msg_sim{rid}", "status": "incomplete" if cut else
             "completed", "role": "assistant", "content": [part]}
        )  # fmt: skip
    return {
        "id": f"resp_sim{rid}",
        "object": "response",
        "created_at": int(time.time()),
        "status": "incomplete" if cut else "completed",
        "incomplete_details": {"reason": "max_output_tokens"} if cut else None,
        "error": None,
        "model": completion["model"],
        "instructions": body.get("instructions"),
        "max_output_tokens": body.get("max_output_tokens"),
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "temperature": body.get("temperature"),
        "top_p": body.get("top_p"),
        "reasoning": body.get("reasoning") or {"effort": None, "summary": None},
        "store": body.get("store", True),
        "text": body.get("text") or {"format": {"type": "text"}},
        "metadata": body.get("metadata") or {},
        "usage": {
            "input_tokens": usage["prompt_tokens"],
            "input_tokens_details": {
                "cached_tokens": prompt_details.get("cached_tokens", 0),
                "cache_write_tokens": prompt_details.get("cache_write_tokens", 0),
            },
            "output_tokens": usage["completion_tokens"],
            "output_tokens_details": {"reasoning_tokens": reasoning_tokens or 0},
            "total_tokens": usage["total_tokens"],
        },
    }
