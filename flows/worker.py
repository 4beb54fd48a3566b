"""The warm worker: a process that has imported what the flow commands need (Prefect, the
flows, pandas, pyarrow, DuckDB, httpx) and forks itself for each command handed to it
(`flows.handoff` is the command's side).

A command that runs a flow spends about two seconds importing before its first flow run; a
fork of a process that already holds those modules starts at once. Each command still runs
in a process of its own, so nothing of one job leaks into the next:

- the job's process takes the command's standard streams, working directory, environment
  and argv, then runs the command line as the console script does. The command line's own
  modules (`flows.cli`) are imported afresh in it, so its consoles see the command's
  terminal; Prefect's settings and logging are read again from the command's environment
  once the job has set its Prefect home (`flows.runtime.refresh_prefect`);
- the job leads a process group of its own; if the command's connection closes before the
  job ends (the command was killed), the worker kills that group;
- the worker reaps the job and sends the command its exit code or the signal that killed it.

The worker declines a command, and leaves once its jobs are done, if a module it imported
has changed on disk or a package was installed since (the command then runs the job itself
and starts a new worker). It stops after JUDGELINE_WORKER_IDLE_SECONDS with no command, on
SIGTERM, or when asked (`flows.handoff.stop_worker`), always after its running jobs end.
It never starts a thread, so forking it is safe; it refuses to serve if an import started
one.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import io
import logging
import os
import resource
import selectors
import signal
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any, NoReturn

from flows import runtime
from flows.handoff import IDLE_ENV, IDLE_SECONDS, recv_message, same_user, send_message

PRELOAD = (
    "flows.cli", "flows.nightly", "flows.imports", "flows.remap", "flows.judge",
    "prefect.flow_engine", "prefect.task_engine", "prefect.client.orchestration",
    "prefect.artifacts", "prefect.utilities.visualization", "fastapi.encoders",
    "duckdb", "pyarrow.parquet", "pyarrow.dataset", "pyarrow.pandas_compat", "pandas",
    "jinja2.ext", "tasks.report", "tasks.report.artifacts", "tasks.replay.advisor",
    "tasks.judging.spend", "encodings.idna", "http.cookies", "rich._emoji_codes",
)  # fmt: skip
"""What a job would otherwise import on its way (a run's modules, found by listing what a
warm run imported in the job's process)."""
_PROJECT = Path(__file__).resolve().parents[1]


def _code_stamp() -> dict[str, int]:
    """The modification times of this project's imported modules and of the folders
    packages are installed in: any change means the worker's modules are not the ones on
    disk."""
    stamp = {}
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if path and path.startswith(str(_PROJECT)):
            with contextlib.suppress(OSError):
                stamp[path] = os.stat(path).st_mtime_ns
    for entry in sys.path:
        if entry.endswith("-packages"):
            with contextlib.suppress(OSError):
                stamp[entry] = os.stat(entry).st_mtime_ns
    return stamp


def _can_limit(limits: dict[str, list[int]]) -> bool:
    """Whether a job can take these resource limits: none above the worker's hard ones,
    which a process cannot raise."""
    for name, (_soft, hard) in limits.items():
        ours = resource.getrlimit(getattr(resource, name))[1]
        if ours != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or hard > ours):
            return False
    return True


def _exit_code(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _run_job(request: dict[str, Any], fds: list[int]) -> NoReturn:
    """In the forked process: become the command, run it, leave with its exit code."""
    code = 1
    try:
        runtime.forked = True
        os.setpgid(0, 0)
        signal.set_wakeup_fd(-1)
        for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGCHLD):
            signal.signal(signum, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        for target in request.get("closed", []):
            os.close(target)  # closed in the command too
        os.chdir(request["cwd"])
        os.umask(request["umask"])
        for name, limit in request["limits"].items():
            resource.setrlimit(getattr(resource, name), tuple(limit))
        os.environ.clear()
        os.environ.update(request["env"])
        sys.argv = list(request["argv"])
        # The program is the command's, not `python -m flows.worker` (click names it from
        # `__main__`'s package in usage lines).
        main_module = sys.modules["__main__"]
        main_module.__package__, main_module.__spec__ = None, None
        # New text streams over the command's descriptors, encoded and buffered as the
        # command's were (the worker's own were made for its log file).
        closed = request.get("closed", [])
        streams: list[Any] = [
            None  # as Python leaves a stream whose descriptor is closed
            if fd in closed
            else io.TextIOWrapper(open(fd, mode, closefd=False), **spec)  # noqa: SIM115
            for fd, mode, spec in zip((0, 1, 2), ("rb", "wb", "wb"), request["stdio"], strict=True)
        ]
        sys.stdin, sys.stdout, sys.stderr = streams
        sys.__stdin__, sys.__stdout__, sys.__stderr__ = streams  # type: ignore[misc]
        for name in [m for m in sys.modules if m == "flows.cli" or m.startswith("flows.cli.")]:
            del sys.modules[name]
        from flows.cli import main

        main()
        code = 0
    except SystemExit as exc:
        code = _exit_code(exc.code)
    except BaseException:
        sys.excepthook(*sys.exc_info())
    finally:
        # What the interpreter does at exit, without tearing the modules down.
        for step in (
            threading._shutdown,  # type: ignore[attr-defined]
            atexit._run_exitfuncs,
            logging.shutdown,
            lambda: sys.stdout.flush(),
            lambda: sys.stderr.flush(),
        ):
            with contextlib.suppress(BaseException):
                step()
        os._exit(code)


class Worker:
    """The serving loop: accept commands, fork a job for each, report how each ended."""

    def __init__(self, listener: socket.socket, idle_s: float) -> None:
        self.listener = listener
        self.idle_s = idle_s
        self.stamp = _code_stamp()
        self.jobs: dict[int, socket.socket | None] = {}
        self.started_at = time.time()
        self.taken = 0
        self.accepting = True
        self.last_used = time.monotonic()
        self.selector = selectors.DefaultSelector()
        self.wake_r, self.wake_w = socket.socketpair()
        for sock in (self.wake_r, self.wake_w):
            sock.setblocking(False)
        signal.set_wakeup_fd(self.wake_w.fileno())
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.signal(signal.SIGTERM, lambda *_: self._stop_accepting())
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        self.selector.register(listener, selectors.EVENT_READ, "listener")
        self.selector.register(self.wake_r, selectors.EVENT_READ, "wake")

    def _stop_accepting(self) -> None:
        if self.accepting:
            self.accepting = False
            self.selector.unregister(self.listener)
            self.listener.close()  # the name is free for a new worker at once

    def serve(self) -> None:
        while self.accepting or self.jobs:
            for key, _ in self.selector.select(timeout=1.0):
                if key.data == "listener":
                    self._take()
                elif key.data == "wake":
                    with contextlib.suppress(BlockingIOError):
                        self.wake_r.recv(4096)
                else:
                    self._command_closed(key.data, key.fileobj)  # type: ignore[arg-type]
            self._reap()
            idle = time.monotonic() - self.last_used > self.idle_s
            if self.accepting and not self.jobs and idle:
                self._stop_accepting()

    def _take(self) -> None:
        try:
            conn, _ = self.listener.accept()
        except OSError:
            return
        try:
            conn.settimeout(10)
            if not same_user(conn):
                conn.close()
                return
            request, fds = recv_message(conn, max_fds=3)
        except (OSError, EOFError, ValueError):
            conn.close()
            return
        self.last_used = time.monotonic()
        if "ask" in request:
            with contextlib.suppress(OSError):
                send_message(conn, {"pid": os.getpid(), "started_at": self.started_at,
                                    "taken": self.taken, "running": len(self.jobs)})  # fmt: skip
            conn.close()
            if request["ask"] == "stop":
                self._stop_accepting()
            return
        stale = _code_stamp() != self.stamp
        if len(fds) != 3 or stale or not _can_limit(request.get("limits", {})):
            reason = "stale" if stale else "not this command"
            print(f"worker {os.getpid()}: declined a command ({reason})", flush=True)
            with contextlib.suppress(OSError):
                send_message(conn, {"declined": reason})
            for fd in fds:
                os.close(fd)
            conn.close()
            if stale:
                self._stop_accepting()  # a new worker, with the code on disk, takes over
            return
        self._fork(conn, request, fds)

    def _fork(self, conn: socket.socket, request: dict[str, Any], fds: list[int]) -> None:
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        pid = os.fork()
        if pid == 0:
            for sock in (self.listener, self.wake_r, self.wake_w, conn):
                sock.close()
            for other in self.jobs.values():
                if other is not None:
                    other.close()
            self.selector.close()
            _run_job(request, fds)
        # The job leads a process group of its own before its command learns its pid (the
        # job makes it too; whichever runs first), so a signal forwarded at once finds it.
        with contextlib.suppress(OSError):
            os.setpgid(pid, pid)
        for fd in fds:
            os.close(fd)
        conn.settimeout(None)
        try:
            send_message(conn, {"pid": pid})
        except OSError:
            self._kill(pid)
        self.jobs[pid] = conn
        self.taken += 1
        self.selector.register(conn, selectors.EVENT_READ, pid)

    def _kill(self, pid: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)

    def _command_closed(self, pid: int, conn: socket.socket) -> None:
        """The command's connection is readable: it closed (the command died)."""
        with contextlib.suppress(OSError):
            if conn.recv(1):
                return
        self.selector.unregister(conn)
        conn.close()
        if self.jobs.get(pid) is conn:
            self.jobs[pid] = None
            self._kill(pid)

    def _reap(self) -> None:
        while self.jobs:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = self.jobs.pop(pid, None)
            if conn is None:
                continue
            if os.WIFSIGNALED(status):
                outcome = {"signal": os.WTERMSIG(status)}
            else:
                outcome = {"exit": os.waitstatus_to_exitcode(status)}
            with contextlib.suppress(OSError):
                send_message(conn, outcome)
            self.selector.unregister(conn)
            conn.close()


def main(name_hex: str) -> None:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(bytes.fromhex(name_hex))
    except OSError:
        return  # another worker has this name (or is starting under it)
    started = time.monotonic()
    for module in PRELOAD:
        importlib.import_module(module)
    import certifi

    runtime.share_tls_contexts()
    tls_user = sys.modules["prefect.client.orchestration"]
    tls_user.ssl.create_default_context(cafile=certifi.where())  # the jobs' copy of it
    if threading.active_count() != 1:
        print(f"worker {os.getpid()}: an import started a thread; not serving", flush=True)
        return
    try:
        idle_s = float(os.environ.get(IDLE_ENV) or IDLE_SECONDS)
    except ValueError:
        idle_s = IDLE_SECONDS
    listener.listen(16)
    print(
        f"worker {os.getpid()} ({bytes.fromhex(name_hex)[1:].decode()}): ready in "
        f"{time.monotonic() - started:.1f} s",
        flush=True,
    )
    Worker(listener, idle_s).serve()


if __name__ == "__main__":
    main(sys.argv[1])
