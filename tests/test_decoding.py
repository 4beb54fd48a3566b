"""Decoding fields against each API dialect's rules, as checked for every judge and config."""

from __future__ import annotations

import re
from typing import Any

import pytest

from schemas.decoding import MIN_THINKING_BUDGET, NO_SAMPLING_VERSION, check_decoding


def _check(fields: dict[str, Any], provider: str = "anthropic", **kw: Any) -> None:
    args = {"profile": provider, "anthropic_version": None, "where": "judge 'j' config 'c'"}
    check_decoding(fields, provider=provider, **(args | kw))


def test_fields_each_dialect_takes_pass() -> None:
    _check({"max_tokens": 2000, "temperature": 0.0, "thinking": None})
    _check({"seed": 3, "reasoning_effort": "low", "system_role": "developer"}, "openai")
    _check({"thinking": {"type": "enabled"}}, "openai", profile="openai_compatible")


@pytest.mark.parametrize(
    ("fields", "provider", "kw", "message"),
    [
        ({"max_tokens": 9, "seed": 1, "reasoning_effort": "x"}, "anthropic", {},
         "judge 'j' config 'c': reasoning_effort, seed: not a Messages API field"),
        ({"max_tokens": None}, "anthropic", {}, "max_tokens: the Messages API requires one"),
        ({"max_tokens": 9, "top_p": 0.5}, "anthropic", {"anthropic_version": NO_SAMPLING_VERSION},
         f"top_p: removed in Messages API version {NO_SAMPLING_VERSION}"),
        ({"thinking": {"type": "enabled"}}, "openai", {},
         "thinking: an Anthropic field"),
        ({"max_tokens": 5000, "thinking": {"budget_tokens": MIN_THINKING_BUDGET - 1}},
         "anthropic", {}, f"budget_tokens must be at least {MIN_THINKING_BUDGET}"),
        ({"max_tokens": 2000, "thinking": {"budget_tokens": 2000}}, "anthropic", {},
         "max_tokens must exceed thinking.budget_tokens"),
    ],
)  # fmt: skip
def test_a_field_the_api_does_not_take_is_named_with_its_judge_and_config(
    fields: dict[str, Any], provider: str, kw: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(message)) as err:
        _check(fields, provider, **kw)
    assert str(err.value).startswith("judge 'j' config 'c': ")
