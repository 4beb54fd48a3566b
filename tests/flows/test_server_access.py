"""Nobody but its user talks to the local Prefect server (flows.localserver, flows.serverd):
its API answers 401 without the auth string and does nothing; its UI is told the server's own
address; the gates run in a child of the command that no other process can reach; a dead
server's port taken by another process catches nothing that opens the new server; the home
is private; no process of it holds a key.

Where the tests run as root, the "other user" is a child process that drops to uid 65534
(nobody); elsewhere it is a process of the same user without the auth string.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from server_support import env_for, finish, import_command, server_info, starts
from support import CountingListener

from flows.localserver import ServerFiles, ServerInfo, ensure_server, stop_server
from tasks.errors import InputError
from tasks.store.private import LockTimeout, lock_file, private_home

pytestmark = pytest.mark.slow
KEYS = {
    "OPENAI_API_KEY": "sk-owner-openai",
    "ANTHROPIC_API_KEY": "sk-owner-anthropic",
    "MY_JUDGE_TOKEN": "owner-token",
    "AWS_SECRET_ACCESS_KEY": "owner-aws",
}


@pytest.fixture(scope="module")
def started(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, ServerInfo]]:
    """A local server started from an environment holding the owner's keys."""
    home = tmp_path_factory.mktemp("access") / "home"
    saved = {name: os.environ.get(name) for name in KEYS}
    os.environ.update(KEYS)
    try:
        info = ensure_server(home, idle_s=120)
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    yield home, info
    stop_server(home)


SYSTEM_PYTHON = next(
    (p for p in ("/usr/bin/python3", "/usr/local/bin/python3") if os.access(p, os.X_OK)), None
)
"""An interpreter another user can run (this venv's may lie under a folder only we enter)."""
AS_OTHER_UID = os.getuid() == 0 and SYSTEM_PYTHON is not None


def _as_other_user(code: str) -> subprocess.CompletedProcess[str]:
    """Run `code` (standard library only) as another local user (uid 65534 when this is
    root and a system Python exists), else as a process of ours without the secret."""
    env = {"PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"}
    preexec = None
    if AS_OTHER_UID:

        def preexec() -> None:
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)

    return subprocess.run(
        [SYSTEM_PYTHON if AS_OTHER_UID else sys.executable, "-I", "-c", code],
        env=env,
        cwd="/",
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=preexec,
    )


ATTACK = """
import json, urllib.request, urllib.error
JSON = {{"content-type": "application/json"}}
def post(url, body, headers):
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data=body, headers=headers,
                                                           method="POST"), timeout=20) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
base = "http://127.0.0.1:{port}"
print(json.dumps({{
    "flow_runs": post(base + "/api/flow_runs/filter", b"{{}}", JSON),
    "create_flow": post(base + "/api/flows/", json.dumps({{"name": "theirs"}}).encode(), JSON),
    "variables": post(base + "/api/variables/filter", b"{{}}", JSON),
}}))
"""


def _post(info: ServerInfo, path: str, body: bytes, auth: str | None) -> tuple[int, bytes]:
    headers = {"content-type": "application/json"}
    if auth:
        headers["authorization"] = "Basic " + base64.b64encode(auth.encode()).decode()
    request = urllib.request.Request(f"{info.url}{path}", data=body, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as reply:
            return reply.status, reply.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_without_the_secret_every_route_answers_401_and_nothing_is_made(
    started: tuple[Path, ServerInfo],
) -> None:
    home, info = started
    auth = ServerFiles(home).auth_string()
    done = _as_other_user(ATTACK.format(port=info.port))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"flow_runs": 401, "create_flow": 401, "variables": 401}
    status, body = _post(info, "/api/flows/filter", b"{}", auth)
    assert status == 200
    assert "theirs" not in {flow["name"] for flow in json.loads(body)}


def test_the_ui_is_told_the_servers_own_address_and_asks_for_the_auth_string(
    started: tuple[Path, ServerInfo],
) -> None:
    """Prefect's UI learns its API's address from `/ui-settings`: the server's own port, not
    Prefect's default 4200 (where the browser would send the auth string to whoever listens)."""
    _, info = started
    with urllib.request.urlopen(f"{info.url}/ui-settings", timeout=30) as reply:
        settings = json.loads(reply.read())
    assert settings["api_url"] == info.api_url and settings["auth"] == "BASIC"
    assert info.port != 4200


def test_the_gate_runner_is_reached_only_through_its_pipes_and_holds_no_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The gates run in a child of the command: it listens on nothing, and its environment
    holds none of the command's keys."""
    import psutil

    from tasks.gates import runner as gate_runner

    for name, value in KEYS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(gate_runner, "_runner", None)
    monkeypatch.setattr(gate_runner, "_runner_failed", False)
    with gate_runner._runner_lock:
        runner = gate_runner._gate_runner()
    assert runner is not None
    try:
        child = psutil.Process(runner.pid)
        assert child.net_connections("inet") == []
        environ = child.environ()
        for name, value in KEYS.items():
            assert name not in environ and value not in environ.values()
        assert "PREFECT_API_AUTH_STRING" not in environ
    finally:
        runner.kill()
        runner.wait()


def test_the_home_is_private_and_the_server_holds_no_key(started: tuple[Path, ServerInfo]) -> None:
    home, info = started
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    for path in home.rglob("*"):
        # Prefect's copy of its UI (public files) keeps the installation's modes; nobody
        # else can enter the home it lies in.
        if "ui" not in path.relative_to(home).parts[:1]:
            assert stat.S_IMODE(path.lstat().st_mode) & 0o077 == 0, path
    import psutil

    for pid in (info.pid, info.supervisor):
        process = psutil.Process(pid)
        environ = process.environ()
        for name, value in KEYS.items():
            assert name not in environ and value not in environ.values(), pid
        assert process.cwd() == "/"
    # The server is Prefect's own, started as Prefect documents it.
    assert psutil.Process(info.pid).cmdline()[-7:] == [
        "prefect", "server", "start", "--host", "127.0.0.1", "--port", str(info.port)
    ][-7:] or psutil.Process(info.pid).cmdline()[-6:] == [
        "server", "start", "--host", "127.0.0.1", "--port", str(info.port)
    ]  # fmt: skip
    assert "-I" in psutil.Process(info.supervisor).cmdline()
    # Another user can read none of it.
    probe = f"""
import os
home = {str(home)!r}
seen = []
for name in ["judgeline-server.auth", "judgeline-server.json", "prefect.db",
             "judgeline-server.lock", "judgeline-server.log"]:
    try:
        open(os.path.join(home, name), "rb").read(1)
        seen.append(name)
    except OSError:
        pass
try:
    open("/proc/{info.pid}/environ", "rb").read(1)
    seen.append("environ")
except OSError:
    pass
print(seen)
"""
    if AS_OTHER_UID:
        done = _as_other_user(probe)
        assert done.stdout.strip() == "[]", done.stdout + done.stderr


def test_a_home_of_another_user_is_refused_and_an_open_one_is_closed(tmp_path: Path) -> None:
    opened = tmp_path / "opened"
    opened.mkdir(mode=0o755)
    (opened / "prefect.db").write_bytes(b"")
    (opened / "prefect.db").chmod(0o644)
    private_home(opened)
    assert stat.S_IMODE(opened.stat().st_mode) == 0o700
    assert stat.S_IMODE((opened / "prefect.db").stat().st_mode) == 0o600
    if os.getuid() == 0:
        theirs = tmp_path / "theirs"
        theirs.mkdir()
        os.chown(theirs, 65534, 65534)
        with pytest.raises(InputError, match="another user"):
            private_home(theirs)


def test_a_lock_wait_is_bounded_and_names_the_holder(tmp_path: Path) -> None:
    path = tmp_path / "judgeline-server.lock"
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import fcntl, time\n"
         "from pathlib import Path\n"
         "from tasks.store.private import lock_file\n"
         f"lock_file(Path({str(path)!r}), fcntl.LOCK_EX); print('held', flush=True)\n"
         "time.sleep(60)"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        import fcntl

        began = time.monotonic()
        with pytest.raises(LockTimeout, match=f"pid {holder.pid}"):
            lock_file(path, fcntl.LOCK_EX, wait_s=1.0)
        assert time.monotonic() - began < 5
    finally:
        holder.kill()
        holder.wait()


def _bind_when_free(port: int, within_s: float = 20) -> CountingListener:
    deadline = time.monotonic() + within_s
    while True:
        try:
            return CountingListener(port)
        except OSError:
            assert time.monotonic() < deadline, f"port {port} never came free"
            time.sleep(0.1)


def test_a_dead_servers_port_taken_by_another_process_catches_nothing_that_opens_the_next(
    tmp_path: Path,
) -> None:
    """The server dies; another process takes its port at once. The next command starts a
    new server on a port of its own, with a new auth string, and never sends that process a
    byte; the auth string a client of the dead server might still send it opens nothing."""
    home = tmp_path / "home"
    try:
        finish(subprocess.Popen(import_command(tmp_path), env=env_for(home), text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE))  # fmt: skip
        first, old_auth = server_info(home), ServerFiles(home).auth_string()
        os.kill(first.pid, signal.SIGKILL)
        squatter = _bind_when_free(first.port)
        try:
            finish(subprocess.Popen(import_command(tmp_path), env=env_for(home), text=True,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE))  # fmt: skip
            second, new_auth = server_info(home), ServerFiles(home).auth_string()
            assert second.pid != first.pid and second.port != first.port and starts(home) == 2
            assert squatter.connections == 0 and squatter.received == b""
            assert new_auth != old_auth
            assert _post(second, "/api/flows/filter", b"{}", old_auth)[0] == 401
            assert _post(second, "/api/flows/filter", b"{}", new_auth)[0] == 200
        finally:
            squatter.close()
    finally:
        stop_server(home)


def test_every_gate_judgeline_runs_is_answered_by_the_gate_runner() -> None:
    """The stage names and expectations of judgeline's own gates pass the runner's checks: a
    refusal would silently gate in the command, which then imports great-expectations."""
    import pandas as pd

    from tasks import gates
    from tasks.gates import runner as gate_runner
    from tasks.remap.gate import STAGE

    df = pd.DataFrame({"pair_id": ["p1", "p2"], "seed": [0, 1], "order": ["AB", "BA"]})
    checks = [
        gates.Expect("ExpectColumnValuesToBeUnique", column="pair_id"),
        gates.Expect("ExpectColumnValuesToBeBetween", column="seed", min_value=0, max_value=3),
        gates.Expect("ExpectCompoundColumnsToBeUnique", column_list=["pair_id", "seed"]),
        gates.Expect("ExpectColumnValuesToBeInSet", column="order", value_set=["AB", "BA"]),
    ]
    for stage in ("manifest", "plan 0123456789abcdef", STAGE):
        answered = gate_runner.runner_results(stage, df, checks)
        assert answered is not None and all(r["success"] for r in answered), stage
    assert not gate_runner._runner_failed
