"""A judge's connections split into small pools (tasks.judging.shards): the sizes add up to
the judge's limit, and requests in flight within that limit never wait for a connection
while another pool has a free one."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from schemas.judge import JudgeSpec
from tasks.judging.client import JudgeClient
from tasks.judging.shards import PER_POOL, PooledClients, lean_cookies


@pytest.mark.parametrize("connections", [1, 3, 4, 5, 32, 33])
def test_pool_sizes_add_up_to_the_limit(connections: int) -> None:
    pools = PooledClients(lambda size: httpx.AsyncClient(), connections)
    assert sum(pools.sizes) == connections
    assert max(pools.sizes) <= PER_POOL and max(pools.sizes) - min(pools.sizes) <= 1
    asyncio.run(pools.aclose())


def test_requests_within_the_limit_each_find_a_free_connection() -> None:
    in_flight: dict[int, int] = {}
    most: dict[int, int] = {}
    release = asyncio.Event()

    def make(size: int) -> httpx.AsyncClient:
        index = len(in_flight)
        in_flight[index] = most[index] = 0

        async def answer(request: httpx.Request) -> httpx.Response:
            in_flight[index] += 1
            most[index] = max(most[index], in_flight[index])
            await release.wait()
            in_flight[index] -= 1
            return httpx.Response(200, json={"pool": index})

        return httpx.AsyncClient(transport=httpx.MockTransport(answer), base_url="http://j")

    async def go() -> list[int]:
        pools = PooledClients(make, 10)
        sends = [
            asyncio.create_task(pools.post("x", json={}, headers={}, timeout=httpx.Timeout(5)))
            for _ in range(10)
        ]
        while sum(in_flight.values()) < 10:
            await asyncio.sleep(0.01)
        release.set()
        answers = [r.json()["pool"] for r in await asyncio.gather(*sends)]
        await pools.aclose()
        return answers

    answers = asyncio.run(go())
    pools = PooledClients(lambda size: httpx.AsyncClient(), 10)
    assert [answers.count(i) for i in range(len(pools.sizes))] == pools.sizes
    assert all(most[i] == size for i, size in enumerate(pools.sizes))
    asyncio.run(pools.aclose())


def test_a_judges_cookies_are_kept_and_sent_back() -> None:
    """A judge client's pools read only the responses that set cookies (`lean_cookies`):
    a cookie a judge sets is still sent with the next requests, and a reply without one
    changes nothing."""
    seen: list[str | None] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("cookie"))
        if len(seen) == 1:
            return httpx.Response(200, headers={"set-cookie": "__cf_bm=abc; Path=/"}, json={})
        return httpx.Response(200, json={})

    async def go() -> None:
        spec = JudgeSpec(name="j", base_url="http://j/v1", model="m", max_concurrency=8)
        async with JudgeClient(spec, None) as judge:
            assert len(judge.http.clients) == 2
            for pool in judge.http.clients:
                assert type(pool.cookies).extract_cookies is not httpx.Cookies.extract_cookies
        async with lean_cookies(httpx.AsyncClient(transport=httpx.MockTransport(answer))) as c:
            for _ in range(3):
                await c.post("http://j/v1/x", json={})
            assert dict(c.cookies) == {"__cf_bm": "abc"}

    asyncio.run(go())
    assert seen == [None, "__cf_bm=abc", "__cf_bm=abc"]
