"""One judge's connections as several small httpx pools.

httpcore's pool does its bookkeeping on every request and every response: it walks all of
its connections, and asks each idle one whether its socket became readable (a system call
and a dictionary of socket attributes built through anyio). With the 32 connections of a
judge's default `max_concurrency`, that walk was half the CPU of a bare asyncio httpx loop
sending the demo's 7,056 calls to the simulated judge on loopback, and the loop was bound
by that CPU. Eight pools of four connections sent the same calls in 9.2 s instead of 17.3 s
(`bench/commands.py`'s bodies, the same machine).

So a judge's `max_concurrency` connections are split into pools of about `PER_POOL`, and
each request goes to the pool with the most free connections. The judge's slots
(`tasks.judging.pacing.AdaptiveSlots`) keep the requests in flight within the judge's
limit, so a request always finds a free connection in some pool and never queues behind a
busy one.
"""

from __future__ import annotations

import functools
import math
import os
import ssl
from collections.abc import Callable
from typing import Any

import httpx

PER_POOL = 4
"""Connections per pool. The demo's calls at 32 connections: one pool 17.3 s, 4 pools of 8
11.2 s, 8 pools of 4 9.2 s, 16 pools of 2 10.1 s, 32 pools of 1 11.9 s."""


def tls_context() -> ssl.SSLContext:
    """One TLS context for every pool of this process, made as httpx makes its default one
    (certifi's CAs, or `$SSL_CERT_FILE` / `$SSL_CERT_DIR`). httpx makes one per client
    otherwise, loading the CA bundle each time: 24 ms per pool, 0.6 s of CPU before the
    demo's first call (three judges of eight pools)."""
    return _tls_context(os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))


@functools.cache
def _tls_context(cert_file: str | None, cert_dir: str | None) -> ssl.SSLContext:
    """Made once per value of the variables httpx reads (it reads them itself)."""
    return httpx.create_ssl_context()


class _SetCookiesOnly(httpx.Cookies):
    """httpx's cookie jar, reading a response only when it sets a cookie.

    httpx hands every response to the standard library's CookieJar through wrappers that
    copy its headers into an email message (twice) and its request into a urllib Request:
    8% of the client's CPU per call, for replies that set no cookie. Without a Set-Cookie or
    Set-Cookie2 header the jar takes nothing (`CookieJar.make_cookies` returns at once), so
    skipping those leaves the same cookies."""

    def extract_cookies(self, response: httpx.Response) -> None:
        if "set-cookie" in response.headers or "set-cookie2" in response.headers:
            super().extract_cookies(response)


def lean_cookies(client: httpx.AsyncClient) -> httpx.AsyncClient:
    """`client` with a jar that reads only the responses that set cookies (httpx has no
    option for it: its jar is replaced; tests/judging/test_shards checks it still works)."""
    client._cookies = _SetCookiesOnly(client.cookies)  # noqa: SLF001
    return client


class PooledClients:
    """`connections` connections in pools of about `PER_POOL`, each an httpx client made by
    `make(size)`; `post` as httpx's, on the least busy pool."""

    def __init__(self, make: Callable[[int], httpx.AsyncClient], connections: int) -> None:
        count = max(1, math.ceil(connections / PER_POOL))
        base, extra = divmod(max(connections, 1), count)
        self.sizes = [base + (i < extra) for i in range(count)]
        self.clients = [make(size) for size in self.sizes]
        self._free = list(self.sizes)
        """Connections of each pool not carrying a request."""

    async def post(
        self, url: httpx.URL | str, *, json: Any, headers: dict[str, str], timeout: httpx.Timeout
    ) -> httpx.Response:
        free = self._free
        i = free.index(max(free))
        free[i] -= 1
        try:
            return await self.clients[i].post(url, json=json, headers=headers, timeout=timeout)
        finally:
            free[i] += 1

    async def aclose(self) -> None:
        for client in self.clients:
            await client.aclose()
