"""How the client paces one judge: retries with backoff, a rate limit, concurrency that
shrinks under throttling, and a circuit breaker per judge config."""

from __future__ import annotations

import asyncio
import random
import time
from collections import deque
from dataclasses import dataclass

from schemas.vocabulary import ErrorCategory
from tasks.judging.failures import CallFailure
from tasks.judging.providers import Reply

__all__ = [
    "BREAKER_TRIP_AFTER",
    "FATAL",
    "RETRYABLE",
    "THROTTLING",
    "AdaptiveSlots",
    "Breaker",
    "BreakerTrip",
    "RateLimiter",
    "RetryPolicy",
]

RETRYABLE: frozenset[ErrorCategory] = frozenset(
    {"rate_limited", "overloaded", "server_error", "timeout", "transport", "malformed_response"}
)
"""Categories worth another attempt. `auth`, `quota`, `bad_request` and `refused` would fail
the same way again."""
THROTTLING: frozenset[ErrorCategory] = frozenset({"rate_limited", "overloaded"})
"""Categories that cut the client's concurrency: the provider asks for fewer requests.
`quota` does not: sending slower never brings credit back."""
FATAL: frozenset[ErrorCategory] = frozenset({"auth", "quota", "bad_request"})
"""Categories that trip a judge config's breaker (`Breaker`)."""
BREAKER_TRIP_AFTER = 3
"""Consecutive `FATAL` failures of one judge config that stop it. Three: one could be a
request of its own (a prompt over the context window), three in a row with nothing between
are the key, the account or the config. The requests already in flight when it stops still
answer (`BreakerTrip.in_flight`), so a tripped config costs at most this plus its
concurrency in failed requests."""


@dataclass(frozen=True)
class RetryPolicy:
    """When to try again, and how long to wait first.

    Waits grow as base * 2**(n-1), capped, with "equal jitter" (half fixed, half random):
    0.5 s base and 4 retries ride out ~7 s of 5xx or dropped connections per call, the
    30 s cap stays under typical provider rate-limit windows (60 s), and the random half
    spreads out the many calls that hit one 429 together. A `Retry-After` header is a floor:
    we never come back earlier than the server asked.
    """

    max_retries: int = 4
    base_s: float = 0.5
    cap_s: float = 30.0
    timeout_retries: int = 1
    """A timed-out request is retried once at most: the provider may still be generating
    (and bill) the reply the client gave up on, so every resend may be paid twice. A judge
    slower than its timeout needs a longer one, not more requests."""

    def should_retry(self, failure: CallFailure, attempt: int, timeouts: int = 0) -> bool:
        """Whether attempt number `attempt` (1-based) may be followed by another, the call
        having timed out `timeouts` times so far (this attempt included)."""
        if failure.category == "timeout" and timeouts > self.timeout_retries:
            return False
        return failure.category in RETRYABLE and attempt <= self.max_retries

    def delay(self, attempt: int, retry_after: float | None) -> float:
        """Seconds to wait after failed attempt number `attempt` (1-based)."""
        ceiling = min(self.cap_s, self.base_s * 2 ** (attempt - 1))
        wait = ceiling / 2 + random.uniform(0, ceiling / 2)
        if retry_after is not None:
            wait = max(wait, retry_after)
        return wait


class RateLimiter:
    """Spaces request starts at least 60/rpm seconds apart (no bursts).

    Reservations are taken without awaiting in between, so it is safe within one event loop.
    """

    def __init__(self, requests_per_minute: float) -> None:
        self.interval = 60.0 / requests_per_minute
        self._next = 0.0

    async def wait(self) -> None:
        now = time.monotonic()
        start = max(now, self._next)
        self._next = start + self.interval
        if start > now:
            await asyncio.sleep(start - now)


class AdaptiveSlots:
    """How many requests may be in flight: up to the judge's `max_concurrency`, halved by a
    429 or 529 and regrown by successes (additive increase, multiplicative decrease, as in TCP).

    A provider that answers 429 is over its limit; sending at the same rate only buys more
    429s, so the whole client slows down, not just the throttled call. Only a 429 to a
    request started after the last cut cuts again: one burst of 429s answering requests
    sent together halves once, not down to 1. Waiters are served first come, first served.
    """

    def __init__(self, ceiling: int) -> None:
        self.ceiling = ceiling
        self.limit = float(ceiling)
        self.in_flight = 0
        self._epoch = 0
        self._waiters: deque[asyncio.Future[None]] = deque()

    def _room(self) -> bool:
        return self.in_flight < max(1, int(self.limit))

    async def acquire(self) -> int:
        """Wait for a slot; returns the epoch (number of cuts so far) it was granted in."""
        if not self._waiters and self._room():
            self.in_flight += 1
            return self._epoch
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter  # the releasing side counts us in before waking us
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.release(self._epoch, throttled=False)
            raise
        return self._epoch

    def release(self, epoch: int, *, throttled: bool) -> None:
        """Give a slot back, saying whether its request was answered with a 429."""
        self.in_flight -= 1
        if throttled:
            if epoch == self._epoch:
                self.limit = max(1.0, self.limit / 2)
                self._epoch += 1
        elif self.limit < self.ceiling:
            self.limit = min(float(self.ceiling), self.limit + 1 / self.limit)
        while self._waiters and self._room():
            waiter = self._waiters.popleft()
            if not waiter.done():
                self.in_flight += 1
                waiter.set_result(None)


@dataclass(frozen=True)
class BreakerTrip:
    """A judge config stopped by its breaker: why, and what it cost.

    `category` and `message` are those of the first failure of the run that tripped it
    (`message`: the attempt's detail, the provider's own words, scrubbed of the key).
    """

    judge: str
    config: str
    category: ErrorCategory
    http_status: int | None
    message: str
    failures: int
    """The `FATAL` failures in a row that opened the breaker (`BREAKER_TRIP_AFTER`)."""
    held: int
    """Calls not sent because the breaker was open: they stay pending for `rerun-failed`."""
    in_flight: int = 0
    """Requests of the config already in flight when the breaker opened (answered after)."""
    in_flight_failed: int = 0
    """Of those, the ones that failed (any category)."""


class Breaker:
    """One judge config's circuit breaker: open after `BREAKER_TRIP_AFTER` `FATAL` failures
    with no success between them, and open for the rest of the client's life.

    `auth` and `quota` count at any time (a key revoked or credit run out mid-run stops
    the rest). `bad_request` counts only before the config's first success: once the judge
    has accepted a request of this config, a 400 says something about one prompt (too
    long, say), not about the config.
    """

    def __init__(self, judge: str, config: str) -> None:
        self.judge = judge
        self.config = config
        self.failures = 0
        self.held = 0
        self.in_flight = 0
        self.in_flight_failed = 0
        self.first: CallFailure | None = None
        self.succeeded = False
        self.open = False

    def record(self, outcome: Reply | CallFailure) -> bool:
        """Count one answered attempt; True if this one opened the breaker."""
        if self.open:  # a request that was in flight when it opened
            self.in_flight += 1
            self.in_flight_failed += isinstance(outcome, CallFailure)
            return False
        if isinstance(outcome, Reply):
            self.succeeded = True
            self.failures, self.first = 0, None
            return False
        counts = outcome.category in ("auth", "quota") or (
            outcome.category == "bad_request" and not self.succeeded
        )
        if not counts:
            return False
        self.failures += 1
        self.first = self.first or outcome
        if self.failures < BREAKER_TRIP_AFTER:
            return False
        self.open = True
        return True

    def trip(self) -> BreakerTrip:
        """What stopped this config (only once it is open)."""
        assert self.first is not None
        return BreakerTrip(
            judge=self.judge,
            config=self.config,
            category=self.first.category,
            http_status=self.first.http_status,
            message=self.first.detail,
            failures=self.failures,
            held=self.held,
            in_flight=self.in_flight,
            in_flight_failed=self.in_flight_failed,
        )
