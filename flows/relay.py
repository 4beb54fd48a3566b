"""A loopback relay in a command's own process between its Prefect client and the local
server (`flows.serverwatch`).

Each connection accepted is carried to the server `upstream()` names, but only once the
socket listening on that server's port is found among the server process's descriptors
(`flows.localserver.serves_port`), checked after the connection is made: a server that died
and whose port another process took is never sent a byte, and the relay asks `upstream()`
again, naming the server it refused (which starts another server on a port of its own).
The relay lives as long as the command, so its own port is never free for another process
while a client uses it.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Callable

from flows.localserver import ServerInfo, serves_port

CHUNK = 256 * 1024
TRIES = 3
"""Servers tried for one connection (each a fresh answer from `upstream()`)."""


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError, OSError):
        while data := await reader.read(CHUNK):
            writer.write(data)
            await writer.drain()


def _close(writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(Exception):
        writer.close()


class Relay:
    """A listener on 127.0.0.1 (a port of its own) in a daemon thread of this process."""

    def __init__(self, upstream: Callable[[ServerInfo | None], ServerInfo | None]) -> None:
        self._upstream = upstream
        # TCP named, so asyncio turns Nagle's algorithm off on every connection it accepts.
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(256)
        self.port = int(self._sock.getsockname()[1])
        self._loop = asyncio.new_event_loop()
        threading.Thread(target=self._run, name="judgeline-relay", daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._serve())

    async def _serve(self) -> None:
        server = await asyncio.start_server(self._carry, sock=self._sock)
        async with server:
            await server.serve_forever()

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        """A connection to the live server, checked to be its own port; None if none."""
        refused: ServerInfo | None = None
        for _ in range(TRIES):
            info = await asyncio.to_thread(self._upstream, refused)
            if info is None:
                return None
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", info.port)
            except OSError:
                refused = info
                continue
            if await asyncio.to_thread(serves_port, info.pid, info.port):
                return reader, writer
            _close(writer)  # not the server's socket: nothing was sent
            refused = info
        return None

    async def _carry(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream = await self._connect()
        if upstream is None:
            _close(writer)
            return
        up_reader, up_writer = upstream
        pumps = [
            asyncio.ensure_future(_pump(reader, up_writer)),
            asyncio.ensure_future(_pump(up_reader, writer)),
        ]
        try:
            # Either side closing ends the connection (HTTP and websockets never half-close).
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for pump in pumps:
                pump.cancel()
            _close(up_writer)
            _close(writer)
