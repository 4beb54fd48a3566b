"""Commands that do little answer quickly: freeze, plan, runs, show and refused inputs run
without a Prefect flow, so they start no Prefect server.

Time is measured as the CPU seconds of the command and everything it started (a Prefect
server included), which a loaded machine does not inflate the way it inflates wall time.
"""

from __future__ import annotations

import os
import resource
import subprocess
from pathlib import Path

import pytest
from support import REPO

JUDGELINE = str(REPO / ".venv" / "bin" / "judgeline")
MAPPING = "question=q,answer_a=a,answer_b=b"
CPU_BOUND_S = 5.0
"""Generous: a Prefect flow run alone (its embedded server starting) costs more."""


def _timed(work: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    """`judgeline --work-dir WORK ARGS` with Prefect's home in the work dir (its default);
    returns the result and the CPU seconds it used."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.pop("JUDGELINE_WORK_DIR", None)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = subprocess.run(
        [JUDGELINE, "--work-dir", str(work), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return result, cpu


@pytest.mark.slow
def test_small_commands_start_no_prefect_server(tmp_path: Path) -> None:
    work = tmp_path / "work"
    frozen, cpu = _timed(work, "freeze", "--demo")
    assert frozen.returncode == 0, frozen.stderr
    manifest_hash = frozen.stdout.split()[1]
    timings = {"freeze --demo": cpu}
    commands = {
        "freeze --demo (again)": (0, ("freeze", "--demo")),
        "plan": (0, ("plan", manifest_hash[:12], "--k", "2")),
        "runs": (0, ("runs",)),
        "show of no run": (2, ("show", "nosuchrun")),
        "freeze of a missing table": (
            2,
            ("freeze", "--table", str(tmp_path / "missing.csv"), "--map", MAPPING),
        ),
        "plan of no manifest": (2, ("plan", "deadbeef")),
    }
    errors: dict[str, str] = {}
    for name, (code, args) in commands.items():
        result, timings[name] = _timed(work, *args)
        assert result.returncode == code, (name, result.stdout, result.stderr)
        errors[name] = result.stderr
    assert "missing.csv: file not found" in errors["freeze of a missing table"]
    assert "no manifest 'deadbeef'" in errors["plan of no manifest"]
    slow = {name: round(s, 1) for name, s in timings.items() if s > CPU_BOUND_S}
    assert not slow, f"CPU seconds over {CPU_BOUND_S}: {slow}"
    assert not (work / ".prefect" / "prefect.db").exists(), "a Prefect server was started"
