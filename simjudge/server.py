"""Running the simulated judge: a background-thread server, or a `serve-judge` subprocess.

The app itself (endpoints, personas, faults) lives in `simjudge.app`.
"""

from __future__ import annotations

import os
import queue
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import uvicorn

from simjudge.app import SimJudge
from simjudge.persona import PRESETS, Persona

__all__ = ["SimJudge", "SimJudgeServer", "bind_loopback", "make_server", "simjudge_subprocess"]

_REPO = Path(__file__).resolve().parents[2]


class _Server(uvicorn.Server):
    """uvicorn that also wakes stalled handlers when asked to exit (SIGINT/SIGTERM too)."""

    def __init__(self, config: uvicorn.Config, judge: SimJudge) -> None:
        super().__init__(config)
        self.judge = judge

    def handle_exit(self, sig: int, frame: Any) -> None:
        self.judge.closing = True
        super().handle_exit(sig, frame)


def bind_loopback(port: int = 0) -> socket.socket:
    """A listening-ready socket on 127.0.0.1 (port 0: a free port)."""
    # TCP named, so asyncio turns Nagle's algorithm off on every connection it accepts.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    return sock


def make_server(judge: SimJudge) -> uvicorn.Server:
    """A quiet uvicorn server for the judge (no access log; shutdown bounded)."""
    config = uvicorn.Config(
        judge.app,
        log_level="warning",
        access_log=False,
        lifespan="off",
        interface="asgi3",
        timeout_graceful_shutdown=2,
    )
    return _Server(config, judge)


class SimJudgeServer:
    """The simulated judge in a background thread on 127.0.0.1; a context manager.

    >>> with SimJudgeServer() as server:           # doctest: +SKIP
    ...     httpx.get(server.base_url + "/models")
    """

    def __init__(
        self,
        personas: Sequence[Persona] = PRESETS,
        *,
        manifest: pa.Table | None = None,
        api_key: str | None = None,
        port: int = 0,
        require_anthropic_version: bool = False,
        tokens_per_minute: float | None = None,
    ) -> None:
        self.judge = SimJudge(
            personas,
            manifest=manifest,
            api_key=api_key,
            require_anthropic_version=require_anthropic_version,
            tokens_per_minute=tokens_per_minute,
        )
        self._requested_port = port
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.port = 0
        self.base_url = ""

    def start(self) -> SimJudgeServer:
        sock = bind_loopback(self._requested_port)
        self.port = sock.getsockname()[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._server = make_server(self.judge)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, name="simjudge", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"simulated judge did not start on port {self.port}")
            time.sleep(0.005)
        return self

    def stop(self) -> None:
        if self._server is not None and self._thread is not None:
            self.judge.closing = True
            self._server.should_exit = True
            self._thread.join(timeout=10)
        self._server = self._thread = None

    def __enter__(self) -> SimJudgeServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def request_log(self) -> list[dict[str, Any]]:
        return self.judge.request_log()

    def clear_log(self) -> None:
        self.judge.clear_log()

    def set_faults(self, **rates: Any) -> None:
        """Change fault settings of every persona (pass `persona=` to change one)."""
        self.judge.set_faults(**rates)


PARENT_PID_ENV = "JUDGELINE_SIMJUDGE_PARENT"
"""Set by `simjudge_subprocess` to its own pid: the judge it starts exits with it."""


def die_with_parent() -> None:
    """In a judge started by `simjudge_subprocess`: get SIGTERM when that process dies
    (Linux), and exit at once if it already has."""
    parent = os.environ.get(PARENT_PID_ENV)
    if not parent or sys.platform != "linux":
        return
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    if os.getppid() != int(parent):
        raise SystemExit(0)


@contextmanager
def simjudge_subprocess(*args: str, startup_timeout: float = 60.0) -> Iterator[str]:
    """Run `judgeline serve-judge ARGS` in a subprocess; yield its base URL once healthy."""
    command = [sys.executable, "-c", "from flows.cli import main; main()", "serve-judge", *args]
    if "--port" not in args:
        command += ["--port", "0"]
    paths = [str(_REPO), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    env[PARENT_PID_ENV] = str(os.getpid())
    with tempfile.TemporaryFile("w+") as stderr:
        # A process group of its own: a terminal's Ctrl-C reaches the command using it, which
        # stops cleanly while the judge goes on answering the calls in flight; it exits with
        # that command (`die_with_parent`), however the command ends.
        proc = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=stderr, text=True, env=env, cwd=_REPO,
            process_group=0,
        )  # fmt: skip
        lines: queue.Queue[str] = queue.Queue()

        def pump() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.put(line)

        threading.Thread(target=pump, name="simjudge-stdout", daemon=True).start()
        try:
            base_url = _await_start(proc, lines, stderr, startup_timeout)
            yield base_url
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


def _await_start(
    proc: subprocess.Popen[str], lines: queue.Queue[str], stderr: Any, timeout: float
) -> str:
    deadline = time.monotonic() + timeout

    def failed(why: str) -> RuntimeError:
        stderr.seek(0)
        return RuntimeError(f"serve-judge {why}; stderr:\n{stderr.read()[-2000:]}")

    base_url = None
    while base_url is None:
        if time.monotonic() > deadline:
            raise failed(f"printed no URL within {timeout:.0f}s")
        try:
            line = lines.get(timeout=0.1)
        except queue.Empty:
            if proc.poll() is not None:
                raise failed(f"exited with status {proc.returncode}") from None
            continue
        if line.startswith("judge: "):
            base_url = line.split(" ", 1)[1].strip()
    health = base_url.rsplit("/v1", 1)[0] + "/_judgeline/health"
    while time.monotonic() < deadline:
        try:
            if httpx.get(health, timeout=1.0).status_code == 200:
                return base_url
        except httpx.TransportError:
            pass
        if proc.poll() is not None:
            raise failed(f"exited with status {proc.returncode}")
        time.sleep(0.05)
    raise failed("never became healthy")
