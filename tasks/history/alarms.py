"""Alarms: thresholds of a run configuration checked at the end of a run.

Against the previous run of the same configuration (`tasks.history.previous`): a judge config's
consistency fell by more than `consistency_drop`, its left slot's share of order conflicts
rose by more than `position_bias_rise`; in this run: a judge config's valid share below
`valid_share_below`, the drift probe's agreement with the previous probe below
`probe_agreement_below`, or the run not `completed`. Each crossed threshold is one alarm: a
plain dict with the numbers, which the flow emits as a Prefect event and records.
"""

from __future__ import annotations

import math
from typing import Any

from schemas.config import AlarmSpec
from schemas.run import RunRecord
from tasks.history.diff import RunDiff
from tasks.history.view import RunView

__all__ = ["ALARM_EVENT", "alarm_text", "check_alarms"]

ALARM_EVENT = "judgeline.alarm"
"""The Prefect event every crossed threshold emits (deployments/automations.yaml reacts)."""


def _alarm(kind: str, run_id: str, **numbers: Any) -> dict[str, Any]:
    return {"alarm": kind, "run_id": run_id, **numbers}


def check_alarms(
    spec: AlarmSpec,
    record: RunRecord,
    view: RunView | None,
    diff: RunDiff | None,
    probe: dict[str, Any] | None,
) -> list[dict[str, Any]]:
    """Every threshold `record`'s run crossed (empty when none did)."""
    run_id = record.run_id
    alarms = []
    if record.status != "completed":
        alarms.append(_alarm("run_not_completed", run_id, status=record.status))
    if view is not None and spec.valid_share_below is not None:
        for row in view.figures.to_dict("records"):
            if row["valid_share"] < spec.valid_share_below:
                alarms.append(
                    _alarm("valid_share", run_id, judge=row["judge"], config=row["config"],
                           value=row["valid_share"], threshold=spec.valid_share_below)
                )  # fmt: skip
    changes = diff.changes if diff is not None else []
    previous = diff.run_a if diff is not None else None
    for change in changes:
        names = {"judge": change.judge, "config": change.config, "previous": previous}
        drop = change.before["consistency"] - change.after["consistency"]
        if spec.consistency_drop is not None and drop > spec.consistency_drop:
            alarms.append(
                _alarm("consistency_drop", run_id, **names, before=change.before["consistency"],
                       after=change.after["consistency"], threshold=spec.consistency_drop)
            )  # fmt: skip
        rise = change.after["left_share"] - change.before["left_share"]
        bound = spec.position_bias_rise
        if bound is not None and not math.isnan(rise) and rise > bound:
            alarms.append(
                _alarm("position_bias_rise", run_id, **names, before=change.before["left_share"],
                       after=change.after["left_share"], threshold=bound)
            )  # fmt: skip
    floor = spec.probe_agreement_below
    for name, figures in ((probe or {}).get("agreement") or {}).items():
        if floor is not None and figures["agreement"] < floor:
            alarms.append(
                _alarm("probe_agreement", run_id, judge_config=name, value=figures["agreement"],
                       low=figures["low"], high=figures["high"], threshold=floor,
                       previous=(probe or {}).get("previous"))
            )  # fmt: skip
    return alarms


def alarm_text(alarm: dict[str, Any]) -> str:
    """One alarm as a line: its kind, then its figures; an interval's bounds (`low`, `high`)
    follow the value they bound as `(95% interval L to H)`, not as fields of their own, which
    read like config names."""

    def shown(value: Any) -> Any:
        return round(value, 3) if isinstance(value, float) else value

    parts = []
    for key, value in alarm.items():
        if key in ("alarm", "run_id", "low", "high"):
            continue
        part = f"{key} {shown(value)}"
        if key == "value" and "low" in alarm and "high" in alarm:
            part += f" (95% interval {shown(alarm['low'])} to {shown(alarm['high'])})"
        parts.append(part)
    return f"{alarm['alarm']}: {', '.join(parts)}"
