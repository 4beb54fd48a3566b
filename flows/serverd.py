"""The user's local Prefect server process: Prefect's own API, UI and services, started by the
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
import contextlib
import json
import os
import shutil
import socket
import sqlite3
import sys
import threading
import time
from pathlib import Path
from typing import Any

from flows.localserver import (
    GATE_PATH,
    ServerFiles,
    ServerInfo,
    authorized,
    code_stamp,
    prefect_version,
    private_home,
)
from tasks.errors import JudgelineError
from tasks.usercache import user_cache_dir

CHECK_EVERY_S = 2.0


RETRY_AFTER_S = "0.05"
"""What a 503 of this server asks its client to wait before retrying. Prefect answers 503 when
SQLite reports the database locked; with its 60 s busy timeout that happens only when a
deferred transaction that has read finds another writer committed meanwhile, which a retry
resolves at once. Without the header Prefect's client waits 2 s (then 4, 8, ...): a command
whose subflow's task run met the task-run recorder's insert paid 2 s for nothing."""


async def _reply(send: Any, status: int, body: bytes) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json")]})  # fmt: skip
    await send({"type": "http.response.body", "body": body})


def _header(scope: dict[str, Any], name: bytes) -> bytes | None:
    return next((value for key, value in scope.get("headers", []) if key.lower() == name), None)


async def _gate(scope: dict[str, Any], receive: Any, send: Any, auth_string: str) -> None:
    """Answer one gate request: its results as JSON; a 401 without the secret, a 413 past
    MAX_GATE_BODY, a 400 for a request that is not one of judgeline's gates, or a 500 (the
    command then runs the gate itself). Nothing is read or built before the checks."""
    from tasks.gates import MAX_GATE_BODY, GateRequestError, answer_gate

    if not authorized(_header(scope, b"authorization"), auth_string):
        await _reply(send, 401, b'{"exception_message": "Unauthorized"}')
        return
    declared = _header(scope, b"content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > MAX_GATE_BODY):
        await _reply(send, 413, b'{"exception_message": "gate request too large"}')
        return
    chunks, size = [], 0
    while True:
        message = await receive()
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_GATE_BODY:
            await _reply(send, 413, b'{"exception_message": "gate request too large"}')
            return
        chunks.append(chunk)
        if not message.get("more_body"):
            break
    body = b"".join(chunks)  # a plan's table comes in many chunks: joined once
    try:
        status, reply = 200, await asyncio.to_thread(answer_gate, body)
    except GateRequestError as exc:
        status, reply = 400, json.dumps({"exception_message": str(exc)}).encode()
    except Exception as exc:  # noqa: BLE001 - any failure: the command gates by itself
        status, reply = 500, json.dumps({"exception_message": f"gate failed: {exc}"}).encode()
    await _reply(send, status, reply)


def _load_gates() -> None:
    """Import great-expectations and make its context, at the lowest CPU priority (this
    thread only), so the first command's gate finds it ready."""
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
    from tasks.gates import warm_up

    warm_up()


class Activity:
    """ASGI middleware: the time of the last request that reached the server, the gate
    route (behind the server's secret, as Prefect's API is), and a `Retry-After` on its 503
    replies (RETRY_AFTER_S)."""

    def __init__(self, app: Any, auth_string: str) -> None:
        self.app = app
        self.auth_string = auth_string
        self.last = time.monotonic()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        self.last = time.monotonic()
        if scope["type"] == "http" and scope["path"].startswith("/judgeline/"):
            if scope["path"] == GATE_PATH and scope["method"] == "POST":
                await _gate(scope, receive, send, self.auth_string)
            else:
                await _reply(send, 404, b'{"exception_message": "Not Found"}')
            return

        async def sending(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start" and message["status"] == 503:
                headers = list(message.get("headers", []))
                if not any(name.lower() == b"retry-after" for name, _ in headers):
                    headers.append((b"retry-after", RETRY_AFTER_S.encode()))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, sending)


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


def empty_database() -> Path | None:
    """Where this machine keeps an empty Prefect database of this Prefect version, migrated
    and with Prefect's block types registered (None when Prefect's database is not the
    home's SQLite file).

    A new home's first server start spends most of its time migrating a new database; the
    first one on a machine saves a copy of the result, which later new homes start from."""
    if any(os.environ.get(f"PREFECT_{part}_DATABASE_CONNECTION_URL") for part in ("API", "SERVER")):
        return None
    return user_cache_dir() / _empty_name()


def installed_empty_database() -> Path:
    """The empty database `./run` built when it installed judgeline (`python -m flows.serverd
    --install-empty`), beside the interpreter: a new home starts from it on a machine whose
    cache has none yet, so not even the first command migrates a database."""
    return Path(sys.prefix) / "share" / "judgeline" / _empty_name()


def _empty_name() -> str:
    return f"prefect-{prefect_version()}-empty.db"


def install_empty_database() -> Path | None:
    """Build `installed_empty_database` if it is missing (in a process of its own: this sets
    its environment): start a server in a home of its own, with a cache of its own, so that
    it migrates a new database and keeps its copy; move that copy into place. None if it
    could not be built (the first command then migrates)."""
    import tempfile

    from flows.localserver import ensure_server, stop_server

    target = installed_empty_database()
    if target.is_file():
        return target
    with tempfile.TemporaryDirectory(prefix="judgeline-empty-db-") as tmp:
        # This process exists for this (`--install-empty`): its environment is its own.
        os.environ["PREFECT_HOME"] = f"{tmp}/home"
        os.environ["XDG_CACHE_HOME"] = f"{tmp}/cache"
        built = empty_database()
        if built is None:
            return None
        try:
            ensure_server(Path(f"{tmp}/home"), idle_s=60)
        except JudgelineError as exc:
            print(exc, file=sys.stderr)
            return None
        finally:
            stop_server(Path(f"{tmp}/home"))
        if not built.is_file():
            return None
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(built, target)
    return target


def _start_from_empty(database: Path, empty: Path | None) -> bool:
    """Copy the empty database into a home that has none; False if the server must build
    the database itself (no copy yet, or it could not be copied)."""
    if empty is None or database.exists() or not empty.is_file():
        return False
    tmp = database.with_name(f".{database.name}.{os.getpid()}")
    try:
        shutil.copyfile(empty, tmp)
        os.replace(tmp, database)
    except OSError:
        tmp.unlink(missing_ok=True)
        return False
    return True


def _keep_empty(database: Path, empty: Path) -> None:
    """Save a consistent copy of the database a server just built (SQLite's backup API)."""
    tmp = empty.with_name(f".{empty.name}.{os.getpid()}")
    try:
        empty.parent.mkdir(parents=True, exist_ok=True)
        with sqlite3.connect(database) as source, sqlite3.connect(tmp) as target:
            source.backup(target)
        os.replace(tmp, empty)
    except (OSError, sqlite3.Error):
        tmp.unlink(missing_ok=True)


def _skip_block_registration() -> None:
    """A database copied from an empty one already holds the block types a server of this
    Prefect version registers on start (the server that built it registered them): this
    server does not register them again (about 2.5 s of a first start: importing every
    Prefect collection to hash the registry, then 1.7 s registering). Set before Prefect is
    imported, which reads its settings once. The home's next server start registers them as
    Prefect always does (memoized)."""
    os.environ["PREFECT_SERVER_REGISTER_BLOCKS_ON_START"] = "false"
    os.environ["PREFECT_SERVER_MEMOIZE_BLOCK_AUTO_REGISTRATION"] = "false"


def serve(home: Path, idle_s: float, port: int = 0) -> None:
    """Serve Prefect's application for this home on `port` (0: a free one) until idle or
    signalled."""
    code = code_stamp()  # before the imports: an edit made meanwhile leaves this one stale
    os.umask(0o077)
    private_home(home)
    auth_string = os.environ.get("PREFECT_SERVER_API_AUTH_STRING", "")
    if not auth_string:
        raise SystemExit("the local server needs its secret (PREFECT_SERVER_API_AUTH_STRING)")
    files = ServerFiles(home)
    database, empty = home / "prefect.db", empty_database()
    new = empty is not None and not database.exists()
    copied = new and (
        _start_from_empty(database, empty)
        or _start_from_empty(database, installed_empty_database())
    )
    builds = new and not copied  # no copy to start from: this server migrates a database
    if copied:
        _skip_block_registration()
    import uvicorn
    from prefect.server.api.server import create_app

    # IPPROTO_TCP named: asyncio turns Nagle's algorithm off only on sockets that say they
    # are TCP, and without that every reply (head and body written apart) waited 40 ms for
    # the client's delayed ACK, 44 ms a request instead of 0.6 ms.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    port = sock.getsockname()[1]
    activity = Activity(create_app(final=True), auth_string)
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
        code=code,
    )

    async def main() -> None:
        serving = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started:
            if serving.done():
                await serving
                return
            await asyncio.sleep(0.05)
        if builds and empty is not None and not empty.exists():
            # Before any command uses it: the copy holds no flow run of anyone's.
            await asyncio.to_thread(_keep_empty, database, empty)
        files.publish(info)
        threading.Thread(target=_load_gates, name="gates-warm-up", daemon=True).start()
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
    if sys.argv[1:] == ["--install-empty"]:
        made = install_empty_database()
        print(f"empty Prefect database: {made or 'not built (the first command migrates one)'}")
    else:
        serve(Path(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else 0)
