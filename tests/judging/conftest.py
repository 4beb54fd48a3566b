"""Fixtures of the judging tests: a scripted judge on loopback, one per test module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from scripted_judge import ScriptedJudge


@pytest.fixture(scope="module")
def _scripted_judge() -> Iterator[ScriptedJudge]:
    with ScriptedJudge() as judge:
        yield judge


@pytest.fixture
def judge(_scripted_judge: ScriptedJudge) -> ScriptedJudge:
    """The module's scripted judge, its script and request log reset for this test."""
    _scripted_judge.reset()
    return _scripted_judge
