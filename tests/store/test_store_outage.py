"""A run on an object store whose link to the store is cut (a relay on loopback between
judgeline and moto that drops every connection): store requests are retried for the
patience set, then the run stops as on a full disk (one line, exit 75, the resume command),
its replies kept in this machine's journal; once the store is back, the resumed run pays for
no call twice."""

from __future__ import annotations

import os
import subprocess
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from subprocess import Popen

import pytest
import yaml
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

JUDGELINE = str(REPO / ".venv" / "bin" / "judgeline")
PAIRS, K = 12, 2
CALLS = PAIRS * K * 2
PERSONA = Persona(name="steady", skill=0.8, left_bias=0.2, tie_rate=0.1, latency_ms=250)


def _config(tmp_path: Path, server: SimJudgeServer, *, batch: bool = False) -> Path:
    table = tmp_path / "pairs.csv"
    table.write_text("q,a,b\n" + "".join(f"Question {i}?,yes {i},no {i}\n" for i in range(PAIRS)))
    judge = {"name": "j", "base_url": server.base_url, "model": "steady", "simulated": True,
             "max_concurrency": 3, "batch": batch}  # fmt: skip
    config = {"name": "outage", "k": K, "judges": [judge],
              "datasets": [{"kind": "table", "path": str(table),
                            "mapping": "question=q,answer_a=a,answer_b=b"}]}  # fmt: skip
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _answered(server: SimJudgeServer) -> Counter[str]:
    """Replies the simulated judge sent, by call key: what was paid for."""
    log = server.request_log()
    return Counter(e["call_key"] for e in log if e.get("call_key") and e["status"] == 200)


def _judgeline(url: str, link: Link, tmp_path: Path, **env: str) -> Callable[..., Popen[str]]:
    """`judgeline --work-dir URL ARGS` started with the store reached through `link`."""
    base = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "COLUMNS")}
    base.pop("JUDGELINE_WORK_DIR", None)
    base.update({"AWS_ENDPOINT_URL": link.endpoint, SCRATCH_ENV: str(tmp_path / "scratch"),
                 "JUDGELINE_WORKER": "0", **env})  # fmt: skip

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


@pytest.mark.slow
def test_a_short_outage_is_waited_out_and_the_run_completes(
    s3_server: S3Server, tmp_path: Path
) -> None:
    link = Link(s3_server.endpoint)
    url = f"s3://{s3_server.new_bucket()}/judgeline"
    judgeline = _judgeline(url, link, tmp_path, **{PATIENCE_ENV: "60"})
    with SimJudgeServer([PERSONA]) as server:
        server.set_faults(**NO_FAULTS)
        run = judgeline("run", str(_config(tmp_path, server)), "--run-id", "short")
        _wait_for_replies(run, server, CALLS // 4)
        link.cut()
        time.sleep(4)
        link.restore()
        out, err = run.communicate(timeout=300)
        assert run.returncode == 0, out + err
        answered = _answered(server)
    assert len(answered) == CALLS and max(answered.values()) == 1, answered.most_common(3)
    record = read_record(WorkDir.at(url, scratch=tmp_path / "reader"), "short")
    assert record.status == "completed" and record.calls["stored"] == CALLS
    link.cut()


@pytest.mark.slow
def test_a_store_outage_stops_the_run_like_a_full_disk_and_nothing_paid_is_lost(
    s3_server: S3Server, tmp_path: Path
) -> None:
    link = Link(s3_server.endpoint)
    url = f"s3://{s3_server.new_bucket()}/judgeline"
    judgeline = _judgeline(url, link, tmp_path, **{LEASE_ENV: "3", PATIENCE_ENV: "2"})
    with SimJudgeServer([PERSONA]) as server:
        server.set_faults(**NO_FAULTS)
        run = judgeline("run", str(_config(tmp_path, server)), "--run-id", "cut")
        _wait_for_replies(run, server, CALLS // 4)
        link.cut()
        cut_at = time.monotonic()
        out, err = run.communicate(timeout=180)
        stopped_after = time.monotonic() - cut_at
        assert run.returncode == 75, out + err
        bar = ("judge calls", "calls ")  # the progress bar, wide or at 80 columns
        said = [ln for ln in err.strip().splitlines() if not ln.startswith(bar)]
        assert "Traceback" not in err and len(said) == 1, err  # besides the progress bar
        assert f"object store {url}" in err and "did not answer" in err, err
        assert f"resume with: judgeline --work-dir {url} rerun-failed cut" in err, err
        assert stopped_after >= 2, stopped_after  # the patience was waited out
        paid = _answered(server)
        assert 0 < sum(paid.values()) < CALLS

        link.restore()
        time.sleep(3.5)  # the stopped run's lease runs out
        listed, _ = judgeline("runs").communicate(timeout=180)
        assert "interrupted" in listed, listed
        resumed = judgeline("rerun-failed", "cut")
        out, err = resumed.communicate(timeout=300)
        assert resumed.returncode == 0, out + err
        answered = _answered(server)
    assert len(answered) == CALLS  # every call stored...
    assert max(answered.values()) == 1, answered.most_common(3)  # ...and none paid twice
    record = read_record(WorkDir.at(url, scratch=tmp_path / "reader"), "cut")
    assert record.status == "completed"
    link.cut()


@pytest.mark.slow
def test_a_writer_keeps_its_replies_on_this_machine_while_the_store_is_away(
    s3_server: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cache writer's publish that the store leaves unanswered for the whole patience
    tells its caller (as a full disk does) and keeps the reply in this machine's journal,
    which is published once the store answers again."""
    import asyncio

    from tasks.errors import StoreUnreachable
    from tasks.judging.cache import fold_dead_journals, read_replies
    from tasks.judging.writer import CacheWriter
    from tests.store.test_object_store import attempt, reply

    link = Link(s3_server.endpoint)
    monkeypatch.setenv("AWS_ENDPOINT_URL", link.endpoint)
    monkeypatch.setenv(PATIENCE_ENV, "1")
    url = f"s3://{s3_server.new_bucket()}/judgeline"
    work = WorkDir.at(url, scratch=tmp_path / "scratch")
    told: list[Exception] = []

    async def scenario() -> None:
        async with CacheWriter(work, max_rows=1000, max_age_s=3600, on_full=told.append) as w:
            link.cut()
            w.add(reply("kept"), [attempt("kept")])
            await w.flush()

    asyncio.run(scenario())
    assert len(told) == 1 and isinstance(told[0], StoreUnreachable), told
    (segment,) = work.journal.glob("*.jsonl")
    assert b'"call_key":"kept"' in segment.read_bytes()

    link.restore()
    assert fold_dead_journals(work) == 1
    other = WorkDir.at(url, scratch=tmp_path / "other")
    assert read_replies(other).column("call_key").to_pylist() == ["kept"]
    assert not list(work.journal.glob("*.jsonl"))
    link.cut()


@pytest.mark.slow
def test_a_run_resumed_on_another_machine_names_what_the_first_one_kept(
    s3_server: S3Server, tmp_path: Path
) -> None:
    """A run stopped by an outage keeps the replies it received meanwhile in its machine's
    journal; resumed on another machine (another scratch dir), it says in one line, before
    sending those calls again, what it pays again and which command on the first machine
    would publish them instead; it pays for no more than the first had in flight."""
    link = Link(s3_server.endpoint)
    url = f"s3://{s3_server.new_bucket()}/judgeline"
    times = {LEASE_ENV: "3", PATIENCE_ENV: "2"}
    first = _judgeline(url, link, tmp_path / "first", **times)
    other = _judgeline(url, link, tmp_path / "other", **times)
    with SimJudgeServer([PERSONA]) as server:
        server.set_faults(**NO_FAULTS)
        run = first("run", str(_config(tmp_path, server)), "--run-id", "moved")
        _wait_for_replies(run, server, CALLS // 4)
        link.cut()
        _, err = run.communicate(timeout=180)
        assert run.returncode == 75, err
        link.restore()
        time.sleep(3.5)  # the stopped run's lease runs out
        resumed = other("rerun-failed", "moved")
        out, err = resumed.communicate(timeout=300)
        assert resumed.returncode == 0, out + err
        answered = _answered(server)
    assert len(answered) == CALLS
    paid_twice = sum(answered.values()) - CALLS
    assert paid_twice <= 3, answered.most_common(5)  # the first run's calls in flight
    named = [ln for ln in err.splitlines() if "sent again here and may be paid twice" in ln]
    # Said before any of them is paid again (a claim whose answer the cut lost names a call
    # the first run never sent: "may").
    assert len(named) <= 1 and (named or not paid_twice), err
    if named:
        assert str(tmp_path / "first" / "scratch") in named[0], named[0]
        assert f"run `judgeline --work-dir {url} rerun-failed moved` on " in named[0], named[0]
    link.cut()


@pytest.mark.slow
def test_a_store_outage_under_provider_batches_stops_the_run_and_the_resume_fetches_them(
    s3_server: S3Server, tmp_path: Path
) -> None:
    """Provider batch results that arrive while the store is away past the patience: the run
    stops (exit 75, one line), the batch stays submitted and its replies wait in this
    machine's journal; the resume submits nothing again and pays for no call twice."""
    link = Link(s3_server.endpoint)
    url = f"s3://{s3_server.new_bucket()}/judgeline"
    judgeline = _judgeline(url, link, tmp_path, **{LEASE_ENV: "3", PATIENCE_ENV: "2"})
    with SimJudgeServer([PERSONA]) as server:
        server.set_faults(**NO_FAULTS)
        server.judge.batches.settings.delay_s = 6.0  # ends after the cut
        run = judgeline("run", str(_config(tmp_path, server, batch=True)), "--run-id", "pb")
        entries = tmp_path / "scratch"
        deadline = time.monotonic() + 240
        while not any(
            '"submitted"' in p.read_text() for p in entries.glob("*/work/cache/batches/jl-*.json")
        ):
            assert run.poll() is None and time.monotonic() < deadline, run.communicate()
            time.sleep(0.02)
        link.cut()  # once the batch's id is journaled
        out, err = run.communicate(timeout=180)
        assert run.returncode == 75, out + err
        said = [ln for ln in err.strip().splitlines() if " ETA " not in ln]
        assert "Traceback" not in err and len(said) == 1, err
        assert f"object store {url}" in err and "rerun-failed pb" in err, err
        assert f"the {CALLS} replies received are kept in this machine's journal" in err, err

        link.restore()
        time.sleep(3.5)  # the stopped run's lease runs out
        resumed = judgeline("rerun-failed", "pb")
        out, err = resumed.communicate(timeout=300)
        assert resumed.returncode == 0, out + err
        submitted = [e for e in server.request_log() if e["path"] == "/v1/batches"]
        answered = _answered(server)
    assert len(submitted) == 1  # never submitted again
    assert len(answered) == CALLS and max(answered.values()) == 1, answered.most_common(3)
    record = read_record(WorkDir.at(url, scratch=tmp_path / "reader"), "pb")
    assert record.status == "completed"
    link.cut()
