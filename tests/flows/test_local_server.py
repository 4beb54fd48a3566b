"""The local Prefect server the commands of one Prefect home share (flows.localserver): the
first command that runs a flow starts it, later ones reuse it, it stops after its idle
period, a killed one is replaced, two first commands at once start one, and an input that
is refused never starts it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import REPO

from flows.localserver import ServerFiles, stop_server

JUDGELINE = str(REPO / ".venv" / "bin" / "judgeline")


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    """A Prefect home of its own; its server is stopped when the test ends."""
    path = tmp_path / "prefect-home"
    yield path
    stop_server(path)


def _env(home: Path, idle_s: float = 120) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env["PREFECT_HOME"] = str(home)
    env["JUDGELINE_SERVER_IDLE_SECONDS"] = str(idle_s)
    env.pop("JUDGELINE_WORK_DIR", None)
    return env


def _judgments(path: Path) -> Path:
    """A judgments table of 3 pairs judged once in each order (importing it is the smallest
    job that runs a flow)."""
    lines = ["pair_id,question,a,b,reply,order"]
    lines += [f"p{i},Question {i}?,yes {i},no {i},My final verdict is [[A>B]].,{order}"
              for i in range(3) for order in ("AB", "BA")]  # fmt: skip
    path.write_text("\n".join(lines) + "\n")
    return path


def _import(tmp_path: Path, home: Path, idle_s: float = 120) -> subprocess.Popen[str]:
    """`judgeline import` of a small judgments table: a job that runs a flow."""
    table = _judgments(tmp_path / "judgments.csv")
    command = [JUDGELINE, "--work-dir", str(tmp_path / "work"), "import", "table", str(table),
               "--map", "pair_id=pair_id,question=question,answer_a=a,answer_b=b,reply=reply,"
               "order=order", "--judge", "j"]  # fmt: skip
    return subprocess.Popen(
        command, env=_env(home, idle_s), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _finish(proc: subprocess.Popen[str]) -> None:
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, out + err
    assert "report: " in out, out


def _server_pid(home: Path) -> int:
    info = ServerFiles(home).read()
    assert info is not None, "no server state file"
    return info.pid


def _starts(home: Path) -> int:
    """How many servers started for this home (each says so once in its log)."""
    log = ServerFiles(home).log
    return log.read_text().count("judgeline local Prefect server: pid") if log.exists() else 0


def _gone(pid: int, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.2)
    return False


@pytest.mark.slow
def test_a_second_command_reuses_the_server_and_a_killed_one_is_replaced(
    tmp_path: Path, home: Path
) -> None:
    _finish(_import(tmp_path, home))
    first = _server_pid(home)
    _finish(_import(tmp_path, home))
    assert _server_pid(home) == first and _starts(home) == 1
    os.kill(first, signal.SIGKILL)
    assert _gone(first, 10)
    _finish(_import(tmp_path, home))
    assert _server_pid(home) != first and _starts(home) == 2


@pytest.mark.slow
def test_two_first_commands_at_once_start_one_server(tmp_path: Path, home: Path) -> None:
    procs = [_import(tmp_path, home) for _ in range(2)]
    for proc in procs:
        _finish(proc)
    assert _starts(home) == 1


@pytest.mark.slow
def test_the_server_stops_after_its_idle_period(tmp_path: Path, home: Path) -> None:
    _finish(_import(tmp_path, home, idle_s=3))
    pid = _server_pid(home)
    assert _gone(pid, 30), "the server outlived its idle period"
    assert not ServerFiles(home).state.exists()
    # The next command starts a new one.
    _finish(_import(tmp_path, home, idle_s=3))
    assert _starts(home) == 2


@pytest.mark.slow
def test_server_commands_show_and_stop_it(tmp_path: Path, home: Path) -> None:
    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        command = [JUDGELINE, "--work-dir", str(tmp_path / "work"), "server", *args]
        return subprocess.run(command, env=_env(home), capture_output=True, text=True, timeout=300)

    none = cli("status")
    assert none.returncode == 1 and "no local Prefect server runs" in none.stdout
    started = cli("start")
    assert started.returncode == 0 and "local Prefect server: pid" in started.stdout
    pid = _server_pid(home)
    shown = cli("status")
    assert shown.returncode == 0 and f"pid {pid}" in shown.stdout and "idle" in shown.stdout
    stopped = cli("stop")
    assert stopped.returncode == 0 and f"pid {pid}" in stopped.stdout
    assert _gone(pid, 20) and not ServerFiles(home).state.exists()


def test_a_refused_input_starts_no_server(tmp_path: Path, home: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"pair_id": 1}\n')
    config = tmp_path / "run.yaml"
    config.write_text("name: x\ndatasets: []\njudges: []\n")
    for args in (("import", "judgebench", str(bad)), ("run", str(config))):
        started = time.monotonic()
        command = [JUDGELINE, "--work-dir", str(tmp_path / "work"), *args]
        result = subprocess.run(command, env=_env(home), capture_output=True, text=True)
        assert result.returncode == 2, (args, result.stdout, result.stderr)
        assert "Traceback" not in result.stderr
        assert time.monotonic() - started < 30
    assert not ServerFiles(home).state.exists() and _starts(home) == 0
    assert not (home / "prefect.db").exists()


def test_a_request_to_the_server_takes_no_delayed_ack(tmp_path: Path, home: Path) -> None:
    """A reply written in two parts (head, then body) on a connection with Nagle's algorithm
    waits for the client's delayed ACK: 44 ms a request, every Prefect API call of every
    command. Asked directly and through a command's relay, the server answers in far less."""
    import http.client
    import statistics

    from flows.localserver import basic_auth
    from flows.relay import Relay

    _finish(_import(tmp_path, home))
    files = ServerFiles(home)
    info = files.read()
    assert info is not None
    relay = Relay(lambda refused: files.read())
    for port in (info.port, relay.port):
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)  # kept alive
        headers = {"authorization": basic_auth(files.auth_string())}
        walls = []
        for _ in range(15):
            started = time.perf_counter()
            connection.request("GET", "/api/admin/version", headers=headers)
            reply = connection.getresponse()
            assert reply.status == 200 and reply.read()
            walls.append(time.perf_counter() - started)
        connection.close()
        assert statistics.median(walls) < 0.02, (port, walls)


def test_state_file_names_pid_port_and_version(tmp_path: Path) -> None:
    files = ServerFiles(tmp_path)
    files.state.write_text("{not json")
    assert files.read() is None  # a damaged state file names no server
    files.state.write_text(json.dumps({"pid": 1, "port": 2, "prefect_version": "x",
                                       "idle_seconds": 3.0, "started_at": 4.0}))  # fmt: skip
    info = files.read()
    assert info is not None and info.api_url == "http://127.0.0.1:2/api"


@pytest.fixture
def read_only_dir(tmp_path: Path) -> Iterator[Path]:
    """A work dir used before (its Prefect home exists), now on a read-only bind mount
    (skipped where mounting is not allowed)."""
    source, target = tmp_path / "source", tmp_path / "read-only"
    (source / ".prefect").mkdir(parents=True)
    target.mkdir()
    mounted = subprocess.run(["mount", "--bind", str(source), str(target)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot bind-mount here: {mounted.stderr.decode().strip()}")
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(target)], check=True)
        yield target
    finally:
        subprocess.run(["umount", str(target)], check=False)


def test_a_read_only_work_dir_is_refused_at_once(
    tmp_path: Path, home: Path, read_only_dir: Path
) -> None:
    config = tmp_path / "run.yaml"
    judge = "{name: j, base_url: 'http://127.0.0.1:9/v1', model: m}"
    config.write_text(f"name: x\ndatasets: [{{kind: demo}}]\njudges: [{judge}]\n")
    env = _env(home)
    env.pop("PREFECT_HOME")  # Prefect's home would be in the work dir, too
    started = time.monotonic()
    command = [JUDGELINE, "--work-dir", str(read_only_dir), "run", str(config)]
    result = subprocess.run(command, env=env, capture_output=True, text=True)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.startswith(f"error: {read_only_dir}: not usable as a work dir"), (
        result.stderr
    )
    assert "Read-only file system" in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert time.monotonic() - started < 30


@pytest.mark.slow
def test_a_server_whose_home_is_deleted_stops(tmp_path: Path, home: Path) -> None:
    """`rm -rf work` under a running server: no command can reach it any more, so it exits
    instead of running forever."""
    import shutil

    command = [JUDGELINE, "--work-dir", str(tmp_path / "work"), "server", "start"]
    started = subprocess.run(command, env=_env(home), capture_output=True, text=True)
    assert started.returncode == 0, started.stderr
    pid = _server_pid(home)
    shutil.rmtree(home)
    assert _gone(pid, 30), "the server outlived its deleted home"
