"""Structured verdicts (`verdict: json`) end to end, and the judge settings refused before
the first call.

A judge held to the template's verdict schema leaves no reply unparsed (the simulated judge
answers a schema with the JSON verdict, whatever its persona's invalid rate); a persona
that refuses 5% of attempts shows them as `refused` failures, which are never stored as
replies and are sent again by a rerun of the unstored calls.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter

import pyarrow.parquet as pq
import pytest
from support import stage_demo_plan

from schemas.judge import JudgeSpec
from simjudge.persona import Persona
from simjudge.server import SimJudgeServer
from tasks.errors import InputError
from tasks.judging.cache import read_replies
from tasks.judging.prices import price_of
from tasks.judging.request import JudgeRequest
from tasks.judging.stage import run_judge_stage, unstored_call_keys
from tasks.prompts.parsing import parse_reply
from tasks.prompts.preflight import check_judges
from tasks.prompts.verdicts import VERDICT_LABELS, structured_reply, verdict_schema
from tasks.runs.folder import RunFolder
from tasks.store.workdir import WorkDir

# --- parsing -------------------------------------------------------------------------------


@pytest.mark.parametrize("template_id", sorted(VERDICT_LABELS))
def test_every_structured_verdict_parses_to_its_label(template_id: str) -> None:
    schema = verdict_schema(template_id)
    assert list(schema["properties"]) == ["reasoning", "verdict"]
    assert schema["required"] == ["reasoning", "verdict"] and not schema["additionalProperties"]
    for name, (label, strength) in VERDICT_LABELS[template_id].items():
        assert name in schema["properties"]["verdict"]["enum"]
        text = structured_reply(template_id, label, strength, "because")
        parsed = parse_reply(template_id, text)
        assert (parsed.label, parsed.strength, parsed.note) == (label, strength, None), text


def test_a_structured_reply_that_does_not_validate_is_invalid_with_a_note() -> None:
    off = parse_reply("arena-hard-v1", json.dumps({"reasoning": "r", "verdict": "A>>>B"}))
    assert off.label == "Invalid" and off.note is not None and "A>>>B" in off.note
    typed = parse_reply("arena-hard-v1", json.dumps({"reasoning": 3, "verdict": "A>B"}))
    assert typed.label == "Invalid" and "reasoning" in (typed.note or "")
    # Cut by the limit: Invalid as any cut reply, whatever it holds.
    cut = parse_reply("arena-hard-v1", '{"reasoning": "r", "verdict": "A>B"}', "max_output_tokens")
    assert cut.label == "Invalid" and (cut.note or "").startswith("truncated")
    # A text verdict parses as before.
    assert parse_reply("arena-hard-v1", "So: [[B>A]]").label == "Right"


# --- bad input before the first call -------------------------------------------------------


def _judge(**fields: object) -> JudgeSpec:
    return JudgeSpec.model_validate(
        {"name": "j", "base_url": "https://api.openai.com/v1", "model": "gpt-5.2", **fields}
    )


def _effort(effort: str) -> list[JudgeSpec]:
    return [_judge(reasoning=True, configs=[{"name": "m", "reasoning_effort": effort}])]


def test_an_effort_the_model_does_not_take_is_refused_before_any_call() -> None:
    with pytest.raises(InputError, match="'minimal'.*gpt-5.2.*takes none, low"):
        check_judges(
            [_judge(reasoning=True, configs=[{"name": "m", "reasoning_effort": "minimal"}])]
        )
    with pytest.raises(InputError, match="not an effort OpenAI's API takes"):
        check_judges(_effort("huge"))
    with pytest.raises(InputError, match="does not reason"):
        check_judges([_judge(model="gpt-4o", reasoning_effort="low")])
    with pytest.raises(InputError, match="Responses API only"):
        check_judges([_judge(model="gpt-5.2-pro", reasoning=True)])
    pro = _judge(profile="openai-responses", model="gpt-5.6-pro", reasoning=True,
                 configs=[{"name": "max", "reasoning_effort": "max"}])  # fmt: skip
    check_judges([pro])  # gpt-5.6 takes max
    gemini = {"profile": "gemini", "model": "gemini-2.5-flash",
              "base_url": "https://generativelanguage.googleapis.com/v1beta/openai/"}  # fmt: skip
    with pytest.raises(InputError, match="Gemini's OpenAI-compatible endpoint takes none"):
        check_judges([_judge(**gemini, reasoning_effort="xhigh")])
    flash = _judge(**gemini, reasoning_effort="minimal", verdict="json")
    check_judges([flash])
    price = price_of(flash)
    assert price is not None and price.input == 0.30 and "third-party" in (price.source or "")


def test_settings_no_endpoint_of_the_profile_takes_are_refused() -> None:
    with pytest.raises(ValueError, match="verdict: json needs an API"):
        _judge(profile="openai_compatible", verdict="json")
    with pytest.raises(ValueError, match="extra.store"):
        _judge(profile="openai-responses", extra={"store": True})
    with pytest.raises(ValueError, match="config 'c' extra.store"):
        _judge(profile="openai-responses", configs=[{"name": "c", "extra": {"store": True}}])
    with pytest.raises(ValueError, match="store: true is for the Responses API"):
        _judge(store=True)
    with pytest.raises(ValueError, match="not a Responses API field"):
        _judge(profile="openai-responses", seed="plan")
    with pytest.raises(ValueError, match="also set response_format"):
        _judge(verdict="json", response_format={"type": "json_object"})
    kept = _judge(profile="openai-responses", store=True, verdict="json")
    assert JudgeSpec.model_validate(kept.model_dump()) == kept


# --- a run -----------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_json_verdict_run_parses_every_reply_and_resends_refusals(work: WorkDir) -> None:
    staged = stage_demo_plan(work, pairs=40, k=2)
    persona = Persona(name="gpt-json", skill=0.85, invalid_rate=0.3, refusal_rate=0.05)
    with SimJudgeServer([persona]) as server:
        judge = JudgeSpec(
            name="json-judge", base_url=server.base_url, model="gpt-json", simulated=True,
            verdict="json", max_retries=0,
        )  # fmt: skip
        request = JudgeRequest(work=work, run_id="json", plan_id=staged.plan_id, judges=(judge,))
        counts = asyncio.run(run_judge_stage(request))
        planned = counts["planned"]
        refused = counts["failed_by_category"].get("refused", 0)
        assert counts["failed_by_category"] == {"refused": refused}
        assert 0.01 * planned < refused < 0.12 * planned, (refused, planned)
        assert counts["stored"] == planned - refused
        sent = [e for e in server.request_log() if e["status"] == 200]
        assert {e["fields"]["response_format"]["type"] for e in sent} == {"json_schema"}
        # Refusals are not replies: none is stored, each is left to send again.
        calls = pq.read_table(RunFolder(work, "json").calls).to_pylist()
        failed = {c["call_key"] for c in calls if c["status"] == "failed"}
        assert {c["error_category"] for c in calls if c["status"] == "failed"} == {"refused"}
        assert unstored_call_keys(work, "json") == failed
        replies = read_replies(work).to_pylist()
        assert not failed & {r["call_key"] for r in replies}
        labels = Counter(
            parse_reply("arena-hard-v1", r["raw_reply"], r["finish_reason"]).label for r in replies
        )
        assert labels["Invalid"] == 0 and sum(labels.values()) == planned - refused
        again = JudgeRequest(
            work=work, run_id="json", plan_id=staged.plan_id, judges=(judge,),
            only_keys=unstored_call_keys(work, "json"),
        )  # fmt: skip
        second = asyncio.run(run_judge_stage(again))
    assert second["stored"] > planned - refused
    assert second["failed_by_category"].get("refused", 0) < refused
