"""The scheduled path end to end on a real `prefect server start`: two nightly runs of a
served deployment on a growing dataset, a judge that drifts between them, the drift probe
that notices, the alarm event on the server and the automation that fails the flow run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from schemas.config import AlarmSpec, DatasetSpec, ProbeSpec, RunConfig
from schemas.judge import JudgeSpec
from simjudge.persona import Persona
from simjudge.server import SimJudgeServer
from tasks.history.diff import diff_runs
from tasks.history.probe import PROBE_DATE_ENV
from tasks.history.trends import trend_points
from tasks.ingest.demo_benchmark import demo_pairs
from tasks.runs.record import list_records
from tasks.store.workdir import WorkDir
from tests.flows.test_deployments import BIN, prefect_server  # noqa: F401 - the fixture

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
TERMINAL = ("COMPLETED", "FAILED", "CRASHED", "CANCELLED")


def _write_pairs(path: Path, n: int) -> None:
    rows = [
        {"id": p.pair_id, "q": p.question, "x": p.answer_a, "y": p.answer_b, "k": p.key}
        for p in demo_pairs()[:n]
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")


def _config(base_url: str, data: Path) -> RunConfig:
    judge = JudgeSpec(name="j", base_url=base_url, model="judge", simulated=True)
    table = DatasetSpec(kind="table", path=str(data), dataset="grow",
                        mapping="pair_id=id,question=q,answer_a=x,answer_b=y,key=k")  # fmt: skip
    return RunConfig(
        name="served", datasets=[table], judges=[judge], k=2,
        probe=ProbeSpec(pairs=12, rng_seed=5), alarms=AlarmSpec(),
    )  # fmt: skip


def _wait(what: str, check: Any, log: Path, timeout: float = 90, poll: float = 0.5) -> Any:
    deadline = time.monotonic() + timeout
    while not (found := check()):
        assert time.monotonic() < deadline, f"{what} did not happen:\n{log.read_text()[-3000:]}"
        time.sleep(poll)
    return found


def _night(api: str, tmp: Path, work: WorkDir, config: Path, day: str) -> dict[str, Any]:
    """Serve the deployments with the probe date `day`, run the nightly deployment once,
    wait for its flow run to end, stop serving at once (SIGTERM); the flow run as the server
    had it when it ended.

    The flow run's process is still finishing then (its hook emits the alarms, then it exits):
    `judgeline serve` must let it exit rather than have it Cancelled (flows/serving.py)."""
    env = {**os.environ, "PREFECT_API_URL": api, "PREFECT_HOME": str(tmp / "serve-home"),
           "JUDGELINE_WORK_DIR": str(work.root), PROBE_DATE_ENV: day}  # fmt: skip
    log = tmp / f"serve-{day}.log"
    client = httpx.Client(base_url=api, timeout=10)
    with open(log, "wb") as out:
        served = subprocess.Popen([str(BIN / "judgeline"), "serve", str(config)], env=env,
                                  stdout=out, stderr=subprocess.STDOUT)  # fmt: skip
        try:

            def deployment() -> Any:
                assert served.poll() is None, log.read_text()
                listed = client.post("/deployments/filter", json={}).json()
                return next((d for d in listed if d["name"] == "nightly-benchmark"), None)

            nightly = _wait("the nightly deployment", deployment, log)

            def created() -> Any:
                # A busy server answers 503 Service Unavailable now and then: ask again.
                made = client.post(f"/deployments/{nightly['id']}/create_flow_run", json={})
                return made.json() if made.status_code < 300 else None

            run = _wait("the nightly flow run", created, log)

            def ended() -> Any:
                now = client.get(f"/flow_runs/{run['id']}").json()
                return now if now["state"]["type"] in TERMINAL else None

            return dict(_wait("the nightly run", ended, log, timeout=120, poll=0.05))
        finally:
            for _ in range(2):
                if served.poll() is None:
                    served.send_signal(signal.SIGTERM)
                    try:
                        served.wait(timeout=15)
                    except subprocess.TimeoutExpired:
                        continue
            if served.poll() is None:
                served.kill()
                served.wait()


def test_two_served_nights_raise_an_alarm_the_automation_acts_on(
    prefect_server: str,  # noqa: F811 - the imported fixture
    tmp_path: Path,
) -> None:
    api = prefect_server
    env = {**os.environ, "PREFECT_API_URL": api, "PREFECT_HOME": str(tmp_path / "cli-home")}
    created = subprocess.run(
        [str(BIN / "prefect"), "automation", "create", "--from-file",
         str(REPO / "deployments" / "automations.yaml")],
        env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert created.returncode == 0, created.stdout + created.stderr
    work, data, config = WorkDir(tmp_path / "work"), tmp_path / "pairs.jsonl", tmp_path / "c.yaml"
    flow_runs, requests = [], []
    nights = [(30, 0.0, "2026-11-29"), (40, 0.9, "2026-11-30")]
    for n, left_bias, day in nights:
        _write_pairs(data, n)
        persona = Persona(name="judge", skill=0.9, left_bias=left_bias, tie_rate=0.03)
        with SimJudgeServer([persona]) as judge:
            config.write_text(_config(judge.base_url, data).model_dump_json(), "utf-8")
            flow_runs.append(_night(api, tmp_path, work, config, day))
            requests.append(len(judge.request_log()))

    first, second = sorted(
        (r for r in list_records(work) if r.name == "served"), key=lambda r: r.started_at
    )
    assert first.status == second.status == "completed", (first.error, second.error)
    # Night 2 pays for the 10 new pairs' grid and the probe's fresh calls, nothing else.
    probe_calls = 12 * 2 * 2
    assert second.calls["sent"] == 10 * 2 * 2
    assert (second.probe or {})["calls"]["sent"] == probe_calls
    assert requests[1] == 10 * 2 * 2 + probe_calls
    diff = diff_runs(work, first.run_id, second.run_id)
    assert (diff.pairs_added, diff.pairs_shared, diff.pairs_removed) == (10, 30, 0)
    points = [p for p in trend_points(work) if p.name == "served"]
    assert [p.run_id for p in points] == [first.run_id, second.run_id]
    assert [p.pairs for p in points] == [30, 40]
    [(name, agreement)] = (second.probe or {})["agreement"].items()
    assert name == "j · default" and agreement["agreement"] < 0.8
    assert "probe_agreement" in {a["alarm"] for a in second.alarms}

    client = httpx.Client(base_url=api, timeout=10)
    flow_run = str(flow_runs[1]["id"])

    def alarm_events() -> list[dict[str, Any]]:
        filt = {"filter": {"event": {"name": ["judgeline.alarm"]}}, "limit": 50}
        return list(client.post("/events/filter", json=filt).json()["events"])

    log = tmp_path / "serve-2026-11-30.log"
    events = _wait("the alarm event on the server", alarm_events, log, timeout=30)
    assert {e["resource"]["prefect.resource.id"] for e in events} == {
        f"judgeline.run.{second.run_id}"
    }
    assert {e["payload"]["alarm"] for e in events} >= {"probe_agreement"}
    related = {r["prefect.resource.id"] for e in events for r in e["related"]}
    assert f"prefect.flow-run.{flow_run}" in related
    assert flow_runs[0]["state"]["type"] == "COMPLETED"

    def alarmed() -> Any:
        state = client.get(f"/flow_runs/{flow_run}").json()["state"]
        return state if state["name"] == "Alarm" else None

    state = _wait("the automation's state change", alarmed, log, timeout=60)
    assert state["type"] == "FAILED"
    first_state = client.get(f"/flow_runs/{flow_runs[0]['id']}").json()["state"]
    assert first_state["type"] == "COMPLETED"
