"""Commands that do little answer quickly: freeze, plan, runs, show and refused inputs run
without a Prefect flow, so they start no Prefect server.

The CPU bound is measured in the same test, so it follows the machine: what starting a
Prefect server costs (`judgeline server start` in a work dir of its own: the server
process's CPU seconds once its API answers, Prefect's server code loaded and its database
made). A command that ran a flow on a server in its own process would pay that and more; a
command that started the shared detached server would leave its database, state file and
log behind, which the test looks for. The same start shows those files appear when a server
does start, so the checks can see one. CPU seconds, unlike wall time, a loaded machine
barely inflates; loading the data-quality gate (great-expectations) that freeze and plan
run costs about half a server start.
"""

from __future__ import annotations

import os
import resource
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import REPO

from flows.localserver import ServerFiles, stop_server

JUDGELINE = str(REPO / ".venv" / "bin" / "judgeline")
MAPPING = "question=q,answer_a=a,answer_b=b"


def _home(work: Path) -> Path:
    """The Prefect home of the commands `_judgeline` runs in `work`: the user's default,
    with the user's state folder beside the work dir."""
    return work.parent / f"{work.name}-state" / "judgeline" / "prefect"


def _judgeline(work: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`judgeline --work-dir WORK ARGS` with Prefect's home the user's default (`_home`)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.pop("JUDGELINE_WORK_DIR", None)
    env["XDG_STATE_HOME"] = str(_home(work).parent.parent)
    return subprocess.run(
        [JUDGELINE, "--work-dir", str(work), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def _timed(work: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    """`_judgeline(WORK, ARGS)` and the CPU seconds it and the processes it waited for used."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = _judgeline(work, *args)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return result, cpu


def _process_cpu(pid: int) -> float:
    """CPU seconds process `pid` used so far (its own and its waited-for children's)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(ticks) for ticks in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def _server_traces(home: Path) -> list[str]:
    """What a started server leaves in its Prefect home."""
    files = ServerFiles(home)
    return [p.name for p in (home / "prefect.db", files.state, files.log) if p.exists()]


def _server_start_cpu(work: Path) -> float:
    """CPU seconds a Prefect server of this work dir took to start and answer."""
    home = _home(work)
    try:
        started = _judgeline(work, "server", "start")
        assert started.returncode == 0, started.stdout + started.stderr
        info = ServerFiles(home).read()
        assert info is not None, "`server start` wrote no state file"
        cpu = _process_cpu(info.pid)
        assert _server_traces(home) == ["prefect.db", "judgeline-server.json",
                                        "judgeline-server.log"]  # fmt: skip
        return cpu
    finally:
        stop_server(home)


@pytest.fixture
def work_path(tmp_path: Path) -> Iterator[Path]:
    """A fresh work dir; a server its commands should not have started is stopped after."""
    path = tmp_path / "work"
    yield path
    stop_server(_home(path))


@pytest.mark.slow
def test_small_commands_start_no_prefect_server(tmp_path: Path, work_path: Path) -> None:
    bound = _server_start_cpu(tmp_path / "server-start")
    frozen, cpu = _timed(work_path, "freeze", "--demo")
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
        result, timings[name] = _timed(work_path, *args)
        assert result.returncode == code, (name, result.stdout, result.stderr)
        errors[name] = result.stderr
    assert "missing.csv: file not found" in errors["freeze of a missing table"]
    assert "no manifest 'deadbeef'" in errors["plan of no manifest"]
    assert not _server_traces(_home(work_path)), "a Prefect server was started"
    slow = {name: round(s, 1) for name, s in timings.items() if s >= bound}
    assert not slow, f"CPU seconds at or over a Prefect server's start ({bound:.1f} s): {slow}"


def test_a_command_runs_with_the_collectors_raised_thresholds() -> None:
    """flows.entry raises the cyclic collector's thresholds before anything is imported, and
    the command and what it imports keep them; a command's exit code is still its own."""
    code = (
        "import gc, sys, flows.cli\n"
        "def command():\n"
        "    import prefect\n"
        "    print(gc.get_threshold())\n"
        "    sys.exit(3)\n"
        "flows.cli.main = command\n"
        "from flows.entry import main\n"
        "main()\n"
    )
    done = subprocess.run([str(REPO / ".venv" / "bin" / "python"), "-c", code], cwd=REPO,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    from flows.entry import GC_THRESHOLDS

    assert done.returncode == 3, done.stderr
    assert done.stdout.strip() == str(GC_THRESHOLDS)
