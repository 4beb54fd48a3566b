"""A disk that fills up after the judge stage, in remap or in the report, with each sender
(in this process, provider batches, Dask): `judgeline run` stops with one line naming the
file system and the command that resumes, exit 75 (never 2, which is bad input) and no
traceback; the run is listed `interrupted`, and its resume pays for no call again."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from dask_processes import DaskProcesses, dask_processes
from support import NO_FAULTS

from simjudge.server import SimJudgeServer
from tasks.store.workdir import WorkDir
from tests.flows.test_hostile_input import run_main
from tests.judging.small_disk import Tmpfs, tmpfs

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("prefect_harness")]
PAIRS, K = 4, 2
CALLS = PAIRS * K * 2


@pytest.fixture(scope="module")
def server() -> Iterator[SimJudgeServer]:
    with SimJudgeServer() as srv:
        srv.set_faults(**NO_FAULTS, max_faults_per_request=None)
        yield srv


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaskProcesses]:
    with dask_processes(tmp_path_factory.mktemp("dask")) as procs:
        yield procs


def _config(folder: Path, server: SimJudgeServer, sender: str, dask: str | None) -> Path:
    table = folder / "pairs.csv"
    table.write_text("q,a,b\n" + "".join(f"Question {i}?,yes {i},no {i}\n" for i in range(PAIRS)))
    judge = {"name": "j", "base_url": server.base_url, "model": "strong", "simulated": True,
             "batch": sender == "batch"}  # fmt: skip
    config: dict[str, Any] = {
        "name": "full", "k": K, "judges": [judge],
        "datasets": [{"kind": "table", "path": str(table),
                      "mapping": "question=q,answer_a=a,answer_b=b"}],
    }  # fmt: skip
    if sender == "dask":
        config["dask_address"] = dask
    path = folder / "run.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _paid(server: SimJudgeServer) -> Counter[str]:
    log = server.request_log()
    return Counter(e["call_key"] for e in log if e.get("call_key") and e["status"] == 200)


def _filling(disk: Tmpfs, stage: Callable[..., Any]) -> Callable[..., Any]:
    """`stage`, run once the disk is full (the first time only)."""
    filled: list[bool] = []

    def full_first(*args: Any, **kwargs: Any) -> Any:
        if not filled:
            filled.append(True)
            disk.leave(0)
        return stage(*args, **kwargs)

    return full_first


@pytest.mark.parametrize("stage", ["remap_stage", "report_task"])
@pytest.mark.parametrize("sender", ["direct", "batch", "dask"])
def test_a_disk_full_after_judging_stops_the_run_and_the_resume_pays_nothing(
    sender: str,
    stage: str,
    server: SimJudgeServer,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    import flows.nightly as nightly
    from tasks.runs.jobs import scan_records

    dask = request.getfixturevalue("cluster").address if sender == "dask" else None
    config = _config(tmp_path, server, sender, dask)
    server.clear_log()
    with tmpfs() as disk:
        work = WorkDir(disk.root / "work")
        monkeypatch.setattr(nightly, stage, _filling(disk, getattr(nightly, stage)))
        stopped = run_main(monkeypatch, "--work-dir", str(work.root), "run", str(config),
                           "--run-id", "F")  # fmt: skip
        printed = capfd.readouterr()
        assert stopped.code == 75, (stopped.out, stopped.err)
        said = [
            ln for ln in stopped.err.strip().splitlines() if " ETA " not in ln
        ]  # the progress bar
        assert len(said) == 1, stopped.err  # besides the progress bar
        (line,) = said
        where = f"the file system mounted at {disk.root} (tmpfs)"
        assert line.startswith(f"run F stopped: no space left on {where}"), line
        assert f"every reply is kept ({CALLS} of {CALLS} planned calls stored)" in line, line
        assert line.endswith(f"resume with: judgeline --work-dir {work.root} rerun-failed F"), line
        assert "Traceback" not in stopped.out + stopped.err + printed.out + printed.err
        paid = _paid(server)
        assert len(paid) == CALLS and max(paid.values()) == 1
        disk.free()
        assert [(e.run_id, e.status) for e in scan_records(work)] == [("F", "interrupted")]

        resumed = run_main(monkeypatch, "--work-dir", str(work.root), "rerun-failed", "F",
                           "--no-progress")  # fmt: skip
        assert resumed.code == 0, (resumed.out, resumed.err)
        text = " ".join(resumed.out.split())
        assert re.search(rf"sent 0 \({CALLS} by this run in all\)", text), text
        assert f"stored {CALLS}, failed 0" in text, text
        assert _paid(server) == paid  # nothing sent again
        assert [(e.run_id, e.status) for e in scan_records(work)] == [("F", "completed")]
