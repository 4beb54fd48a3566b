"""The Dask sender on an object-store work dir whose link to the store is cut (moto behind a
relay that drops every connection), on a cluster started as the README starts one (`dask
scheduler`, `dask worker --nworkers 2`, each worker with a scratch dir of its own, as on
another machine): a 20 s outage is waited out within the patience, as in one process; one
past the patience stops the run (one line, exit 75), the workers handing back what they
received, and the resume pays for no call twice."""

from __future__ import annotations

import os
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from subprocess import Popen

import pytest
import yaml
from dask_processes import DaskProcesses, dask_processes
from support import NO_FAULTS, REPO

from simjudge.persona import Persona
from simjudge.server import SimJudgeServer
from tasks.runs.record import read_record
from tasks.store import SCRATCH_ENV
from tasks.store.leases import LEASE_ENV
from tasks.store.objects import PATIENCE_ENV
from tasks.store.workdir import WorkDir
from tests.store.conftest import S3Server
from tests.store.link import Link

pytestmark = pytest.mark.slow
JUDGELINE = str(REPO / ".venv" / "bin" / "judgeline")
PAIRS, K = 12, 2
CALLS = PAIRS * K * 2
PERSONA = Persona(name="steady", skill=0.8, left_bias=0.2, tie_rate=0.1, latency_ms=250)


def _config(tmp_path: Path, server: SimJudgeServer, dask: str) -> Path:
    table = tmp_path / "pairs.csv"
    table.write_text("q,a,b\n" + "".join(f"Question {i}?,yes {i},no {i}\n" for i in range(PAIRS)))
    judge = {"name": "j", "base_url": server.base_url, "model": "steady", "simulated": True,
             "max_concurrency": 4}  # fmt: skip
    config = {"name": "outage", "k": K, "judges": [judge], "batch_size": 12,
              "dask_address": dask,
              "datasets": [{"kind": "table", "path": str(table),
                            "mapping": "question=q,answer_a=a,answer_b=b"}]}  # fmt: skip
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _answered(server: SimJudgeServer) -> Counter[str]:
    """Replies the simulated judge sent, by call key: what was paid for."""
    log = server.request_log()
    return Counter(e["call_key"] for e in log if e.get("call_key") and e["status"] == 200)


@pytest.fixture
def cut_cluster(s3_server: S3Server, tmp_path: Path, request: pytest.FixtureRequest
                ) -> Iterator[tuple[Link, DaskProcesses, dict[str, str]]]:  # fmt: skip
    """A link to the store, and a cluster whose workers reach the store through it, with the
    patience and lease times the test sets (`request.param`); the environment a command
    needs to do the same."""
    link = Link(s3_server.endpoint)
    env = {"AWS_ENDPOINT_URL": link.endpoint, **request.param}
    workers = {**env, SCRATCH_ENV: str(tmp_path / "workers-scratch")}
    with dask_processes(tmp_path / "dask", env=workers) as cluster:
        yield link, cluster, env
    link.cut()


def _judgeline(url: str, tmp_path: Path, env: dict[str, str]) -> Callable[..., Popen[str]]:
    """`judgeline --work-dir URL ARGS` started with `env` (the store through the link)."""
    base = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "COLUMNS")}
    base.pop("JUDGELINE_WORK_DIR", None)
    base.update({SCRATCH_ENV: str(tmp_path / "scratch"), "JUDGELINE_WORKER": "0", **env})

    def judgeline(*args: str) -> Popen[str]:
        return Popen([JUDGELINE, "--work-dir", url, *args], env=base, text=True,
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip

    return judgeline


def _wait_for_replies(run: Popen[str], server: SimJudgeServer, count: int) -> None:
    deadline = time.monotonic() + 240
    while sum(_answered(server).values()) < count:
        assert run.poll() is None, run.communicate()
        assert time.monotonic() < deadline, "no judge calls within 240 s"
        time.sleep(0.02)


@pytest.mark.parametrize("cut_cluster", [{PATIENCE_ENV: "60"}], indirect=True)
def test_a_20_s_outage_under_dask_is_waited_out_and_the_run_completes(
    s3_server: S3Server, cut_cluster: tuple[Link, DaskProcesses, dict[str, str]],
    tmp_path: Path,
) -> None:  # fmt: skip
    link, cluster, env = cut_cluster
    url = f"s3://{s3_server.new_bucket()}/judgeline"
    judgeline = _judgeline(url, tmp_path, env)
    with SimJudgeServer([PERSONA]) as server:
        server.set_faults(**NO_FAULTS)
        run = judgeline("run", str(_config(tmp_path, server, cluster.address)), "--run-id", "w")
        _wait_for_replies(run, server, CALLS // 4)
        link.cut()
        time.sleep(20)
        link.restore()
        out, err = run.communicate(timeout=300)
        assert run.returncode == 0, out + err
        answered = _answered(server)
    assert len(answered) == CALLS and max(answered.values()) == 1, answered.most_common(3)
    record = read_record(WorkDir.at(url, scratch=tmp_path / "reader"), "w")
    assert record.status == "completed" and record.calls["stored"] == CALLS


@pytest.mark.parametrize("cut_cluster", [{PATIENCE_ENV: "2", LEASE_ENV: "3"}], indirect=True)
def test_an_outage_past_the_patience_stops_the_dask_run_and_nothing_paid_is_lost(
    s3_server: S3Server, cut_cluster: tuple[Link, DaskProcesses, dict[str, str]],
    tmp_path: Path,
) -> None:  # fmt: skip
    import re

    link, cluster, env = cut_cluster
    url = f"s3://{s3_server.new_bucket()}/judgeline"
    judgeline = _judgeline(url, tmp_path, env)
    with SimJudgeServer([PERSONA]) as server:
        server.set_faults(**NO_FAULTS)
        run = judgeline("run", str(_config(tmp_path, server, cluster.address)), "--run-id", "x")
        _wait_for_replies(run, server, CALLS // 4)
        link.cut()
        out, err = run.communicate(timeout=180)
        assert run.returncode == 75, out + err
        said = [ln for ln in err.strip().splitlines() if " ETA " not in ln]
        assert "Traceback" not in err and len(said) == 1, err  # besides the progress bar
        assert f"object store {url}" in err and "did not answer" in err, err
        assert f"resume with: judgeline --work-dir {url} rerun-failed x" in err, err
        kept = re.search(r"the (\d+) replies received are kept in this machine's journal", err)
        assert kept is not None, err
        paid = _answered(server)
        assert 0 < sum(paid.values()) < CALLS
        assert int(kept.group(1)) == sum(paid.values())  # every reply paid for is kept here

        link.restore()
        time.sleep(3.5)  # the stopped run's leases run out
        resumed = judgeline("rerun-failed", "x")
        out, err = resumed.communicate(timeout=300)
        assert resumed.returncode == 0, out + err
        answered = _answered(server)
    assert len(answered) == CALLS  # every call stored...
    assert max(answered.values()) == 1, answered.most_common(3)  # ...and none paid twice
    record = read_record(WorkDir.at(url, scratch=tmp_path / "reader"), "x")
    assert record.status == "completed"
