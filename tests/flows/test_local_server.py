"""The local Prefect server the commands of one Prefect home share (flows.localserver): the
first command that runs a flow starts `prefect server start` under a supervisor, later ones
reuse it, it stops after its idle period, a killed one is replaced by the next command, two
first commands at once start one, `server stop` refuses while a command uses it, and an input
that is refused never starts it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from server_support import JUDGELINE, env_for, finish, gone, server_info, start_import, starts

from flows.localserver import STATE_FORMAT, ServerFiles, stop_server


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    """A Prefect home of its own; its server is stopped when the test ends."""
    path = tmp_path / "prefect-home"
    yield path
    stop_server(path)


@pytest.mark.slow
def test_a_second_command_reuses_the_server_and_a_killed_one_is_replaced(
    tmp_path: Path, home: Path
) -> None:
    finish(start_import(tmp_path, home))
    first = server_info(home).pid
    finish(start_import(tmp_path, home))
    assert server_info(home).pid == first and starts(home) == 1
    os.kill(first, signal.SIGKILL)
    assert gone(first, 10)
    finish(start_import(tmp_path, home))
    assert server_info(home).pid != first and starts(home) == 2


@pytest.mark.slow
def test_two_first_commands_at_once_start_one_server(tmp_path: Path, home: Path) -> None:
    procs = [start_import(tmp_path, home) for _ in range(2)]
    for proc in procs:
        finish(proc)
    assert starts(home) == 1


@pytest.mark.slow
def test_the_server_stops_after_its_idle_period(tmp_path: Path, home: Path) -> None:
    finish(start_import(tmp_path, home, idle_s=3))
    info = server_info(home)
    assert gone(info.pid, 30) and gone(info.supervisor, 10), "the server outlived its idle period"
    assert not ServerFiles(home).state.exists()
    # The next command starts a new one.
    finish(start_import(tmp_path, home, idle_s=3))
    assert starts(home) == 2


@pytest.mark.slow
def test_server_commands_show_and_stop_it(tmp_path: Path, home: Path) -> None:
    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        command = [JUDGELINE, "--work-dir", str(tmp_path / "work"), "server", *args]
        return subprocess.run(command, env=env_for(home), capture_output=True, text=True,
                              timeout=300)  # fmt: skip

    none = cli("status")
    assert none.returncode == 1 and "no local Prefect server runs" in none.stdout
    started = cli("start")
    assert started.returncode == 0 and "local Prefect server: pid" in started.stdout
    info = server_info(home)
    shown = cli("status")
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert f"pid {info.pid}" in shown.stdout and "idle" in shown.stdout
    # Where the UI is and how to log in: the auth string's file, never the secret itself.
    assert f"UI: {info.url}" in shown.stdout
    auth = ServerFiles(home).auth
    assert str(auth) in shown.stdout and auth.read_text().strip() not in shown.stdout

    # A command using the server: `stop` refuses, naming it, unless --force.
    holder = subprocess.Popen(
        [JUDGELINE, "--work-dir", str(tmp_path / "work"), "serve", str(_serve_config(tmp_path))],
        env=env_for(home), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not ServerFiles(home).active_clients():
            assert holder.poll() is None and time.monotonic() < deadline, holder.communicate()
            time.sleep(0.2)
        refused = cli("stop")
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert f"pid {holder.pid}" in refused.stderr and "--force" in refused.stderr
        assert "serve" in refused.stderr and not gone(info.pid, 0.5)
        in_use = cli("status")
        assert f"in use by pid {holder.pid}" in in_use.stdout, in_use.stdout
        stopped = cli("stop", "--force")
        assert stopped.returncode == 0 and f"pid {info.pid}" in stopped.stdout
        assert gone(info.pid, 20) and gone(info.supervisor, 20)
        assert not ServerFiles(home).state.exists()
        out, err = holder.communicate(timeout=60)
        assert holder.returncode == 75, out + err
        assert "was stopped by `judgeline server stop`" in err and "Traceback" not in err, err
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()


def _serve_config(tmp_path: Path) -> Path:
    config = tmp_path / "serve.yaml"
    judge = "{name: j, base_url: 'http://127.0.0.1:9/v1', model: m, api_key_env: NO_SUCH_KEY}"
    config.write_text(f"name: x\ndatasets: [{{kind: demo}}]\njudges: [{judge}]\n")
    return config


def test_a_refused_input_starts_no_server(tmp_path: Path, home: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"pair_id": 1}\n')
    config = tmp_path / "run.yaml"
    config.write_text("name: x\ndatasets: []\njudges: []\n")
    for args in (("import", "judgebench", str(bad)), ("run", str(config))):
        started = time.monotonic()
        command = [JUDGELINE, "--work-dir", str(tmp_path / "work"), *args]
        result = subprocess.run(command, env=env_for(home), capture_output=True, text=True)
        assert result.returncode == 2, (args, result.stdout, result.stderr)
        assert "Traceback" not in result.stderr
        assert time.monotonic() - started < 30
    assert not ServerFiles(home).state.exists() and starts(home) == 0
    assert not (home / "prefect.db").exists()


def test_state_file_names_pid_port_and_version(tmp_path: Path) -> None:
    files = ServerFiles(tmp_path)
    files.state.write_text("{not json")
    assert files.read() is None  # a damaged state file names no server
    state = {"pid": 1, "started": 5.0, "port": 2, "prefect_version": "x", "supervisor": 3,
             "supervisor_started": 6.0, "idle_seconds": 3.0, "started_at": 4.0}  # fmt: skip
    files.state.write_text(json.dumps(state))
    info = files.read()
    assert info is not None and info.api_url == "http://127.0.0.1:2/api"
    assert info.format == STATE_FORMAT
    # A state file of another layout (an older judgeline's) names no server.
    files.state.write_text(json.dumps({**state, "format": STATE_FORMAT - 1}))
    assert files.read() is None
    files.state.write_text(json.dumps({"pid": 1, "port": 2}))
    assert files.read() is None


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
    env = env_for(home)
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
    started = subprocess.run(command, env=env_for(home), capture_output=True, text=True)
    assert started.returncode == 0, started.stderr
    info = server_info(home)
    shutil.rmtree(home)
    assert gone(info.pid, 30) and gone(info.supervisor, 10), "the server outlived its home"
