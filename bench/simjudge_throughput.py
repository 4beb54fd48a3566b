"""Throughput of `judgeline serve-judge` with zero latency: req/s and server CPU per request.

Run: .venv/bin/python bench/simjudge_throughput.py [N]
The client is a plain httpx asyncio loop in this process; the server runs in a subprocess,
so its CPU time per request (from /proc) says what one core can serve regardless of how
slow the client is.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from simjudge.server import simjudge_subprocess  # noqa: E402
from tasks.prompts.templates import render  # noqa: E402


def child_cpu_seconds() -> float:
    """User+system CPU seconds of this process's children (the server)."""
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        for pid in (task / "children").read_text().split():
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


async def drive(base_url: str, n: int, concurrency: int) -> float:
    prompt = render("arena-hard-v1", question="q" * 300, left="a" * 1500, right="b" * 1500)
    limits = httpx.Limits(max_connections=concurrency)
    async with httpx.AsyncClient(base_url=base_url + "/", limits=limits) as client:
        gate = asyncio.Semaphore(concurrency)

        async def one(i: int) -> None:
            async with gate:
                body = {"model": "strong", "messages": list(prompt.messages), "seed": i}
                response = await client.post("chat/completions", json=body)
                response.raise_for_status()

        started = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(n)))
        return n / (time.perf_counter() - started)


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    print(f"cores: {os.cpu_count()}, load average: {os.getloadavg()[0]:.1f}")
    with simjudge_subprocess("--persona", "strong") as base_url:
        asyncio.run(drive(base_url, 200, 8))  # warm up connections and code paths
        for concurrency in (1, 16, 64):
            cpu_before, client_before = child_cpu_seconds(), time.process_time()
            rate = asyncio.run(drive(base_url, n, concurrency))
            server_ms = (child_cpu_seconds() - cpu_before) / n * 1000
            client_ms = (time.process_time() - client_before) / n * 1000
            print(
                f"concurrency {concurrency:3d}: {rate:7.0f} req/s (httpx asyncio loop); "
                f"server CPU {server_ms:.2f} ms/req -> {1000 / server_ms:5.0f} req/s per core; "
                f"client CPU {client_ms:.2f} ms/req"
            )


if __name__ == "__main__":
    main()
