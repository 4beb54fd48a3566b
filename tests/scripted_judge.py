"""A scripted judge on 127.0.0.1 for failure tests: it answers with the exact error bodies and
headers the real APIs send (OpenAI, Anthropic, LiteLLM), queued by the test."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route


@dataclass
class Answer:
    """One scripted HTTP reply."""

    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)

    def response(self) -> Response:
        content = self.body if isinstance(self.body, str) else json.dumps(self.body)
        return Response(content, self.status, self.headers, media_type="application/json")


def openai_reply(text: str | None = "[[A>B]]", finish: str = "stop") -> dict[str, Any]:
    message = {"role": "assistant", "content": text}
    usage = {"prompt_tokens": 10, "completion_tokens": 5}
    return {"choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": usage}


def anthropic_reply(blocks: list[dict[str, Any]], stop: str = "end_turn") -> dict[str, Any]:
    usage = {"input_tokens": 10, "output_tokens": 5}
    return {"type": "message", "content": blocks, "stop_reason": stop, "usage": usage}


class ScriptedJudge:
    """Serves queued `Answer`s in order; once the queue is empty, `fallback(body)` answers
    (a success by default). Logs every request: time, path, call key, body."""

    def __init__(self) -> None:
        self.queue: deque[Answer] = deque()
        self.fallback: Callable[[dict[str, Any]], Answer] = self._ok
        self.delay_s = 0.0
        self.log: list[dict[str, Any]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        routes = [Route("/v1/{rest:path}", self._handle, methods=["POST"])]
        self._server = uvicorn.Server(
            uvicorn.Config(Starlette(routes=routes), log_level="warning", access_log=False)
        )
        self._thread: threading.Thread | None = None
        self.base_url = ""

    @staticmethod
    def _ok(body: dict[str, Any]) -> Answer:
        if "system" in body or body.get("model", "").startswith("claude"):
            return Answer(200, anthropic_reply([{"type": "text", "text": "[[A>B]]"}]))
        return Answer(200, openai_reply())

    def reset(self) -> None:
        self.queue.clear()
        self.fallback = self._ok
        self.delay_s = 0.0
        self.log.clear()
        self.max_in_flight = 0

    async def _handle(self, request: Request) -> Response:
        body = await request.json()
        self.log.append(
            {
                "time": time.monotonic(),
                "path": request.url.path,
                "call_key": request.headers.get("x-judgeline-call-key"),
                "body": body,
            }
        )
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            answer = self.queue.popleft() if self.queue else self.fallback(body)
            if self.delay_s:
                await asyncio.sleep(self.delay_s)
            return answer.response()
        finally:
            self.in_flight -= 1

    def __enter__(self) -> ScriptedJudge:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.base_url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            assert time.monotonic() < deadline, "scripted judge did not start"
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
