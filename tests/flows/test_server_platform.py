"""The local Prefect server on the machines it meets: without Linux's /proc (as on macOS and
the BSDs, where psutil works and /proc does not exist) a command refuses at once; a second
local user runs a flow from an installation another user made; `serve` works beside another
user's `runner_storage`; a Prefect database planted in a shared cache is never used; two
installations of judgeline share one server; a server of another Prefect version is replaced
only while no command uses it."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from server_support import (
    JUDGELINE,
    env_for,
    finish,
    import_command,
    judgments,
    server_info,
    start_import,
    starts,
)
from support import REPO

from flows.localserver import ServerFiles, stop_server

pytestmark = pytest.mark.slow
ROOT = os.getuid() == 0
SITE = Path(sys.prefix) / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}"


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "home"
    yield path
    stop_server(path)


def test_without_proc_a_flow_command_refuses_at_once_naming_prefect_api_url(
    tmp_path: Path, home: Path
) -> None:
    """An empty /proc in a mount namespace of the command's own: psutil cannot tell which
    process listens where, so no auth string may be sent; the command says so in one
    paragraph, well before any server start would have ended, and starts none."""
    if not ROOT or shutil.which("unshare") is None:
        pytest.skip("hiding /proc needs root and unshare")
    command = " ".join(f"'{part}'" for part in import_command(tmp_path))
    began = time.monotonic()
    done = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c",
         f"mount -t tmpfs none /proc && exec {command}"],
        env=env_for(home), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    took = time.monotonic() - began
    if "mount:" in done.stderr or "unshare:" in done.stderr:
        pytest.skip(f"cannot hide /proc here: {done.stderr.strip()}")
    assert done.returncode == 78, done.stdout + done.stderr
    assert took < 30, took
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert "cannot check that on this system" in done.stderr
    assert "PREFECT_API_URL" in done.stderr
    assert starts(home) == 0 and not (home / "prefect.db").exists()


PACKAGES = ("flows", "tasks", "schemas")
BASE = Path(sys.base_prefix)
LIBRARY = f"python{sys.version_info.major}.{sys.version_info.minor}"


def _shared_installation(at: Path) -> tuple[Path, dict[str, str]]:
    """An installation of judgeline another user can run, made by this user (the installer)
    with its default modes: this interpreter and its standard library copied where every
    user can read them (this one may lie under a home only its owner enters), and a venv of
    it whose site-packages are this venv's. Its python and the environment it needs."""
    python = at / "python"
    (python / "bin").mkdir(parents=True)
    (python / "lib").mkdir()
    shutil.copy2(BASE / "bin" / LIBRARY, python / "bin" / LIBRARY)
    for shared in (BASE / "lib").glob(f"lib{LIBRARY}.so*"):
        shutil.copy2(shared, python / "lib" / shared.name)
    shutil.copytree(BASE / "lib" / LIBRARY, python / "lib" / LIBRARY, symlinks=True,
                    ignore=shutil.ignore_patterns("site-packages", "test", "idlelib"))  # fmt: skip
    env = {"LD_LIBRARY_PATH": str(python / "lib")}
    subprocess.run([str(python / "bin" / LIBRARY), "-m", "venv", "--without-pip", str(at / "venv")],
                   check=True, env={**os.environ, **env})  # fmt: skip
    site = at / "venv" / "lib" / LIBRARY / "site-packages"
    (site / "judgeline-shared.pth").write_text(
        f"import site; site.addsitedir({str(SITE / 'site-packages')!r})\n"
    )
    for path in [at, *at.rglob("*")]:
        if not path.is_symlink():  # a link's mode is its target's
            path.chmod(path.stat().st_mode | (0o055 if path.is_dir() else 0o044))
    return at / "venv" / "bin" / "python", env


def _as_uid(uid: int) -> object:
    def drop() -> None:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)

    return drop


def test_a_second_user_runs_a_flow_from_an_installation_another_user_made(
    tmp_path: Path,
) -> None:
    """The installer runs a flow from a shared installation (its server writes nothing into
    it), then another local user runs one from the same installation, with a home of theirs."""
    if not ROOT:
        pytest.skip("a second user needs root")
    began = time.time() - 1
    shared = Path(tempfile.mkdtemp(prefix="judgeline-shared-"))
    other = Path(tempfile.mkdtemp(prefix="judgeline-other-"))
    try:
        shared.chmod(0o755)
        python, library = _shared_installation(shared)
        entry = [str(python), "-c", "from flows.entry import main; main()"]
        mine = subprocess.run([*entry, *import_command(tmp_path)[1:]], env=env_for(
            tmp_path / "home", **library), capture_output=True, text=True, timeout=300)  # fmt: skip
        assert mine.returncode == 0, mine.stdout + mine.stderr
        # The installer's server wrote nothing only it can read into the installation.
        installed = [shared, SITE / "site-packages" / "prefect", *(REPO / p for p in PACKAGES)]
        unreadable = [p for root in installed for p in root.rglob("*") if not p.is_symlink()
                      and p.stat().st_mtime >= began and not p.stat().st_mode & 0o004]  # fmt: skip
        assert not unreadable, unreadable[:5]

        os.chown(other, 65534, 65534)
        env = {"PATH": "/usr/bin:/bin", "HOME": str(other), "LANG": "C.UTF-8",
               "XDG_STATE_HOME": str(other / "state"), "XDG_CACHE_HOME": str(other / "cache"),
               "JUDGELINE_SERVER_IDLE_SECONDS": "30", **library}  # fmt: skip
        table = judgments(other / "judgments.csv")
        os.chown(table, 65534, 65534)
        command = [*entry, *import_command(other)[1:]]
        command[command.index(str(other / "judgments.csv"))] = str(table)
        theirs = subprocess.run(command, env=env, cwd=str(other), capture_output=True,
                                text=True, timeout=300, preexec_fn=_as_uid(65534))  # fmt: skip
        assert theirs.returncode == 0, theirs.stdout + theirs.stderr
        assert "report: " in theirs.stdout
        theirs_state = other / "state" / "judgeline" / "prefect" / "judgeline-server.json"
        assert json.loads(theirs_state.read_text())["pid"] != server_info(tmp_path / "home").pid
    finally:
        stop_server(tmp_path / "home")
        _stop(other / "state" / "judgeline" / "prefect")
        shutil.rmtree(shared, ignore_errors=True)
        shutil.rmtree(other, ignore_errors=True)


def _stop(home: Path) -> None:
    """Stop another user's server (root reads their state file; `stop_server` would refuse a
    file that is not its own)."""
    import signal

    try:
        info = json.loads((home / "judgeline-server.json").read_text())
    except (OSError, ValueError):
        return
    for pid in (info["supervisor"], info["pid"]):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)


def test_serve_keeps_serving_beside_another_users_runner_storage(
    tmp_path: Path, home: Path
) -> None:
    """Prefect's runner keeps flow code under the temporary folder's `runner_storage`; one
    another user made in a shared temporary folder is neither used nor in the way."""
    if not ROOT:
        pytest.skip("another user's folder needs root")
    shared_tmp = Path(tempfile.mkdtemp(prefix="judgeline-tmp-"))
    try:
        shared_tmp.chmod(0o1777)
        (shared_tmp / "runner_storage").mkdir(mode=0o755)
        os.chown(shared_tmp / "runner_storage", 65534, 65534)
        config = tmp_path / "serve.yaml"
        judge = "{name: j, base_url: 'http://127.0.0.1:9/v1', model: m, api_key_env: NO_KEY}"
        config.write_text(f"name: x\ndatasets: [{{kind: demo}}]\njudges: [{judge}]\n")
        proc = subprocess.Popen(
            [JUDGELINE, "--work-dir", str(tmp_path / "work"), "serve", str(config)],
            env=env_for(home, TMPDIR=str(shared_tmp)), stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 120
            while not list((home / "tmp").glob("runner_storage/*")):
                assert proc.poll() is None, proc.communicate()
                assert time.monotonic() < deadline, "serve made no runner storage"
                time.sleep(0.2)
            time.sleep(3)
            assert proc.poll() is None, proc.communicate()
            assert list((shared_tmp / "runner_storage").iterdir()) == []
        finally:
            proc.terminate()
            out, err = proc.communicate(timeout=60)
        assert "Permission denied" not in err and "Traceback" not in err, err
    finally:
        shutil.rmtree(shared_tmp, ignore_errors=True)


def test_a_prefect_database_planted_in_a_shared_cache_is_never_used(
    tmp_path: Path, home: Path
) -> None:
    """Another user who can write the cache folder leaves a Prefect database there with a
    variable of theirs; a new home's server makes its own database."""
    import sqlite3
    from importlib import metadata

    cache = tmp_path / "cache"
    (cache / "judgeline").mkdir(parents=True)
    cache.chmod(0o777)
    planted = cache / "judgeline" / f"prefect-{metadata.version('prefect')}-empty.db"
    with sqlite3.connect(planted) as db:
        db.execute("create table variable (name text, value text)")
        db.execute("insert into variable values ('planted', 'theirs')")
    proc = subprocess.Popen(import_command(tmp_path), env=env_for(home, XDG_CACHE_HOME=str(cache)),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    finish(proc)
    info, auth = server_info(home), ServerFiles(home).auth_string()
    assert auth is not None
    import base64

    request = urllib.request.Request(
        f"{info.api_url}/variables/filter", data=b"{}", method="POST",
        headers={"content-type": "application/json",
                 "authorization": "Basic " + base64.b64encode(auth.encode()).decode()},
    )  # fmt: skip
    with urllib.request.urlopen(request, timeout=30) as reply:
        names = [v["name"] for v in json.loads(reply.read())]
    assert "planted" not in names


def _installation_b(at: Path) -> list[str]:
    """A second installation's entry point: a copy of judgeline's code, run by this venv."""
    for package in ("flows", "tasks", "schemas"):
        shutil.copytree(REPO / package, at / package, ignore=shutil.ignore_patterns("__pycache__"))
    return [sys.executable, "-c", "from flows.entry import main; main()"]


def test_two_installations_alternate_commands_with_one_server(tmp_path: Path, home: Path) -> None:
    b = _installation_b(tmp_path / "b")
    for turn in range(4):
        command = import_command(tmp_path)
        if turn % 2:
            command = [*b, *command[1:]]
        env = env_for(home, PYTHONPATH=str(tmp_path / "b")) if turn % 2 else env_for(home)
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "report: " in done.stdout
    assert starts(home) == 1


def test_a_server_of_another_prefect_version_is_replaced_only_while_unused(
    tmp_path: Path, home: Path
) -> None:
    finish(start_import(tmp_path, home))
    files = ServerFiles(home)
    state = json.loads(files.state.read_text())
    files.state.write_text(json.dumps({**state, "prefect_version": "0.0.1"}))
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from pathlib import Path; "
         "from tasks.store.private import register; "
         f"register(Path({str(home)!r}) / 'clients'); print('held', flush=True); "
         "time.sleep(120)"],
        stdout=subprocess.PIPE, text=True, cwd=REPO,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        refused = subprocess.run(import_command(tmp_path), env=env_for(home), text=True,
                                 capture_output=True, timeout=300)  # fmt: skip
        assert refused.returncode == 75, refused.stdout + refused.stderr
        assert "runs Prefect 0.0.1" in refused.stderr and f"pid {holder.pid}" in refused.stderr
        assert starts(home) == 1
    finally:
        holder.kill()
        holder.wait()
    finish(start_import(tmp_path, home))
    assert starts(home) == 2 and server_info(home).pid != state["pid"]
