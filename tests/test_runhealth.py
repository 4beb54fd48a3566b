"""Run status from per-config health: calls without a reply, too few valid outcomes, a
breaker stop, no valid outcome,
and reasons that lead with the status and name the provider's message."""

from __future__ import annotations

from typing import Any

import pytest

from schemas.run import ConfigHealth
from tasks.runhealth import (
    MISSING_SHARE,
    NOT_RECORDED,
    VALID_SHARE,
    RunNotCompleted,
    raise_unless_completed,
    reasons,
    run_status,
)

TRIP = {"judge": "j", "config": "c", "category": "auth", "http_status": 401,
        "message": "Incorrect API key provided", "failures": 3, "held": 37}  # fmt: skip


def _health(valid: int, planned: int = 100, **kw: Any) -> ConfigHealth:
    return ConfigHealth(judge="j", config="c", planned=planned, valid=valid, **kw)


def test_status_by_missing_and_valid_share_and_breaker() -> None:
    assert (MISSING_SHARE, VALID_SHARE) == (0.1, 0.5)
    assert run_status([_health(90, failed={"timeout": 10}), _health(100)]) == "completed"
    assert run_status([_health(89, failed={"timeout": 11}), _health(100)]) == "degraded"
    assert run_status([_health(89, failed={"auth": 3}, pending=8), _health(100)]) == "degraded"
    # Invalid or abstained replies are the judge's behaviour: a noisy judge still completes,
    # a judge with fewer than half its slots valid does not.
    assert run_status([_health(84), _health(100)]) == "completed"
    assert run_status([_health(49), _health(100)]) == "degraded"
    assert run_status([_health(95, stopped=TRIP), _health(100)]) == "degraded"
    assert run_status([_health(0), _health(0)]) == "failed"
    assert run_status([]) == "failed"  # nothing planned, nothing measured


def test_reasons_lead_with_the_status_and_quote_the_provider() -> None:
    short = _health(60, failed={"rate_limited": 30}, pending=10, message="Slow down")
    stopped = _health(0, failed={"auth": 3}, pending=97, message=TRIP["message"], stopped=TRIP)
    lines = reasons("r1", "degraded", [_health(100), short, stopped])
    assert lines[0] == (
        "run r1 degraded: 2 of 3 judge configs got no reply to more than 10% of their calls, "
        "have fewer than 50% valid outcomes, or were stopped"
    )
    assert lines[1] == (
        "j · c: 60/100 valid outcomes; failed: 30 rate_limited; first: Slow down; "
        "`judgeline rerun-failed r1` sends them again"
    )
    assert lines[2] == (
        "j · c: 0/100 valid outcomes; stopped after 3 auth failures (HTTP 401): Incorrect API "
        "key provided; 97 calls not sent, run `judgeline rerun-failed r1` after fixing the key"
    )
    assert reasons("r1", "completed", [_health(100)]) == []
    imported = _health(80, failed={NOT_RECORDED: 20})
    assert reasons("imp", "degraded", [imported])[1] == (
        "j · c: 80/100 valid outcomes; 20 not_recorded: the imported files hold no reply for "
        "them, so nothing can send them again; import files that have them"
    )
    with pytest.raises(RunNotCompleted) as caught:
        raise_unless_completed("r1", "failed", [stopped])
    assert caught.value.status == "failed" and "no judge config produced" in str(caught.value)
