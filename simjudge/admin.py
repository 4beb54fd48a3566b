"""The simulated judge's own endpoints: its model list, health, request log and fault
settings (not part of any vendor's API but `/v1/models`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Protocol

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from simjudge.wire import openai_error

__all__ = ["admin_routes"]


class Judge(Protocol):
    """What the endpoints use of the simulated judge (`simjudge.app.SimJudge`)."""

    @property
    def personas(self) -> Mapping[str, Any]: ...

    def authorized(self, request: Request, api: Any) -> bool: ...

    def request_log(self) -> list[dict[str, Any]]: ...

    def clear_log(self) -> None: ...

    def set_faults(self, persona: str | None = None, **rates: Any) -> Mapping[str, Any]: ...


def admin_routes(judge: Judge) -> list[Route]:
    """`GET /v1/models`, `GET /_judgeline/health`, `GET` and `DELETE /_judgeline/log`,
    `POST /_judgeline/faults` of `judge`."""

    async def models(request: Request) -> Response:
        if not (judge.authorized(request, "openai") or judge.authorized(request, "anthropic")):
            return openai_error(401, "authentication", "invalid or missing API key")
        data = [
            {"id": name, "object": "model", "created": 0, "owned_by": "judgeline-simjudge"}
            for name in judge.personas
        ]
        return JSONResponse({"object": "list", "data": data})

    async def health(request: Request) -> Response:
        return JSONResponse({"ok": True, "personas": sorted(judge.personas)})

    async def get_log(request: Request) -> Response:
        return JSONResponse(judge.request_log())

    async def delete_log(request: Request) -> Response:
        judge.clear_log()
        return JSONResponse({"cleared": True})

    async def set_faults(request: Request) -> Response:
        try:
            rates = json.loads(await request.body())
            if not isinstance(rates, dict):
                raise ValueError("expected a JSON object of fault settings")
            persona = rates.pop("persona", None)
            faults = judge.set_faults(persona, **rates)
        except ValueError as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        return JSONResponse({name: f.model_dump() for name, f in faults.items()})

    return [
        Route("/v1/models", models, methods=["GET"]),
        Route("/_judgeline/health", health, methods=["GET"]),
        Route("/_judgeline/log", get_log, methods=["GET"]),
        Route("/_judgeline/log", delete_log, methods=["DELETE"]),
        Route("/_judgeline/faults", set_faults, methods=["POST"]),
    ]
