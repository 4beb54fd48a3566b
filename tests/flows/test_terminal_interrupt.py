"""Ctrl-C typed in a terminal during `judgeline demo`: a real pseudo-terminal, whose line
discipline signals the whole foreground process group: the command, which runs the job
and its simulated judge itself.

The demo stops within seconds, exits 130, and prints at most three lines after the ^C (the
echo, the stop notice, the line saying what was kept and what resumes it), no traceback.
"""

from __future__ import annotations

import os
import pty
import re
import select
import time
from pathlib import Path

import pytest
from support import REPO

from tasks.runs.record import read_record
from tasks.store.workdir import WorkDir

JUDGELINE = str(REPO / ".venv" / "bin" / "judgeline")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


class Terminal:
    """A command on the slave side of a pseudo-terminal; what it wrote, as read so far."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: the command, as a terminal's foreground job
            os.execve(argv[0], argv, env)
        self.output = b""

    def read(self, seconds: float) -> bool:
        """Read for up to `seconds`; False once the command closed the terminal."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            ready, _, _ = select.select([self.fd], [], [], 0.1)
            if not ready:
                continue
            try:
                data = os.read(self.fd, 65536)
            except OSError:
                return False
            if not data:
                return False
            self.output += data
        return True

    def wait(self) -> int:
        _, status = os.waitpid(self.pid, 0)
        os.close(self.fd)
        return os.waitstatus_to_exitcode(status)


def _lines(raw: bytes) -> list[str]:
    """What a reader sees: escape codes gone, the progress bar (redrawn in place) left out."""
    text = ANSI.sub("", raw.decode(errors="replace")).replace("\r", "\n")
    return [line for line in text.split("\n") if line.strip() and "judge calls" not in line]


@pytest.mark.slow
def test_ctrl_c_on_demo_stops_in_seconds_with_one_line(tmp_path: Path) -> None:
    work = WorkDir(tmp_path / "work")
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env.update(COLUMNS="120", TERM="xterm")
    argv = [JUDGELINE, "--work-dir", str(work.root), "demo", "--latency-ms", "200"]
    term = Terminal(argv, env)
    deadline = time.monotonic() + 300
    while b"judge calls" not in term.output:
        assert term.read(0.5), term.output.decode(errors="replace")[-2000:]
        assert time.monotonic() < deadline, "the judge stage did not start within 300 s"
    term.read(2.0)
    typed = len(term.output)
    os.write(term.fd, b"\x03")  # Ctrl-C: SIGINT to the foreground process group
    pressed = time.monotonic()
    while term.read(0.5):
        assert time.monotonic() - pressed < 60, "still running 60 s after Ctrl-C"
    code = term.wait()
    took = time.monotonic() - pressed
    after = _lines(term.output[typed:])
    shown = "\n".join(after)
    assert code == 130, shown
    assert took < 20, (took, shown)
    assert "Traceback" not in shown and "Error" not in shown, shown
    assert len(after) <= 3, shown
    last = after[-1]
    assert "interrupted by SIGINT" in last and "resume with: judgeline" in last, shown
    run_id = last.split("run ")[1].split()[0]
    assert read_record(work, run_id).status == "interrupted"
