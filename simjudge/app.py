"""The simulated judge's HTTP app: OpenAI- and Anthropic-style endpoints and their state.

Replies come from personas (`simjudge.persona`) in the verdict format of whichever
template rendered the prompt. With a manifest the app knows which slot holds the keyed
answer (answers are indexed by SHA-256); otherwise a stable latent preference is derived
from the two answer hashes. Replies and faults are pure functions of the request body
(and, for faults, of how many times that same body was seen), so a retried request can
succeed after a fault and a test can predict every reply.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import hashlib
import json
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from simjudge.admin import admin_routes
from simjudge.batches import BatchEndpoints
from simjudge.caching import CacheUse, PromptCache, cache_control_problem
from simjudge.cast import Cast
from simjudge.compose import anthropic_payload, asks_for_schema, openai_payload
from simjudge.failures import (
    ERRORS,
    ID_HEADERS,
    UNAUTHORIZED,
    QuietTruncation,
    TruncatedResponse,
    fault_response,
)
from simjudge.limits import Api, RateWindow, TokenBucket, request_id
from simjudge.persona import (
    PRESETS,
    REFUSAL,
    STAND_IN,
    Faults,
    Persona,
    choose_fault,
    index_manifest,
    preferred_slot,
    refuses,
    rng_for,
    simulate_reply,
)
from simjudge.responses import chat_view, response_of
from simjudge.rules import (
    anthropic_problem,
    is_reasoning_model,
    openai_problem,
    reply_limit,
    takes_cache_options,
)
from simjudge.wire import (
    anthropic_error,
    azure_error,
    credential,
    log_fields,
    messages_digest,
    messages_of,
    reply_identity,
)
from tasks.prompts.templates import message_text

__all__ = ["CALL_KEY_HEADER", "SimJudge"]

CALL_KEY_HEADER = "x-judgeline-call-key"
_HOT_PATHS: dict[str, tuple[Api, bool]] = {
    "/v1/chat/completions": ("openai", False),
    "/v1/messages": ("anthropic", False),
    "/v1/responses": ("openai", True),
    "/openai/v1/responses": ("azure", True),
}
"""Judge-call paths: (API, whether it is the Responses API)."""


class SimJudge:
    """The simulated judge's state and its Starlette app (`.app`)."""

    def __init__(
        self,
        personas: Sequence[Persona] = PRESETS,
        *,
        manifest: pa.Table | None = None,
        api_key: str | None = None,
        require_anthropic_version: bool = False,
        clock: Callable[[], float] = time.monotonic,
        tokens_per_minute: float | None = None,
        stand_in: Persona | None = STAND_IN,
    ) -> None:
        """`require_anthropic_version`: refuse Messages requests without the header (400);
        `clock`: seconds, for the prompt cache's lifetimes (`simjudge.caching`);
        `tokens_per_minute`: a token limit, enforced (`simjudge.limits.TokenBucket`);
        `stand_in`: how a vendor's model name no persona has answers (None: 404)."""
        self.cast = Cast(personas, stand_in)
        self.personas, self.faults = self.cast.personas, self.cast.faults
        self._key_of = index_manifest(manifest) if manifest is not None else {}
        self._api_key = api_key
        self._require_version = require_anthropic_version
        self._window = RateWindow()
        self.token_limit = TokenBucket(tokens_per_minute) if tokens_per_minute else None
        self._log: list[dict[str, Any]] = []
        self._attempts: dict[str, int] = {}
        self._faulted: dict[str, int] = {}
        self.prompt_cache = PromptCache(clock)
        self.closing = False
        logging.getLogger("uvicorn.error").addFilter(QuietTruncation())
        self.batches = BatchEndpoints(self)
        self.starlette = Starlette(
            routes=[
                Route("/v1/chat/completions", self._openai, methods=["POST"]),
                Route("/v1/messages", self._anthropic, methods=["POST"]),
                Route(
                    "/openai/deployments/{deployment}/chat/completions",
                    self._azure_deployment,
                    methods=["POST"],
                ),
                Route("/openai/v1/chat/completions", self._azure_v1, methods=["POST"]),
                # OpenRouter's path shape (its API root is /api/v1).
                Route("/api/v1/chat/completions", self._openai, methods=["POST"]),
                # Google's OpenAI-compatible endpoint (Gemini) has its root at /v1beta/openai.
                Route("/v1beta/openai/chat/completions", self._openai, methods=["POST"]),
                *admin_routes(self),
                *self.batches.routes(),
            ]
        )

    async def app(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The ASGI app: judge calls go straight to their handler, the rest via Starlette.

        Skipping Starlette's middleware and router on the two hot paths saves about a
        third of the server's CPU per call; errors there still become 500s in uvicorn.
        """
        if scope["type"] == "http" and scope["method"] == "POST":
            hot = _HOT_PATHS.get(scope["path"])
            if hot is not None:
                response = await self._handle(Request(scope, receive), hot[0], responses=hot[1])
                await response(scope, receive, send)
                return
        await self.starlette(scope, receive, send)

    # --- Python-side admin ----------------------------------------------------------------

    def request_log(self) -> list[dict[str, Any]]:
        """A copy of the request log, oldest first."""
        return [dict(entry) for entry in list(self._log)]

    def clear_log(self) -> None:
        self._log.clear()

    def note(self, **entry: Any) -> None:
        """Log an event other than a judge call (a batch submitted)."""
        self._log.append({"time": dt.datetime.now(dt.UTC).isoformat(), **entry})

    async def respond(self, request: Request, api: Api, responses: bool = False) -> Response:
        """Answer one judge call as its endpoint would (a request of a batch)."""
        return await self._handle(request, api, responses=responses)

    def authorized(self, request: Request, api: Api) -> bool:
        """Whether the request presents the judge's key (always, when it has none)."""
        return self._authorized(request, api)

    def set_faults(self, persona: str | None = None, **rates: Any) -> dict[str, Faults]:
        """Change fault settings of one persona (or all), e.g. `set_faults(rate_429=0)`."""
        return self.cast.set_faults(persona, **rates)

    # --- request handling -----------------------------------------------------------------

    def _record(self, request: Request, model: Any, status: int | None, fault: str | None,
                started: float, attempt: int | None, body: Any = None,
                cache: CacheUse | None = None) -> None:  # fmt: skip
        """Log one request: where it went, its header names (never a value but the API
        version), its body's fields but the messages, the messages' digest, what was
        answered and the prompt tokens it read from and wrote to the prompt cache."""
        self._log.append(
            {
                "time": dt.datetime.now(dt.UTC).isoformat(),
                "path": request.url.path,
                "query": request.url.query,
                "headers": sorted(request.headers.keys()),
                "anthropic_version": request.headers.get("anthropic-version"),
                "fields": log_fields(body),
                "messages_sha256": messages_digest(body),
                "model": model if isinstance(model, str) else None,
                "status": status,
                "fault": fault,
                "attempt": attempt,
                "latency_ms": round((time.perf_counter() - started) * 1000, 3),
                "call_key": request.headers.get(CALL_KEY_HEADER),
                "cached_tokens": cache.read if cache else None,
                "cache_write_tokens": cache.write if cache else None,
            }
        )

    def _authorized(self, request: Request, api: Api) -> bool:
        return self._api_key is None or credential(request.headers, api) == self._api_key

    async def _sleep(self, seconds: float) -> None:
        """Sleep, but wake early when the server is shutting down."""
        end = time.perf_counter() + seconds
        while not self.closing:
            left = end - time.perf_counter()
            if left <= 0:
                return
            await asyncio.sleep(min(left, 0.05))

    def _finish(self, response: Response, api: Api, rid: str, tokens: int = 0,
                limited_for: float | None = None) -> Response:  # fmt: skip
        """Add the API's request-id and (past authentication) rate-limit headers."""
        for name in ID_HEADERS[api]:
            response.headers[name] = rid
        if response.status_code != 401:
            response.headers.update(self._window.headers(api, tokens, limited_for))
            if self.token_limit is not None:
                response.headers.update(self.token_limit.headers(api))
        return response

    async def _handle(
        self, request: Request, api: Api, deployment: str | None = None, responses: bool = False
    ) -> Response:
        started = time.perf_counter()
        anthropic = api == "anthropic"
        rid = request_id(api)
        err = ERRORS[api]
        if anthropic:
            err = functools.partial(anthropic_error, request_id=rid)

        body: Any = None

        def refuse(status: int, model: Any, *args: Any, **kwargs: Any) -> Response:
            self._record(request, model, status, None, started, None, body)
            return self._finish(err(status, *args, **kwargs), api, rid)

        if not self._authorized(request, api):
            missing = credential(request.headers, api) is None
            return refuse(401, None, "authentication", UNAUTHORIZED[api][0 if missing else 1])
        raw = await request.body()
        try:
            body = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            return refuse(400, None, "invalid_request", "request body is not JSON")
        model = deployment or (body.get("model") if isinstance(body, dict) else None)
        persona = self.cast.persona(model)
        if persona is None or not isinstance(model, str):
            if deployment is not None:
                return refuse(404, model, "not_found", "The API deployment for this resource "
                              "does not exist.", code="DeploymentNotFound")  # fmt: skip
            return refuse(404, model, "not_found", f"The model `{model}` does not exist",
                          param="model")  # fmt: skip
        view: dict[str, Any] = body
        if responses:
            converted, wrong = chat_view(body)
            if wrong is not None or converted is None:
                assert wrong is not None
                return refuse(wrong.status, model, wrong.kind, wrong.message, wrong.param,
                              wrong.code)  # fmt: skip
            view = converted
        messages, problem = messages_of(view, anthropic)
        if problem is not None or messages is None:
            return refuse(400, model, "invalid_request", problem or "no messages")
        rule = (
            anthropic_problem(body, request.headers, require_version=self._require_version)
            if anthropic
            else openai_problem(view, model, responses=responses)
        )
        if rule is None and anthropic:
            rule = cache_control_problem(body)
        if rule is not None:
            return refuse(rule.status, model, rule.kind, rule.message, rule.param, rule.code)
        effort = view.get("reasoning_effort")
        if effort is not None:
            try:
                persona.shifted(str(effort))
            except ValueError as exc:
                return refuse(400, model, "invalid_request", str(exc), "reasoning_effort",
                              "invalid_value")  # fmt: skip

        prompt_tokens = sum(len(message_text(m.get("content")) or "") for m in messages) // 4
        counted = prompt_tokens + (reply_limit(view) or 0)
        if self.token_limit is not None:
            limited = self.token_limit.refusal(counted, model, err)
            if limited is not None:
                self._record(request, model, 429, "token_limit", started, None, body)
                return self._finish(limited, api, rid)

        # The request's identity is its exact body (model, messages, seed, temperature and
        # every extra parameter); re-encoding it canonically would cost more than the rest
        # of the handler. Without a seed (the Messages API has none) the call key tells
        # repeats apart.
        salt = b"" if "seed" in body else request.headers.get(CALL_KEY_HEADER, "").encode()
        digest = hashlib.sha256(reply_identity(raw, body) + b"\x1f" + salt).hexdigest()
        attempt = self._attempts.get(digest, 0) + 1
        self._attempts[digest] = attempt
        faults = self.faults[persona.name]
        fault = None
        limit = faults.max_faults_per_request
        if limit is None or self._faulted.get(digest, 0) < limit:
            fault = choose_fault(faults, digest, attempt)
        if fault is not None:
            self._faulted[digest] = self._faulted.get(digest, 0) + 1

        # Looked up on arrival, stored once the answer is ready: requests sent together miss.
        arrived = self.prompt_cache.clock()
        cache = self.prompt_cache.look_up(
            view, anthropic, persona.cache_min_tokens, persona.cache_lifetime_s
        )
        rng = rng_for(persona.name, digest)
        if persona.latency_ms or persona.latency_jitter_ms:
            jitter = (rng.random() * 2 - 1) * persona.latency_jitter_ms
            await self._sleep(max(0.0, persona.latency_ms + jitter) / 1000)
        failed = fault_response(fault, api, err, faults, digest, attempt)
        if failed is not None:
            response, limited_for = failed
            self._record(request, model, response.status_code, fault, started, attempt, body)
            return self._finish(response, api, rid, limited_for=limited_for)
        if fault == "stall":
            # Logged before sleeping (status None): the client usually gives up first.
            self._record(request, model, None, fault, started, attempt, body)
            await self._sleep(faults.stall_s)

        template_id, preferred = preferred_slot(messages, digest, self._key_of)
        text, _ = simulate_reply(
            persona, template_id, preferred, effort, rng, structured=asks_for_schema(view)
        )
        refusal = REFUSAL if refuses(persona, digest, attempt) else None
        self.prompt_cache.store(cache, arrived)
        payload = (
            anthropic_payload(digest, model, text, prompt_tokens, body, cache, refusal)
            if anthropic
            else openai_payload(
                digest,
                model,
                text,
                prompt_tokens,
                view,
                reasoning=is_reasoning_model(model),
                effort=effort,
                cache=cache,
                reports_writes=takes_cache_options(model),
                refusal=refusal,
            )  # fmt: skip
        )
        if responses:
            payload = response_of(payload, body)
        data = json.dumps(payload).encode("ascii")
        if fault != "stall":
            self._record(request, model, 200, fault, started, attempt, body, cache)
        usage = payload["usage"]
        tokens = (
            usage["input_tokens"] + usage["output_tokens"] if anthropic else usage["total_tokens"]
        )
        if self.token_limit is not None:
            out = usage["output_tokens"] if anthropic or responses else usage["completion_tokens"]
            self.token_limit.give(max(0, counted - prompt_tokens - out))
        if fault == "malformed":
            response = Response(
                data[: len(data) // 2] + b"<!-- upstream", media_type="application/json"
            )
        elif fault == "truncated":
            response = TruncatedResponse(data)
        else:
            response = Response(data, media_type="application/json")
        return self._finish(response, api, rid, tokens)

    async def _openai(self, request: Request) -> Response:
        return await self._handle(request, "openai")

    async def _anthropic(self, request: Request) -> Response:
        return await self._handle(request, "anthropic")

    async def _azure_deployment(self, request: Request) -> Response:
        if "api-version" not in request.query_params:
            return self._finish(
                azure_error(404, "not_found", "Resource not found"), "azure", request_id("azure")
            )
        return await self._handle(request, "azure", request.path_params["deployment"])

    async def _azure_v1(self, request: Request) -> Response:
        return await self._handle(request, "azure")
