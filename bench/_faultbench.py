"""The measuring side of bench/faults.py: a bench (a template work directory with the demo
plan, the judge, runs in this process or as `judgeline judge` subprocesses), the row of one
scenario, its audit from the cache and the judge's request log, and the printed table.

Imported after bench/faults.py has pointed Prefect at a temporary home.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import shutil
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from _common import REPO

from schemas.judge import JudgeSpec
from simjudge.persona import Faults
from simjudge.server import SimJudgeServer
from tasks.ingest.demo_benchmark import demo_pairs
from tasks.ingest.manifest import freeze_manifest, read_manifest
from tasks.judging.cache import read_replies
from tasks.plan import make_plan, write_plan
from tasks.store.workdir import WorkDir

NO_FAULTS = Faults().model_dump()


@dataclass
class Row:
    scenario: str
    planned: int = 0
    stored: int = 0
    failed: dict[str, int] = field(default_factory=dict)
    resent: int = 0
    requested_again: int = 0
    paid_twice: int = 0
    lost: int = 0
    seconds: float = 0.0
    note: str = ""


class Bench:
    def __init__(self, args: argparse.Namespace, root: Path, server: SimJudgeServer) -> None:
        self.args = args
        self.root = root
        self.server = server
        self.template = WorkDir(root / "template")
        frozen = freeze_manifest([("demo", demo_pairs()[: args.pairs])], self.template)
        _, manifest = read_manifest(self.template, frozen.info.manifest_hash)
        info, table = make_plan(manifest, args.k, "full", None)
        write_plan(self.template, info, table)
        self.plan_id = info.plan_id
        self.planned = table.num_rows

    def fresh(self, name: str) -> WorkDir:
        work = WorkDir(self.root / name)
        for folder in ("manifests", "plans"):
            shutil.copytree(self.template.root / folder, work.root / folder)
        return work

    def judge(self, **kw: Any) -> JudgeSpec:
        spec: dict[str, Any] = {
            "name": "bench-judge",
            "base_url": self.server.base_url,
            "simulated": True,
            "model": "bench",
            "max_concurrency": self.args.concurrency,
        }
        spec.update(kw)
        return JudgeSpec.model_validate(spec)

    def judges_file(self, work: WorkDir, judge: JudgeSpec) -> Path:
        import yaml

        path = work.root / "judges.yaml"
        path.write_text(yaml.safe_dump({"judges": [judge.model_dump(mode="json")]}))
        return path

    def run(self, work: WorkDir, run_id: str, judge: JudgeSpec) -> dict[str, Any]:
        from flows.stageflows import judge_flow

        return asyncio.run(
            judge_flow(run_id=run_id, plan_id=self.plan_id, judges=[judge], work_dir=str(work.root))
        )

    def rerun(self, work: WorkDir, run_id: str) -> dict[str, Any]:
        from flows.stageflows import rerun_failed_flow

        return asyncio.run(rerun_failed_flow(run_id=run_id, work_dir=str(work.root)))

    def start(self, work: WorkDir, judges: Path, run_id: str) -> subprocess.Popen[str]:
        from prefect.settings import PREFECT_API_URL

        env = {**os.environ, "PREFECT_API_URL": str(PREFECT_API_URL.value())}
        env["PYTHONPATH"] = str(REPO)
        command = [sys.executable, "-c", "from flows.cli import main; main()"]
        command += ["--work-dir", str(work.root), "judge", self.plan_id, "--judges", str(judges)]
        command += ["--run-id", run_id, "--no-progress"]
        return subprocess.Popen(
            command, cwd=REPO, env=env, text=True, start_new_session=True,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        )  # fmt: skip


def texts(work: WorkDir) -> dict[str, str]:
    table = read_replies(work).select(["call_key", "raw_reply"]).to_pydict()
    return dict(zip(table["call_key"], table["raw_reply"], strict=True))


def stored_at_of(work: WorkDir) -> dict[str, float]:
    """When each call key was first stored: the earliest ctime of a reply file holding it
    (files are published by a hard link, which sets the ctime: the moment it was visible)."""
    first: dict[str, float] = {}
    for path in work.replies.glob("*.parquet"):
        mtime = path.stat().st_ctime
        for key in pq.read_table(path, columns=["call_key"]).column("call_key").to_pylist():
            first[key] = min(first.get(key, mtime), mtime)
    return first


def audit(row: Row, work: WorkDir, run_id: str, log: list[dict[str, Any]]) -> None:
    """Fill the stored / requested-again / paid-twice columns from the cache and the log.

    Requested again: a request that started after its call's reply was stored on disk.
    Paid twice: replies the judge delivered beyond the first, per call key.
    """
    calls = pq.read_table(work.run_dir(run_id) / "calls.parquet").to_pylist()
    row.planned = len(calls)
    row.stored = sum(c["status"] == "stored" for c in calls)
    stored_at = stored_at_of(work)
    row.requested_again = sum(
        1
        for e in log
        if e["call_key"] in stored_at
        and dt.datetime.fromisoformat(e["time"]).timestamp() - e["latency_ms"] / 1000
        > stored_at[e["call_key"]]
    )
    paid = Counter(e["call_key"] for e in log if e["status"] == 200 and e["fault"] is None)
    row.paid_twice = sum(n - 1 for n in paid.values())


def rate(log: list[dict[str, Any]], n: int) -> float:
    """Requests per second over the first `n` requests of the judge's request log."""
    ends = sorted(dt.datetime.fromisoformat(e["time"]) for e in log)[:n]
    starts = sorted(
        dt.datetime.fromisoformat(e["time"]) - dt.timedelta(milliseconds=e["latency_ms"])
        for e in log
    )[:n]
    return n / max((ends[-1] - starts[0]).total_seconds(), 1e-9)


def readable(path: Path) -> bool:
    try:
        pq.read_table(path)
    except Exception:
        return False
    return True


def print_rows(rows: list[Row]) -> None:
    header = ("scenario", "planned", "stored", "failed by category (before rerun)", "resent",
              "stored keys re-requested", "paid twice", "data lost", "wall s")  # fmt: skip
    table = [header] + [
        (
            r.scenario,
            str(r.planned),
            str(r.stored),
            ", ".join(f"{k} {v}" for k, v in sorted(r.failed.items())) or "-",
            str(r.resent),
            str(r.requested_again),
            str(r.paid_twice),
            str(r.lost),
            f"{r.seconds:.1f}",
        )  # fmt: skip
        for r in rows
    ]
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    for n, line in enumerate(table):
        print(" | ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)))
        if n == 0:
            print("-+-".join("-" * w for w in widths))
    for r in rows:
        if r.note:
            print(f"  {r.scenario}: {r.note}")
