"""The work dir's Prefect server process: Prefect's own API, UI and services, started by the
first command that runs a flow, reused by later ones, stopped after an idle period.

Run as `python -m flows.serverd HOME IDLE_SECONDS` by `flows.localserver` (never by hand):
it binds a free loopback port, serves Prefect's application on it, writes
`HOME/judgeline-server.json` once the API answers, and exits when, for IDLE_SECONDS, no
judgeline command has held the clients' lock and no request has arrived (a browser on the
UI, a Dask worker, a `prefect` command pointed at it). SIGTERM stops it as it stops
`prefect server start`.
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

from flows.localserver import ServerFiles, ServerInfo, prefect_version

CHECK_EVERY_S = 2.0


class Activity:
    """ASGI middleware: the time of the last request that reached the server."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.last = time.monotonic()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket"):
            self.last = time.monotonic()
        await self.app(scope, receive, send)


async def _watch_idle(server: Any, files: ServerFiles, activity: Activity, idle_s: float) -> None:
    """Stop serving once idle: no client holds the clients' lock and no request came for
    `idle_s` seconds. The state file goes first, under the start lock, so a command never
    picks a server that has decided to stop (`flows.localserver.ensure_server`).

    A server the state file no longer names stops at once: its home was deleted, or another
    server replaced it (no command can reach it any more)."""
    free_since: float | None = None
    while not server.should_exit:
        await asyncio.sleep(CHECK_EVERY_S)
        now = time.monotonic()
        try:
            named = files.read()
            if named is None or named.pid != os.getpid():
                server.should_exit = True
                return
            if files.clients_active():
                free_since = None
                continue
            free_since = free_since or now
            quiet = now - max(free_since, activity.last)
            if quiet >= idle_s and files.retire(os.getpid()):
                server.should_exit = True
        except OSError:  # the home is gone or unusable
            server.should_exit = True
            return


def serve(home: Path, idle_s: float, port: int = 0) -> None:
    """Serve Prefect's application for this home on `port` (0: a free one) until idle or
    signalled."""
    import uvicorn
    from prefect.server.api.server import create_app

    files = ServerFiles(home)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    port = sock.getsockname()[1]
    activity = Activity(create_app(final=True))
    config = uvicorn.Config(
        activity, log_level="warning", timeout_keep_alive=5, lifespan="on", ws="auto"
    )
    server = uvicorn.Server(config)
    info = ServerInfo(
        pid=os.getpid(),
        port=port,
        prefect_version=prefect_version(),
        idle_seconds=idle_s,
        started_at=time.time(),
    )

    async def main() -> None:
        serving = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started:
            if serving.done():
                await serving
                return
            await asyncio.sleep(0.05)
        files.publish(info)
        print(
            f"judgeline local Prefect server: pid {info.pid} serving {home} on {info.url}",
            flush=True,
        )
        watcher = asyncio.create_task(_watch_idle(server, files, activity, idle_s))
        try:
            await serving
        finally:
            watcher.cancel()
            files.clear(os.getpid())

    asyncio.run(main())


if __name__ == "__main__":
    serve(Path(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else 0)
