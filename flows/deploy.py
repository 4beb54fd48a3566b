"""The three deployments users schedule and trigger, built for `judgeline serve`.

nightly-benchmark   the nightly flow on a cron schedule (02:00 by default, time zone set)
rerun-failed        manual, parameter run_id: resend a run's failed calls, rebuild its tables
replay-policies     manual, parameters run_id, designs, policies: never calls a judge
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect.schedules import Cron

from flows.nightly import nightly_flow, replay_policies_flow, rerun_run_flow
from tasks.runs.config import load_run_config
from tasks.store.workdir import WorkDir

NIGHTLY = "nightly-benchmark"
RERUN = "rerun-failed"
REPLAY = "replay-policies"


def build_deployments(config_path: str | Path, work_dir: str | Path) -> list[Any]:
    """Runner deployments for one run configuration and work directory."""
    config_file = Path(config_path).resolve()
    config = load_run_config(config_file)
    work = WorkDir.at(work_dir).address  # a store URL stays one
    schedule = Cron(config.schedule.cron, timezone=config.schedule.timezone)
    return [
        nightly_flow.to_deployment(
            name=NIGHTLY,
            schedules=[schedule],
            parameters={"config_path": str(config_file), "work_dir": work},
            description="Freeze, plan, judge, remap, replay, aggregate and report, nightly.",
            tags=["judgeline", "nightly"],
        ),
        rerun_run_flow.to_deployment(
            name=RERUN,
            parameters={"work_dir": work},
            description="Resend the calls of a run that have no stored reply; rebuild tables.",
            tags=["judgeline"],
        ),
        replay_policies_flow.to_deployment(
            name=REPLAY,
            parameters={"work_dir": work},
            description="Replay stopping policies over a run's cached outcomes (no judge).",
            tags=["judgeline"],
        ),
    ]
