"""The judge client: one httpx connection pool per judge, bounded, rate-limited, retried.

Failures are classified (`schemas.vocabulary.ErrorCategory`, `tasks.judging.failures`) and
every attempt becomes an `AttemptRecord`; a failure is never turned into a reply. The API key
lives only inside the provider's request headers: it is scrubbed from every detail string
this module produces. Provider dialects (request body, reply parsing) are in
`tasks.judging.providers`.

A judge config that keeps failing in a way no retry mends (a wrong key, no quota left, a
request the model rejects) is stopped by its breaker (`Breaker`): its remaining calls are
not sent and stay pending, and `JudgeClient.tripped` says which configs stopped and why.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import os
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from types import TracebackType

import httpx

from schemas.calls import AttemptRecord, ReplyRecord
from schemas.judge import JudgeSpec
from tasks.errors import InputError, StoreUnreachable
from tasks.judging.attempts import attempt_record, reply_record
from tasks.judging.claims import Claim
from tasks.judging.endpoints import endpoint, extra_headers
from tasks.judging.failures import CallFailure, scrub
from tasks.judging.pacing import (
    THROTTLING,
    AdaptiveSlots,
    Breaker,
    BreakerTrip,
    RateLimiter,
    RetryPolicy,
)
from tasks.judging.providers import PROVIDERS, CallRequest, Provider, Reply
from tasks.judging.shards import PooledClients, lean_cookies, tls_context
from tasks.judging.sharing import Claims
from tasks.judging.stopping import StopRequest
from tasks.judging.token_budget import budget_for, input_tokens

__all__ = [
    "CallRequest",
    "CallResult",
    "JudgeClient",
    "aresolve_api_key",
    "resolve_api_key",
]

log = logging.getLogger(__name__)

CLAIM_POLL_S = (0.05, 1.0)
"""First and longest pause before asking again for a call another process is sending."""
CLAIM_PATIENCE_S = 1800.0
"""How long a call waits for another process's claim before it is sent anyway (a live
holder releases within its timeouts and retries; only a stopped process holds longer)."""


@dataclass
class CallResult:
    """The outcome of sending one call: a stored-to-be reply or the last failure."""

    call_key: str
    reply: ReplyRecord | None
    failure: CallFailure | None
    attempts: list[AttemptRecord] = field(default_factory=list)
    skipped: bool = False
    """Not sent: its reply was stored (by another process) by the time it could go."""
    held: bool = False
    """Not sent: its judge config's breaker is open (`JudgeClient.tripped`). No attempt is
    recorded, so the call stays pending and `rerun-failed` sends it later."""


def resolve_api_key(spec: JudgeSpec) -> str | None:
    """The judge's API key from its environment variable or Prefect Secret block."""
    if spec.api_key_env:
        value = os.environ.get(spec.api_key_env)
        if not value:
            raise InputError(
                f"judge {spec.name!r}: environment variable {spec.api_key_env} is not set"
            )
        return value
    if spec.api_key_secret:
        from prefect.blocks.system import Secret

        return str(_secret_value(Secret.load(spec.api_key_secret), spec))
    return None


async def aresolve_api_key(spec: JudgeSpec) -> str | None:
    """`resolve_api_key` for async code (Prefect blocks load asynchronously there)."""
    if spec.api_key_secret and not spec.api_key_env:
        from prefect.blocks.system import Secret

        try:
            block = await Secret.aload(spec.api_key_secret)
        except ValueError as exc:
            raise InputError(
                f"judge {spec.name!r}: no Prefect Secret block {spec.api_key_secret!r}"
            ) from exc
        return str(_secret_value(block, spec))
    return resolve_api_key(spec)


def _secret_value(block: object, spec: JudgeSpec) -> str:
    value = block.get()  # type: ignore[attr-defined]
    if not isinstance(value, str) or not value:
        raise InputError(f"judge {spec.name!r}: Secret {spec.api_key_secret!r} is not a string")
    return value


class JudgeClient:
    """Sends calls to one judge: a pooled httpx client, adaptive concurrency (fewer requests
    in flight while the judge answers 429 or 529), an optional rate limit, a breaker per
    config (`tripped` lists the configs it stopped).

    async with JudgeClient(spec, api_key) as client:
        result = await client.send(CallRequest(...))
    """

    def __init__(
        self,
        spec: JudgeSpec,
        api_key: str | None,
        *,
        run_id: str = "",
        retry: RetryPolicy | None = None,
        claims: Claims | None = None,
        stop: StopRequest | None = None,
    ) -> None:
        self.spec = spec
        # Once a stop is requested no attempt starts (`tasks.judging.stopping`).
        self._stop = stop
        # Taken with a slot in hand, just before a call's first attempt: a call that waited
        # for a slot may have been stored meanwhile, or be in flight in another run.
        self._claims = claims
        self.run_id = run_id
        self.retry = retry or RetryPolicy(max_retries=spec.max_retries)
        self._key = api_key
        where = endpoint(spec)
        headers = extra_headers(spec)

        def pool(size: int) -> httpx.AsyncClient:
            # The query is in the provider's request URL (`Provider.url`).
            client = httpx.AsyncClient(
                base_url=where.root,
                headers=headers,
                verify=tls_context(),
                limits=httpx.Limits(max_connections=size, max_keepalive_connections=size),
                timeout=httpx.Timeout(spec.request_timeout()),
            )
            return lean_cookies(client)

        self.http = PooledClients(pool, spec.max_concurrency)
        try:
            provider_cls = PROVIDERS[spec.provider]
        except KeyError:
            known = ", ".join(sorted(PROVIDERS))
            raise InputError(
                f"judge {spec.name!r}: unknown provider {spec.provider!r} (known: {known})"
            ) from None
        self.provider: Provider = provider_cls(spec, self.http, api_key)
        self._slots = AdaptiveSlots(spec.max_concurrency)
        self._limiter = RateLimiter(spec.requests_per_minute) if spec.requests_per_minute else None
        self._budget = budget_for(spec)
        self._breakers: dict[str, Breaker] = {}
        self._flying: Counter[str] = Counter()
        """Requests in flight per config (what a breaker's stop leaves to answer)."""
        self.timed_out = 0
        """Requests abandoned at their timeout: a provider may still bill each of them."""

    @property
    def tripped(self) -> list[BreakerTrip]:
        """The judge configs whose breaker opened, and why (in the order they opened)."""
        return [b.trip() for b in self._breakers.values() if b.open]

    def _breaker(self, config: str) -> Breaker:
        breaker = self._breakers.get(config)
        if breaker is None:
            breaker = self._breakers[config] = Breaker(self.spec.name, config)
        return breaker

    def _record(self, breaker: Breaker, outcome: Reply | CallFailure) -> None:
        if breaker.record(outcome):
            trip = breaker.trip()
            log.warning(
                "judge %s, config %s: stopped after %d %s failures in a row; %d more requests "
                "were in flight and still answer; its remaining calls are not sent (they stay "
                "pending). First: %s",
                trip.judge,
                trip.config,
                trip.failures,
                trip.category,
                self._flying[breaker.config],
                trip.message,
            )

    async def __aenter__(self) -> JudgeClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self.http.aclose()

    async def _attempt(
        self, request: CallRequest, claim: bool
    ) -> Reply | CallFailure | Claim | None:
        """One attempt; with `claim`, first the call's claim: `Claim.STORED` or `Claim.BUSY`
        come back unsent, and None if the config's breaker is open (nothing sent)."""
        epoch = await self._slots.acquire()
        outcome: Reply | CallFailure | None = None
        breaker = self._breaker(request.config.name)
        try:
            if self._stop is not None and self._stop.requested:
                return None  # stopping: like a held call, nothing is sent or recorded
            if breaker.open:  # checked with a slot in hand: queued calls see a trip at once
                breaker.held += 1
                return None
            if claim and self._claims is not None:
                try:
                    state = await self._claims.claim(request.call_key)
                except StoreUnreachable as exc:
                    if self._stop is None:
                        raise
                    self._stop.disk_full(exc)  # the store is away: stop as on a full disk
                    return None
                if state is not Claim.MINE:
                    return state
            if self._limiter is not None:
                await self._limiter.wait()
            reserved = 0
            if self._budget is not None:
                reserved = _tokens_asked(self.spec, request)
                await self._budget.reserve(reserved)
            self._flying[breaker.config] += 1
            try:
                if self._stop is None:
                    outcome = await self.provider.call(request)
                else:
                    outcome = await self._stop.guard(self.provider.call(request))
            finally:
                self._flying[breaker.config] -= 1
                if self._budget is not None:
                    self._settle(reserved, outcome)
            if outcome is None:
                return None  # abandoned in flight at the stop's deadline
            self._record(breaker, outcome)
            return outcome
        finally:
            throttled = isinstance(outcome, CallFailure) and outcome.category in THROTTLING
            self._slots.release(epoch, throttled=throttled)

    def _settle(self, reserved: int, outcome: Reply | CallFailure | None) -> None:
        """Settle a reservation to what the reply used (a failure used nothing, a request
        abandoned in flight its whole reservation), then believe what the provider says is
        left."""
        assert self._budget is not None
        used = reserved if outcome is None else 0
        if isinstance(outcome, Reply):
            used = (outcome.prompt_tokens or 0) + (outcome.completion_tokens or 0)
        self._budget.settle(reserved, used)
        if outcome is not None and outcome.remaining_tokens is not None:
            self._budget.observe_left(outcome.remaining_tokens)

    async def send(self, request: CallRequest) -> CallResult:
        """Send one call with retries; every attempt is recorded, the key never is."""
        result = CallResult(call_key=request.call_key, reply=None, failure=None)
        attempt = timeouts = 0
        claim = self._claims is not None
        pause, waiting_since = CLAIM_POLL_S[0], time.monotonic()
        while True:
            attempt += 1
            started = dt.datetime.now(dt.UTC)
            outcome = await self._attempt(request, claim=claim and attempt == 1)
            if outcome is None:
                # Breaker open or stopping: a first attempt leaves the call pending; a
                # retry keeps the failure it already has.
                result.held = attempt == 1
                return result
            if isinstance(outcome, Claim):
                if outcome is Claim.STORED:
                    result.skipped = True
                    return result
                attempt -= 1  # BUSY: nothing was sent
                if time.monotonic() - waiting_since > CLAIM_PATIENCE_S:
                    log.warning(
                        "call %s: claimed by another process for over %.0f s; sending it",
                        request.call_key,
                        CLAIM_PATIENCE_S,
                    )
                    claim = False
                await asyncio.sleep(pause * random.uniform(0.5, 1.0))
                pause = min(CLAIM_POLL_S[1], pause * 2)
                continue
            where = (request.call_key, self.run_id, request.attempts_before + attempt, started)
            if isinstance(outcome, Reply):
                result.reply = reply_record(outcome, request.call_key, self.spec)
                result.failure = None
                result.attempts.append(attempt_record(outcome, *where))
                return result
            result.failure = outcome
            result.attempts.append(
                attempt_record(outcome, *where, detail=scrub(outcome.detail, self._key))
            )
            if outcome.category == "timeout":
                timeouts += 1
                self.timed_out += 1
            if not self.retry.should_retry(outcome, attempt, timeouts):
                return result
            pause_s = self.retry.delay(attempt, outcome.retry_after)
            if self._stop is None:
                await asyncio.sleep(pause_s)
            else:
                await self._stop.guard(asyncio.sleep(pause_s))


def _tokens_asked(spec: JudgeSpec, request: CallRequest) -> int:
    """What a request counts against a tokens-per-minute limit on arrival: its prompt
    (estimated as the estimate does) and its reply limit."""
    limit = spec.decoding(request.config).get("max_tokens")
    return input_tokens(request.messages) + (limit if isinstance(limit, int) else 0)
