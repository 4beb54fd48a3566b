"""What the tests of the local Prefect server share: a command's environment for a Prefect
home of its own, the smallest job that runs a flow (a 3-pair import), and the server's state."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from support import REPO

from flows.localserver import ServerFiles, ServerInfo

JUDGELINE = str(REPO / ".venv" / "bin" / "judgeline")
SERVES = "judgeline: Prefect server pid"
"""What a supervisor writes to the home's log once its server answers."""


def env_for(home: Path, idle_s: float = 120, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PREFECT_API_URL", "PREFECT_API_AUTH_STRING")
    }
    env["PREFECT_HOME"] = str(home)
    env["JUDGELINE_SERVER_IDLE_SECONDS"] = str(idle_s)
    env.pop("JUDGELINE_WORK_DIR", None)
    env.update(extra)
    return env


def judgments(path: Path) -> Path:
    """A judgments table of 3 pairs judged once in each order (importing it is the smallest
    job that runs a flow)."""
    lines = ["pair_id,question,a,b,reply,order"]
    lines += [f"p{i},Question {i}?,yes {i},no {i},My final verdict is [[A>B]].,{order}"
              for i in range(3) for order in ("AB", "BA")]  # fmt: skip
    path.write_text("\n".join(lines) + "\n")
    return path


def import_command(tmp_path: Path, judgeline: str = JUDGELINE) -> list[str]:
    table = judgments(tmp_path / "judgments.csv")
    return [judgeline, "--work-dir", str(tmp_path / "work"), "import", "table", str(table),
            "--map", "pair_id=pair_id,question=question,answer_a=a,answer_b=b,reply=reply,"
            "order=order", "--judge", "j"]  # fmt: skip


def start_import(tmp_path: Path, home: Path, idle_s: float = 120) -> subprocess.Popen[str]:
    """`judgeline import` of a small judgments table: a job that runs a flow."""
    return subprocess.Popen(
        import_command(tmp_path), env=env_for(home, idle_s), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def finish(proc: subprocess.Popen[str]) -> str:
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, out + err
    assert "report: " in out, out
    return out + err


def server_info(home: Path) -> ServerInfo:
    info = ServerFiles(home).read()
    assert info is not None, "no server state file"
    return info


def starts(home: Path) -> int:
    """How many servers started for this home (each supervisor says so once in the log)."""
    log = ServerFiles(home).log
    return log.read_text().count(SERVES) if log.exists() else 0


def gone(pid: int, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.2)
    return False
