"""The local server process (flows.serverd): its middleware notes each request's time and asks
Prefect's client to retry a 503 at once, not after its default 2 s back-off; a new home's
server starts from a copy of the empty database the machine's first one built."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import subprocess
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from support import REPO

from flows.localserver import ServerFiles, basic_auth
from flows.serverd import (
    RETRY_AFTER_S,
    Activity,
    _keep_empty,
    _start_from_empty,
    empty_database,
    installed_empty_database,
)

JUDGELINE = str(REPO / ".venv" / "bin" / "judgeline")
AUTH = "judgeline:s3cret"


def _reply(status: int, headers: list[tuple[bytes, bytes]]) -> Any:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": b"{}"})

    return app


def _sent(app: Any) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        messages.append(message)

    async def receive() -> dict[str, Any]:
        return {"type": "http.request"}

    asyncio.run(Activity(app, AUTH)({"type": "http", "path": "/api/task_runs/"}, receive, send))
    return messages


def test_a_503_asks_for_a_retry_at_once_and_other_replies_pass_unchanged() -> None:
    locked = _sent(_reply(503, [(b"content-type", b"application/json")]))
    assert (b"retry-after", RETRY_AFTER_S.encode()) in locked[0]["headers"]
    assert (b"content-type", b"application/json") in locked[0]["headers"]
    assert locked[1] == {"type": "http.response.body", "body": b"{}"}
    assert float(RETRY_AFTER_S) < 0.5

    ok = _sent(_reply(201, [(b"content-type", b"application/json")]))
    assert ok[0]["headers"] == [(b"content-type", b"application/json")]

    chosen = _sent(_reply(503, [(b"Retry-After", b"7")]))
    assert chosen[0]["headers"] == [(b"Retry-After", b"7")]


def test_a_request_is_noted_as_activity() -> None:
    activity = Activity(_reply(200, []), AUTH)
    before = activity.last

    async def send(message: dict[str, Any]) -> None:
        return None

    async def receive() -> dict[str, Any]:
        return {"type": "http.request"}

    asyncio.run(activity({"type": "http", "path": "/api/health"}, receive, send))
    assert activity.last > before


def test_an_empty_database_is_kept_once_and_copied_into_new_homes_only(tmp_path: Path) -> None:
    built = tmp_path / "first" / "prefect.db"
    built.parent.mkdir()
    with sqlite3.connect(built) as con:
        con.execute("PRAGMA journal_mode = WAL")
        con.execute("CREATE TABLE block_type (id TEXT)")
        con.execute("INSERT INTO block_type VALUES ('3f1c')")
        con.commit()
        # Left open: the row is in the write-ahead log, not yet in the file itself.
        empty = tmp_path / "cache" / "prefect-x-empty.db"
        _keep_empty(built, empty)
    with sqlite3.connect(empty) as con:
        assert con.execute("SELECT id FROM block_type").fetchall() == [("3f1c",)]

    new = tmp_path / "second" / "prefect.db"
    new.parent.mkdir()
    assert _start_from_empty(new, empty)
    with sqlite3.connect(new) as con:
        assert con.execute("SELECT id FROM block_type").fetchall() == [("3f1c",)]

    used = tmp_path / "third" / "prefect.db"
    used.parent.mkdir()
    used.write_bytes(b"a home's own database")
    assert not _start_from_empty(used, empty)
    assert used.read_bytes() == b"a home's own database"
    assert not _start_from_empty(tmp_path / "fourth.db", tmp_path / "no-copy-yet.db")
    assert not _start_from_empty(tmp_path / "fifth.db", None)


def test_no_copy_is_kept_for_a_database_elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PREFECT_API_DATABASE_CONNECTION_URL", "postgresql+asyncpg://db/prefect")
    assert empty_database() is None


@pytest.mark.slow
def test_a_new_home_starts_from_the_first_homes_database(tmp_path: Path) -> None:
    """The second home's server starts on a copy of the database the first one built (the
    same block type ids, which a fresh build draws at random) and answers, without
    registering the block types the copy holds again (their update times are the copy's)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    env.pop("JUDGELINE_WORK_DIR", None)
    ids = []
    for name in ("first", "second"):
        env["PREFECT_HOME"] = str(tmp_path / name)
        command = [JUDGELINE, "--work-dir", str(tmp_path / f"work-{name}"), "server"]
        started = subprocess.run([*command, "start"], env=env, capture_output=True, text=True)
        try:
            assert started.returncode == 0, started.stderr
            info = json.loads((tmp_path / name / "judgeline-server.json").read_text())
            url = f"http://127.0.0.1:{info['port']}/api/block_types/filter"
            auth = ServerFiles(tmp_path / name).auth_string()
            headers = {"authorization": basic_auth(auth)}
            request = urllib.request.Request(url, data=b"{}", headers=headers)
            with urllib.request.urlopen(request) as reply:
                ids.append(sorted((b["id"], b["updated"]) for b in json.loads(reply.read())))
        finally:
            subprocess.run([*command, "stop"], env=env, capture_output=True)
    empty = list((tmp_path / "cache" / "judgeline").glob("prefect-*-empty.db"))
    # The first home started from the database `./run` installed, if there is one; else it
    # built its own and kept a copy.
    assert len(empty) == (0 if installed_empty_database().is_file() else 1), empty
    assert ids[0] and ids[0] == ids[1]


def test_the_command_line_imports_no_heavy_library_until_a_job_needs_it() -> None:
    """`judgeline runs` and every refusal pay for the command line alone: Prefect, pandas,
    DuckDB and great-expectations are imported by the jobs that use them."""
    probe = (
        "import sys, flows.cli; "
        "print(sorted(m for m in ('prefect', 'pandas', 'duckdb', 'great_expectations') "
        "if m in sys.modules))"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    shown = subprocess.run(
        [str(REPO / ".venv" / "bin" / "python"), "-c", probe],
        capture_output=True, text=True, env=env, cwd=REPO, check=True,
    )  # fmt: skip
    assert shown.stdout.strip() == "[]", shown.stdout


@pytest.mark.slow
def test_work_dirs_share_the_users_prefect_home(tmp_path: Path) -> None:
    """With no PREFECT_HOME, a run's Prefect database and local server are the user's own
    (under XDG_STATE_HOME), not in its work dir, and `./work` under the shell's directory is
    not made when the configuration names the work dir."""
    import yaml

    from tasks.demo import demo_config
    from tasks.simjudge.server import SimJudgeServer

    shell = tmp_path / "shell"
    shell.mkdir()
    table = tmp_path / "pairs.csv"
    table.write_text("q,a,b\n" + "".join(f"Q{i}?,yes {i},no {i}\n" for i in range(3)))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.pop("JUDGELINE_WORK_DIR", None)
    env["XDG_STATE_HOME"] = str(tmp_path / "state")
    home = tmp_path / "state" / "judgeline" / "prefect"
    with SimJudgeServer() as judge:
        config = demo_config(judge.base_url, k=2).model_dump(mode="json", exclude_none=True)
        config["judges"] = config["judges"][:1]
        config["datasets"] = [
            {"kind": "table", "path": str(table), "mapping": "question=q,answer_a=a,answer_b=b"}
        ]
        config["work_dir"] = str(tmp_path / "bench-work")
        path = tmp_path / "run.yaml"
        path.write_text(yaml.safe_dump(config))
        done = subprocess.run(
            [JUDGELINE, "run", str(path)], cwd=shell, env=env, capture_output=True, text=True
        )
    try:
        assert done.returncode == 0, done.stderr
        assert (home / "prefect.db").is_file()
        # One server holds every work dir's runs: each is tagged with its work dir.
        info = json.loads((home / "judgeline-server.json").read_text())
        request = urllib.request.Request(
            f"http://127.0.0.1:{info['port']}/api/flow_runs/filter", data=b"{}",
            headers={"authorization": basic_auth(ServerFiles(home).auth_string()),
                     "content-type": "application/json"},
        )  # fmt: skip
        with urllib.request.urlopen(request) as reply:
            tags = [run["tags"] for run in json.loads(reply.read())]
        assert tags and all(f"work-dir:{tmp_path / 'bench-work'}" in t for t in tags), tags
        assert not (tmp_path / "bench-work" / ".prefect").exists()
        assert not (shell / "work").exists()
    finally:
        from flows.localserver import stop_server

        stop_server(home)


def test_a_gate_request_in_chunks_is_answered_as_the_gate_here() -> None:
    """The server's gate route reads a request body sent in many chunks whole, and answers
    with the results great-expectations gives in this process."""
    import pandas as pd

    from flows.localserver import GATE_PATH
    from tasks.gates import Expect, gate_request, gx_results

    df = pd.DataFrame({"pair_id": ["p1", "p2", "p3"], "ok": [True, False, True]})
    checks = [Expect("ExpectColumnValuesToBeInSet", column="ok", value_set=[True])]
    body = gate_request("chunks", df, checks)
    assert body is not None
    pieces = [body[i : i + 7] for i in range(0, len(body), 7)]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        piece = pieces.pop(0)
        return {"type": "http.request", "body": piece, "more_body": bool(pieces)}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def untouched(scope: dict[str, Any], receive: Any, send: Any) -> None:
        raise AssertionError("the gate route reached Prefect's application")

    from flows.localserver import basic_auth

    scope = {"type": "http", "path": GATE_PATH, "method": "POST",
             "headers": [(b"authorization", basic_auth(AUTH).encode())]}  # fmt: skip
    asyncio.run(Activity(untouched, AUTH)(scope, receive, send))
    assert sent[0]["status"] == 200
    assert json.loads(sent[1]["body"]) == json.loads(json.dumps(gx_results("x", df, checks)))


def test_a_gate_request_without_the_secret_or_too_large_is_refused_unread() -> None:
    from flows.localserver import GATE_PATH, basic_auth
    from tasks.gates import MAX_GATE_BODY

    read: list[int] = []

    async def receive() -> dict[str, Any]:
        read.append(1)
        return {"type": "http.request", "body": b"x" * (1 << 20), "more_body": True}

    async def untouched(scope: dict[str, Any], receive: Any, send: Any) -> None:
        raise AssertionError("the gate route reached Prefect's application")

    def status(headers: list[tuple[bytes, bytes]]) -> int:
        sent: list[dict[str, Any]] = []

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        scope = {"type": "http", "path": GATE_PATH, "method": "POST", "headers": headers}
        asyncio.run(Activity(untouched, AUTH)(scope, receive, send))
        return int(sent[0]["status"])

    good = (b"authorization", basic_auth(AUTH).encode())
    assert status([]) == 401 and status([(b"authorization", b"Basic eDp5")]) == 401
    assert read == []
    assert status([good, (b"content-length", str(MAX_GATE_BODY + 1).encode())]) == 413
    assert read == []
    assert status([good]) == 413  # no length given: read until the cap, no further
    assert len(read) == MAX_GATE_BODY // (1 << 20) + 1
