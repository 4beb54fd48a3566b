"""Nobody but its user talks to the local Prefect server (flows.localserver, flows.serverd,
flows.relay): its API and gate route answer 401 without the home's secret and do nothing;
the gate builds only judgeline's own expectations; a restarted server is never reached on a
port another process holds; its home is private; its environment holds no key.

Where the tests run as root, the "other user" is a child process that drops to uid 65534
(nobody); elsewhere it is a process of the same user without the secret.
"""

from __future__ import annotations

import base64
import http.client
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
from support import CountingListener

from flows.localserver import GATE_PATH, ServerFiles, ServerInfo, ensure_server, stop_server
from flows.serveraccess import ServerError, lock_file, private_home, serves_port
from tasks.errors import InputError

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
gate = json.dumps({{"stage": "x", "expectations": [["ExpectColumnValuesToBeInSet",
    {{"column": "a", "value_set": [1], "row_condition": "a.__class__",
      "condition_parser": "pandas"}}]], "objects": []}}).encode() + b"\\n"
print(json.dumps({{
    "gate": post(base + "/judgeline/gate", gate, {{}}),
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


def _declared_too_large(info: ServerInfo, auth: str) -> int:
    """The status for a gate request that declares a body past the limit and sends none:
    the server must answer from the header alone, before reading anything."""
    connection = http.client.HTTPConnection("127.0.0.1", info.port, timeout=30)
    try:
        connection.putrequest("POST", GATE_PATH)
        connection.putheader("authorization", "Basic " + base64.b64encode(auth.encode()).decode())
        connection.putheader("content-length", str(64 * 1024 * 1024 + 1))
        connection.endheaders()
        return connection.getresponse().status
    finally:
        connection.close()


def test_without_the_secret_every_route_answers_401_and_nothing_is_made(
    started: tuple[Path, ServerInfo],
) -> None:
    home, info = started
    auth = ServerFiles(home).auth_string()
    done = _as_other_user(ATTACK.format(port=info.port))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "gate": 401, "flow_runs": 401, "create_flow": 401, "variables": 401,
    }  # fmt: skip
    status, body = _post(info, "/api/flows/filter", b"{}", auth)
    assert status == 200
    assert "theirs" not in {flow["name"] for flow in json.loads(body)}


def test_the_gate_builds_only_judgelines_expectations_even_with_the_secret(
    started: tuple[Path, ServerInfo], tmp_path: Path
) -> None:
    home, info = started
    auth = ServerFiles(home).auth_string()
    target = tmp_path / "written-by-the-server"
    condition = f"a.__class__.__name__ == open({str(target)!r}, 'w').write('x') * 0"
    payloads = [
        ["ExpectColumnValuesToBeInSet",
         {"column": "a", "value_set": [1], "row_condition": condition,
          "condition_parser": "pandas"}],
        ["ExpectColumnValuesToMatchRegex", {"column": "a", "regex": "."}],
        ["ExpectColumnValuesToBeInSet", {"column": {"$eval": 1}, "value_set": [1]}],
    ]  # fmt: skip
    for expectation in payloads:
        head = {"stage": "x", "expectations": [expectation], "objects": []}
        status, body = _post(info, GATE_PATH, json.dumps(head).encode() + b"\n", auth)
        assert status == 400, body
    assert not target.exists()
    assert _declared_too_large(info, auth) == 413
    huge = b"0" * (64 * 1024 * 1024 + 1)
    try:
        status, _ = _post(info, GATE_PATH, huge, auth)
    except urllib.error.URLError as exc:  # refused before the body was sent: reset or EPIPE
        assert isinstance(exc.reason, (ConnectionResetError, BrokenPipeError)), exc
        status = 413
    assert status == 413
    assert ServerFiles(home).read() == info  # still the same server
    assert _post(info, "/api/flows/filter", b"{}", auth)[0] == 200


def test_the_home_is_private_and_the_server_holds_no_key(started: tuple[Path, ServerInfo]) -> None:
    home, info = started
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    for path in home.rglob("*"):
        assert stat.S_IMODE(path.lstat().st_mode) & 0o077 == 0, path
    environ = Path(f"/proc/{info.pid}/environ").read_bytes().decode(errors="replace")
    for name, value in KEYS.items():
        assert name not in environ and value not in environ
    cmdline = Path(f"/proc/{info.pid}/cmdline").read_bytes().split(b"\0")
    assert b"-I" in cmdline
    assert os.readlink(f"/proc/{info.pid}/cwd") == "/"
    # Another user can read none of it.
    probe = f"""
import os
home = {str(home)!r}
seen = []
for name in ["judgeline-server.secret", "judgeline-server.json", "prefect.db",
             "judgeline-server.lock"]:
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
         "import fcntl, os, sys, time\n"
         f"fd = os.open({str(path)!r}, os.O_RDWR | os.O_CREAT, 0o600)\n"
         "fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        import fcntl

        began = time.monotonic()
        with pytest.raises(ServerError, match=f"pid {holder.pid}"):
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


def test_a_restarted_server_is_never_reached_on_a_port_another_process_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from flows.relay import Relay
    from flows.serverwatch import LocalServer

    for name in ("PREFECT_API_URL", "PREFECT_API_AUTH_STRING", "JUDGELINE_GATE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("JUDGELINE_SERVER_IDLE_SECONDS", "120")
    home = tmp_path / "home"
    local = LocalServer(home)
    squatter: CountingListener | None = None
    try:
        first = local.ready()
        auth = os.environ["PREFECT_API_AUTH_STRING"]
        through = ServerInfo(0, local.relay.port, "", 0, 0)
        assert _post(through, "/api/flows/filter", b"{}", auth)[0] == 200

        # A live server's process, but its port held by another process (the state file
        # named a port the server no longer holds): the relay connects, finds the socket
        # is not the server's, and sends nothing.
        decoy = CountingListener(0)
        try:
            fake = ServerInfo(first.pid, decoy.port, "", 0, 0)
            assert not serves_port(first.pid, fake.port) and serves_port(first.pid, first.port)
            relay = Relay(lambda refused: fake)
            with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
                _post(ServerInfo(0, relay.port, "", 0, 0), "/api/flows/filter", b"{}", auth)
            time.sleep(0.5)
            assert decoy.received == b""
        finally:
            decoy.close()

        # The server dies; another process takes its port at once.
        os.kill(first.pid, signal.SIGKILL)
        squatter = _bind_when_free(first.port)
        status, _ = _post(through, "/api/flows/filter", b"{}", auth)
        assert status == 200
        assert local.info is not None and local.info.pid != first.pid
        assert local.info.port != first.port
        assert squatter.connections == 0 and squatter.received == b""
    finally:
        if squatter is not None:
            squatter.close()
        stop_server(home)


def test_every_gate_judgeline_runs_is_answered_by_the_server(
    started: tuple[Path, ServerInfo], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stage names and expectations of judgeline's own gates pass the server's checks: a
    refusal would silently gate in the command, which then imports great-expectations."""
    import pandas as pd

    from tasks import gates
    from tasks.remap.gate import STAGE

    home, info = started
    monkeypatch.setenv(gates.GATE_URL_ENV, f"{info.url}{GATE_PATH}")
    monkeypatch.setenv(gates.GATE_AUTH_ENV, ServerFiles(home).auth_string())
    df = pd.DataFrame({"pair_id": ["p1", "p2"], "seed": [0, 1], "order": ["AB", "BA"]})
    checks = [
        gates.Expect("ExpectColumnValuesToBeUnique", column="pair_id"),
        gates.Expect("ExpectColumnValuesToBeBetween", column="seed", min_value=0, max_value=3),
        gates.Expect("ExpectCompoundColumnsToBeUnique", column_list=["pair_id", "seed"]),
        gates.Expect("ExpectColumnValuesToBeInSet", column="order", value_set=["AB", "BA"]),
    ]
    for stage in ("manifest", "plan 0123456789abcdef", STAGE):
        answered = gates._remote_results(stage, df, checks)
        assert answered is not None and all(r["success"] for r in answered), stage


def test_a_server_running_other_code_is_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server started by another version of judgeline's server code (an upgrade, an edit)
    is not reused: it would answer with its own gate route until it idled out."""
    import flows.localserver as localserver
    from flows.localserver import live_server, process_alive

    home = tmp_path / "home"
    first = ensure_server(home, idle_s=120)
    try:
        assert first.code == localserver.code_stamp()
        assert live_server(ServerFiles(home)) == first
        monkeypatch.setattr(localserver, "code_stamp", lambda: "other code")
        assert live_server(ServerFiles(home)) is None
        second = ensure_server(home, idle_s=120)
        assert second.pid != first.pid and not process_alive(first.pid)
    finally:
        stop_server(home)
