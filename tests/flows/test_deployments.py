"""The deployments round trip on a real `prefect server start` on a free loopback port."""

from __future__ import annotations

import datetime as dt
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pyarrow.parquet as pq
import pytest
from support import CountingListener

from schemas import OutcomeRow, rows_to_table
from schemas.run import RunRecord
from simjudge.demo import demo_config
from tasks.runs.record import code_version, write_record
from tasks.storage import write_parquet_atomic
from tasks.store.workdir import WorkDir

BIN = Path(sys.executable).parent
pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _stop(proc: subprocess.Popen[bytes]) -> None:
    # A served process may need a second SIGTERM to leave its runner loop.
    for _ in range(2):
        if proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            continue
    proc.kill()
    proc.wait()


@pytest.fixture(scope="module")
def prefect_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real Prefect server on 127.0.0.1; stopped (SIGTERM) when the module is done."""
    home = tmp_path_factory.mktemp("prefect-server")
    port = _free_port()
    env = {**os.environ, "PREFECT_HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    env.pop("PREFECT_API_URL", None)
    log = open(home / "server.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    api = f"http://127.0.0.1:{port}/api"
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                if httpx.get(f"{api}/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                log.flush()
                pytest.fail(f"prefect server did not start:\n{(home / 'server.log').read_text()}")
            time.sleep(0.5)
        yield api
    finally:
        _stop(proc)
        log.close()


def _synthetic_run(work: WorkDir, config_path: Path) -> str:
    """A run whose outcomes are stored: enough for replay-policies, which calls no judge."""
    run_id = "20260101T000000Z-abcdef"
    rows = []
    for p in range(6):
        for seed in range(4):
            for order in ("AB", "BA"):
                outcome = "A" if (p + seed) % 3 else ("B" if order == "AB" else "T")
                rows.append(
                    OutcomeRow(
                        judge="strong",
                        config="low",
                        dataset="demo",
                        pair_id=f"p{p}",
                        seed=seed,
                        order=order,  # type: ignore[arg-type]
                        outcome=outcome,  # type: ignore[arg-type]
                        key="A" if p % 2 else "B",
                        presentation_id=f"{p}-{seed}-{order}",
                        call_key=f"k{p}{seed}{order}",
                        label="Left",
                    )
                )
    run_dir = work.run_dir(run_id)
    write_parquet_atomic(rows_to_table(rows, OutcomeRow), run_dir / "outcomes.parquet")
    config = demo_config("http://127.0.0.1:9/v1")
    write_record(
        work,
        RunRecord(
            run_id=run_id,
            name="synthetic",
            status="completed",
            config_hash="0" * 64,
            config=config.model_dump(mode="json"),
            code=code_version(),
            started_at=dt.datetime.now(dt.UTC),
        ),
    )
    return run_id


def _create_run(client: httpx.Client, deployment: dict[str, Any], params: dict[str, Any]) -> str:
    deadline = time.monotonic() + 180
    while True:
        # A busy server answers 503 Service Unavailable now and then: ask again.
        made = client.post(
            f"/deployments/{deployment['id']}/create_flow_run", json={"parameters": params}
        )
        if made.status_code < 300:
            return str(made.json()["id"])
        assert time.monotonic() < deadline, f"no flow run: {made.text}"
        time.sleep(0.5)


def _final_state(client: httpx.Client, flow_run: str, log_path: Path) -> dict[str, Any]:
    deadline = time.monotonic() + 180
    while True:
        state: dict[str, Any] = client.get(f"/flow_runs/{flow_run}").json()["state"]
        if state["type"] in ("COMPLETED", "FAILED", "CRASHED", "CANCELLED"):
            return state
        assert time.monotonic() < deadline, f"run stuck: {log_path.read_text()}"
        time.sleep(0.5)


def test_deployments_round_trip(prefect_server: str, tmp_path: Path) -> None:
    api = prefect_server
    work = WorkDir(tmp_path / "work")
    config_path = tmp_path / "nightly.yaml"
    config_path.write_text(
        "name: nightly\n"
        "datasets: [{kind: demo}]\n"
        "judges: [{name: strong, base_url: 'http://127.0.0.1:9/v1', model: strong}]\n"
        "schedule: {cron: '0 2 * * *', timezone: Europe/Berlin}\n",
        encoding="utf-8",
    )
    run_id = _synthetic_run(work, config_path)

    env = {
        **os.environ,
        "PREFECT_API_URL": api,
        "PREFECT_HOME": str(tmp_path / "serve-home"),
        "JUDGELINE_WORK_DIR": str(work.root),
    }
    env["OPENAI_API_KEY"] = "sk-owner-secret"
    listener = CountingListener()
    log_path = tmp_path / "serve.log"
    with open(log_path, "wb") as log:
        served = subprocess.Popen(
            [str(BIN / "judgeline"), "serve", str(config_path)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            client = httpx.Client(base_url=api, timeout=10)
            names = {"nightly-benchmark", "rerun-failed", "replay-policies"}
            deadline = time.monotonic() + 120
            found: dict[str, dict[str, object]] = {}
            while set(found) != names:
                assert served.poll() is None, log_path.read_text()
                assert time.monotonic() < deadline, f"deployments missing: {log_path.read_text()}"
                resp = client.post("/deployments/filter", json={})
                found = {d["name"]: d for d in resp.json() if d["name"] in names}
                time.sleep(0.5)

            nightly = found["nightly-benchmark"]
            schedules = client.get(f"/deployments/{nightly['id']}/schedules").json()
            assert [s["schedule"]["cron"] for s in schedules] == ["0 2 * * *"]
            assert schedules[0]["schedule"]["timezone"] == "Europe/Berlin"
            for name in ("rerun-failed", "replay-policies"):
                listed = client.get(f"/deployments/{found[name]['id']}/schedules").json()
                assert listed == [], f"{name} must be manual"

            replay = found["replay-policies"]
            params = {"run_id": run_id, "designs": ["balanced"], "policies": ["full", "strict"]}
            state = _final_state(client, _create_run(client, replay, params), log_path)
            assert state["type"] == "COMPLETED", log_path.read_text()

            # Another user's run of the served nightly flow, with a configuration of its own
            # whose judge is its listener and whose key is the owner's: refused before any
            # request is made.
            hostile = tmp_path / "hostile.yaml"
            hostile.write_text(
                "name: hostile\n"
                "datasets: [{kind: demo}]\n"
                f"judges: [{{name: j, base_url: 'http://127.0.0.1:{listener.port}/v1', "
                "model: m, api_key_env: OPENAI_API_KEY}]\n",
                encoding="utf-8",
            )
            for params in ({"config_path": str(hostile)}, {"config": {"name": "x"}}):
                state = _final_state(
                    client, _create_run(client, found["nightly-benchmark"], params), log_path
                )
                assert state["type"] == "FAILED", state
            assert "a deployment's runs use the configuration" in log_path.read_text()
            assert listener.connections == 0
        finally:
            _stop(served)
            listener.close()

    summary = pq.read_table(work.run_dir(run_id) / "summary.parquet").to_pylist()
    assert {(r["design"], r["policy"]) for r in summary} == {
        ("balanced", "full"),
        ("balanced", "strict"),
    }
    assert all(r["pairs"] == 6 for r in summary)
    assert (work.run_dir(run_id) / "report.html").is_file()


def test_serve_replaces_no_deployment_prefect_deploy_registered(
    prefect_server: str, tmp_path: Path
) -> None:
    """A deployment of a served name on a work pool (as `prefect deploy` of an earlier
    deployments/prefect.yaml registered it): `judgeline serve` refuses in one paragraph, exit
    2, and leaves it as it was."""
    client = httpx.Client(base_url=prefect_server, timeout=10)
    pool = client.post("/work_pools/", json={"name": "judgeline-old", "type": "process"})
    assert pool.status_code < 300, pool.text
    flow = client.post("/flows/", json={"name": "replay-run"}).json()
    made = client.post(
        "/deployments/",
        json={"name": "replay-policies", "flow_id": flow["id"], "work_pool_name": "judgeline-old",
              "entrypoint": "flows/nightly.py:replay_policies_flow"},
    )  # fmt: skip
    assert made.status_code < 300, made.text
    try:
        config = tmp_path / "nightly.yaml"
        config.write_text(
            "name: n\ndatasets: [{kind: demo}]\n"
            "judges: [{name: strong, base_url: 'http://127.0.0.1:9/v1', model: strong}]\n",
            encoding="utf-8",
        )
        env = {**os.environ, "PREFECT_API_URL": prefect_server,
               "PREFECT_HOME": str(tmp_path / "serve-home")}  # fmt: skip
        done = subprocess.run(
            [str(BIN / "judgeline"), "--work-dir", str(tmp_path / "work"), "serve", str(config)],
            env=env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert done.returncode == 2, done.stdout + done.stderr
        message = done.stderr.strip()
        assert message.startswith("error: ") and "\n\n" not in message, message
        assert "replay-run/replay-policies (work pool 'judgeline-old')" in " ".join(message.split())
        assert "Traceback" not in done.stderr
        after = client.get(f"/deployments/{made.json()['id']}").json()
        assert after["work_pool_name"] == "judgeline-old"
    finally:
        client.delete(f"/deployments/{made.json()['id']}")


def test_a_run_may_not_change_what_its_deployment_fixed() -> None:
    from flows.served import overrides

    deployed = {"config_path": "/home/me/nightly.yaml", "work_dir": "/home/me/work"}
    assert overrides({**deployed, "run_id": "r", "show_progress": True}, deployed) == []
    assert overrides({**deployed, "config_path": "/tmp/theirs.yaml"}, deployed) == ["config_path"]
    assert overrides({**deployed, "config": {"judges": []}}, deployed) == ["config"]
    assert overrides({"work_dir": "/tmp/theirs", "dask_address": "tcp://x:1"}, deployed) == [
        "config_path",
        "work_dir",
        "dask_address",
    ]
