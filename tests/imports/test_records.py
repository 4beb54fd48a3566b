"""What every format reader shares: one judgment per game, one judge per file."""

from __future__ import annotations

from pathlib import Path

import pytest

from tasks.errors import InputError
from tasks.imports.records import game_judgment, one_judge


def test_a_game_with_a_reply_keeps_its_verdict_and_label() -> None:
    got = game_judgment("p1", "BA", reply="[[A]]", verdict="A>B", label="Left", line=3, index=1)
    assert (got.pair_id, got.order, got.reply, got.line, got.index) == ("p1", "BA", "[[A]]", 3, 1)
    assert (got.recorded_verdict, got.recorded_label) == ("A>B", "Left")


def test_a_failed_game_keeps_its_verdict_but_not_its_label() -> None:
    got = game_judgment("p1", "AB", reply=None, verdict="tie", label="Tie", line=1, index=0)
    assert (got.recorded_verdict, got.recorded_label) == ("tie", None)


def test_a_verdict_that_is_not_text_is_not_kept() -> None:
    for verdict in (None, 3):
        got = game_judgment("p1", "AB", reply="x", verdict=verdict, label=None, line=1, index=0)
        assert got.recorded_verdict is None


def test_one_judge_per_file() -> None:
    assert one_judge({"gpt-4"}, file=Path("f.jsonl")) == "gpt-4"
    with pytest.raises(InputError, match=r"found judge_name \['a', 'b'\]") as err:
        one_judge({"b", "a"}, file=Path("f.jsonl"), field="judge_name")
    assert "f.jsonl" in str(err.value)
    with pytest.raises(InputError, match="found judge none"):
        one_judge(set(), file=Path("f.jsonl"))
