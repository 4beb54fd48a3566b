"""Reply parsing: each template's output contract, and 700 real o1-mini Arena-Hard replies."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from tasks.errors import InputError
from tasks.prompts.parsing import PARSER_VERSION, ParsedReply, note_reason, parse_reply

O1_MINI = (
    "judgebench/dataset=judgebench,response_model=gpt-4o-2024-05-13,"
    "judge_name=arena_hard,judge_model=o1-mini-2024-09-12.jsonl"
)
# The file's `decision` drops strength: both [[A>>B]] and [[A>B]] are recorded as `A>B`.
TO_FILE_DECISION = {"Left": "A>B", "Right": "B>A", "Tie": "A=B"}


def arena(text: str) -> ParsedReply:
    return parse_reply("arena-hard-v1", text)


def vanilla(text: str) -> ParsedReply:
    return parse_reply("judgebench-vanilla-v1", text)


def strict_json(text: str) -> ParsedReply:
    return parse_reply("json-strict-v1", text)


def test_parser_version_and_unknown_template() -> None:
    assert PARSER_VERSION
    with pytest.raises(InputError, match="known templates"):
        parse_reply("arena-hard-v0", "[[A>B]]")


def test_real_o1_mini_replies_agree_with_the_recorded_decisions(shared_data: Path) -> None:
    records = [json.loads(line) for line in (shared_data / O1_MINI).read_text("utf-8").splitlines()]
    assert len(records) == 350
    agree = 0
    strengths: Counter[tuple[str, str | None]] = Counter()
    mismatches = []
    for record in records:
        assert len(record["judgments"]) == 2
        for index, judgment in enumerate(record["judgments"]):
            parsed = arena(judgment["judgment"]["response"])
            strengths[(parsed.label, parsed.strength)] += 1
            if TO_FILE_DECISION.get(parsed.label) == judgment["decision"]:
                agree += 1
            else:
                mismatches.append((record["pair_id"], index, parsed, judgment["decision"]))
    assert mismatches == []
    assert agree == 700
    # Strength is read even though the file's decision drops it.
    assert strengths == {
        ("Left", "strong"): 242,
        ("Left", "weak"): 125,
        ("Tie", None): 44,
        ("Right", "weak"): 118,
        ("Right", "strong"): 171,
    }


@pytest.mark.parametrize(
    ("reply", "label", "strength"),
    [
        ("My final verdict is Assistant A is significantly better: [[A>>B]]", "Left", "strong"),
        ("Assistant A is slightly better: [[A>B]]", "Left", "weak"),
        ("My final verdict is tie: [[A=B]]", "Tie", None),
        ("[[B>A]]", "Right", "weak"),
        ("**My final verdict is: [[B>>A]]**.", "Right", "strong"),
        ("I cannot judge: [[ABSTAIN]]", "Abstain", None),
        ("Lower case still reads: [[ b >> a ]]", "Right", "strong"),
        ("Final Verdict: [[B>A]]\n\nSo: My final verdict is: [[B>A]]", "Right", "weak"),
        ('**Final Verdict:** "My final verdict is Assistant B is slightly better: [[B>A]]".',
         "Right", "weak"),
        ('Example output: "My final verdict is tie: [[A=B]]"\nMy final verdict: [[A>B]]',
         "Left", "weak"),
        ("See [[Wikipedia]] and [[Talk:Foo]]. Verdict: [[A>B]]", "Left", "weak"),
        ("```\nprint('[[B>>A]]')\n```\nMy final verdict is [[A>>B]]", "Left", "strong"),
        # An example cue earlier on the verdict's own line, in another sentence.
        ("A cites it. For example, B misses the base case. Therefore, my final verdict is "
         "[[B>A]].", "Right", "weak"),
        # A fence the judge opened and never closed does not swallow the verdict after it.
        ("```python\ndef f(n):\n    return n\n\nMy final verdict is [[A>B]]", "Left", "weak"),
        ("```\nA\n```\nthen ```B without a close.\nMy final verdict is [[A=B]]", "Tie", None),
        # The judge put its verdict in the fence that ends the reply.
        ("A is right, B is not.\n\n```\nMy final verdict is [[A>>B]]\n```\n", "Left", "strong"),
        ("Final verdict:\n```text\n[[B>>A]]\n```", "Right", "strong"),
    ],
)  # fmt: skip
def test_arena_valid_verdicts(reply: str, label: str, strength: str | None) -> None:
    parsed = arena(reply)
    assert (parsed.label, parsed.strength, parsed.note) == (label, strength, None)


@pytest.mark.parametrize(
    ("reply", "note_part"),
    [
        ("Both answers are fine, I guess.", "no verdict"),
        ("", "empty reply"),
        (" \n\t", "empty reply"),
        ("First [[A>B]] but on reflection [[B>A]]", "conflicting"),
        ("[[A>B]] ... actually [[A>>B]]", "conflicting"),
        ('The format is, for example, "[[A=B]]", but I will not say more.', "example"),
        ("```\nMy final verdict is [[A>B]]\n```", "example"),
        ("The format, for example:\n```\n[[A=B]]\n```", "example"),
        ("For example, A>B is written [[A>B]] and that is all.", "example"),
        ("```\nprint('[[A>B]]')\n```\nNo verdict from me.", "example"),
        ("My final verdict is [[A<B]]", "not one of"),
        ("My final verdict is [[A>>>B]]", "not one of"),
        ("Verdict [A>B] with single brackets", "no verdict"),
    ],
)
def test_arena_invalid_replies_say_why(reply: str, note_part: str) -> None:
    parsed = arena(reply)
    assert parsed.label == "Invalid"
    assert parsed.strength is None
    assert parsed.note is not None and note_part in parsed.note


@pytest.mark.parametrize(
    ("reply", "label"),
    [
        ("Output (a)", "Left"),
        ("Output (b)", "Right"),
        ("  **Output (b)**.\n", "Right"),
        ('"output (A)"', "Left"),
        ("Tie", "Tie"),
        ("abstain.", "Abstain"),
    ],
)
def test_vanilla_valid_replies(reply: str, label: str) -> None:
    assert vanilla(reply) == ParsedReply(label=label, strength=None, note=None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("reply", "note_part"),
    [
        ("Output (a) or Output (b)", "both"),
        ("I prefer Output (b) because it is longer.", "words besides"),
        ("Output (c)", "not one of"),
        ("Both are good", "not one of"),
        ("   ", "empty"),
        ("Left", "not one of"),
    ],
)
def test_vanilla_invalid_replies_say_why(reply: str, note_part: str) -> None:
    parsed = vanilla(reply)
    assert parsed.label == "Invalid"
    assert parsed.note is not None and note_part in parsed.note


@pytest.mark.parametrize(
    ("reply", "label", "strength"),
    [
        ('{"verdict": "left", "strength": "strong", "reason": "cites the rule"}', "Left", "strong"),
        ('  {"verdict": "right", "strength": "weak", "reason": "ok"}\n', "Right", "weak"),
        ('{"verdict": "right", "strength": null, "reason": null}', "Right", None),
        ('{"verdict": "tie", "strength": null, "reason": "same"}', "Tie", None),
        ('{"verdict": "abstain"}', "Abstain", None),
        ('{"reason": "{\\"verdict\\": \\"left\\"}", "verdict": "right"}', "Right", None),
    ],
)
def test_json_valid_replies(reply: str, label: str, strength: str | None) -> None:
    assert strict_json(reply) == ParsedReply(label=label, strength=strength, note=None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("reply", "note_part"),
    [
        ('Here is my answer: {"verdict": "left", "strength": "weak", "reason": "x"}', "not only"),
        ('```json\n{"verdict": "left", "strength": "weak", "reason": "x"}\n```', "not only"),
        ('{"verdict": "left", "strength": "weak", "reason": "x"} Hope this helps!', "not only"),
        ('{"verdict": "left", "strength": "weak",}', "not valid JSON"),
        ('{"verdict": "A", "strength": "weak", "reason": "x"}', "not one of"),
        ('{"verdict": "Left", "strength": "weak", "reason": "x"}', "not one of"),
        ('{"verdict": "left", "strength": "very", "reason": "x"}', "strength"),
        ('{"verdict": "tie", "strength": "strong", "reason": "x"}', "must be null"),
        ('{"verdict": "left", "verdict": "right"}', "repeated"),
        ('{"verdict": "left", "winner_identity": "B"}', "outside the contract"),
        ('{"strength": "weak", "reason": "x"}', "no 'verdict'"),
        ('{"verdict": "left", "reason": 3}', "reason"),
        ('{"verdict": ["left"]}', "not one of"),
    ],
)
def test_json_invalid_replies_say_why(reply: str, note_part: str) -> None:
    parsed = strict_json(reply)
    assert parsed.label == "Invalid"
    assert parsed.note is not None and note_part in parsed.note


@pytest.mark.parametrize(
    ("reply", "label"),
    [
        ("Assistant B is more accurate.\n\n[[B]]", "Right"),
        ("Final verdict: [[A]]", "Left"),
        ("Both are equally good. [[C]]", "Tie"),
        ("[[ A ]] ... so again [[A]]", "Left"),
        ("I cannot tell. [[ABSTAIN]]", "Abstain"),
        ('For example "[[B]]" would mean B.\nMy verdict is [[A]]', "Left"),
        ("For example, A skips step 2 ... Therefore, my final verdict is [[B]].", "Right"),
        ("```python\nprint(2)\nMy verdict: [[A]]", "Left"),
        ("B explains more.\n```\n[[B]]\n```", "Right"),
    ],
)
def test_fastchat_valid_verdicts(reply: str, label: str) -> None:
    parsed = parse_reply("fastchat-pair-v2", reply)
    assert (parsed.label, parsed.strength, parsed.note) == (label, None, None)


@pytest.mark.parametrize(
    ("reply", "note_part"),
    [
        ("A is better, then [[B]]. Final: [[A]]", "conflicting verdict labels [[B]], [[A]]"),
        ("My verdict: [[A>B]]", "[[A>B]] is not one of"),
        ("Assistant A wins.", "no verdict label"),
        ("```\n[[A]]\n```", "only inside an example"),
        ("", "empty reply"),
        ("\n\n", "empty reply"),
    ],
)
def test_fastchat_invalid_replies_say_why(reply: str, note_part: str) -> None:
    parsed = parse_reply("fastchat-pair-v2", reply)
    assert parsed.label == "Invalid" and parsed.note is not None and note_part in parsed.note


@pytest.mark.parametrize(
    ("template_id", "reply"),
    [
        ("arena-hard-v1", "Answer A (identity A) wins: [[A>B]]"),
        ("judgebench-vanilla-v1", "Output (a)"),
        ("json-strict-v1", '{"verdict": "left", "strength": "weak", "reason": "identity B"}'),
    ],
)
def test_parser_returns_slots_never_identities(template_id: str, reply: str) -> None:
    assert parse_reply(template_id, reply).label == "Left"


@pytest.mark.parametrize("finish", ["length", "max_tokens"])
@pytest.mark.parametrize(
    ("template_id", "text"),
    [
        ("arena-hard-v1", "Both are fine. My final verdict is [[A>B]]"),
        ("arena-hard-v1", ""),
        ("judgebench-vanilla-v1", "Output (a)"),
        ("json-strict-v1", '{"verdict": "left", "strength": "weak"'),
    ],
)
def test_a_reply_cut_by_the_token_limit_is_invalid_even_with_a_verdict(
    template_id: str, text: str, finish: str
) -> None:
    parsed = parse_reply(template_id, text, finish)
    assert parsed.label == "Invalid" and parsed.strength is None
    assert parsed.note is not None and parsed.note.startswith("truncated")
    assert finish in parsed.note


@pytest.mark.parametrize("finish", [None, "stop", "end_turn", "stop_sequence"])
def test_other_finish_reasons_parse_as_before(finish: str | None) -> None:
    text = "My final verdict is [[A>B]]"
    assert parse_reply("arena-hard-v1", text, finish) == parse_reply("arena-hard-v1", text)
    assert parse_reply("arena-hard-v1", text, finish).label == "Left"


@pytest.mark.parametrize(
    ("note", "reason"),
    [
        ("conflicting verdict labels [[A>B]], [[B>A]]", "conflicting verdict labels"),
        ("verdict label [[A<B]] is not one of the template's labels",
         "verdict label is not one of the template's labels"),
        ("truncated: the reply was cut by the token limit (finish_reason 'length')", "truncated"),
        ("reply has words besides the verdict 'output (a)' (contract: only it)",
         "reply has words besides the verdict"),
        ("empty reply", "empty reply"),
        (None, "no note"),
    ],
)  # fmt: skip
def test_note_reason_drops_what_a_note_quotes(note: str | None, reason: str) -> None:
    assert note_reason(note) == reason
