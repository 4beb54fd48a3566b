"""Templates: exact slot texts, hashes, no identities, recovery of slots, verdict formats."""

from __future__ import annotations

import hashlib
import time
from typing import Any

import pytest

from tasks.errors import InputError
from tasks.prompts import templates
from tasks.prompts.parsing import parse_reply
from tasks.prompts.templates import (
    DEFAULT_TEMPLATE,
    TEMPLATES,
    format_verdict,
    get_template,
    identify_template,
    render,
    slot_texts,
)

TRICKY_LEFT = "def f():\r\n    return {'a': {}}   \r\n\u00e9\u00e8 \u4e2d\u6587 \U0001f600  \n\n"
TRICKY_RIGHT = "  leading spaces, {0} {name} {{left}} and {{right}}\ttab\r\n"


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def test_public_surface_is_pinned() -> None:
    assert sorted(templates.__all__) == sorted(
        [
            "DEFAULT_TEMPLATE",
            "TEMPLATES",
            "RenderedPrompt",
            "Template",
            "format_verdict",
            "get_template",
            "identify_template",
            "message_text",
            "render",
            "slot_texts",
        ]
    )


def test_required_templates_exist_and_hashes_differ() -> None:
    assert {"arena-hard-v1", "judgebench-vanilla-v1", "json-strict-v1"} <= set(TEMPLATES)
    assert DEFAULT_TEMPLATE == "arena-hard-v1"
    hashes = {t.template_hash for t in TEMPLATES.values()}
    assert len(hashes) == len(TEMPLATES)
    assert all(len(h) == 64 for h in hashes)


def test_template_hash_changes_with_any_text() -> None:
    base = get_template("arena-hard-v1")
    edited = templates.Template(
        template_id=base.template_id,
        system=base.system + " ",
        user=base.user,
        user_with_reference=base.user_with_reference,
    )
    assert edited.template_hash != base.template_hash
    same = templates.Template(
        template_id=base.template_id,
        system=base.system,
        user=base.user,
        user_with_reference=base.user_with_reference,
    )
    assert same.template_hash == base.template_hash


def test_unknown_template_lists_known_ids() -> None:
    with pytest.raises(InputError) as caught:
        get_template("arena-hard-v9")
    message = str(caught.value)
    assert "arena-hard-v9" in message
    for known in TEMPLATES:
        assert known in message
    with pytest.raises(InputError):
        render("nope", question="q", left="l", right="r")


def test_bad_template_text_is_refused() -> None:
    with pytest.raises(ValueError, match="placeholders"):
        templates.Template("t", "sys", "{{left}} {{question}} {{right}}", "x")


@pytest.mark.parametrize("template_id", sorted(TEMPLATES))
@pytest.mark.parametrize("reference", [None, "Reference with {braces}\r\n  "])
def test_render_places_answers_exactly(template_id: str, reference: str | None) -> None:
    question = "Compute {x} for \u00fc\u00df?  \r\n"
    prompt = render(
        template_id, question=question, left=TRICKY_LEFT, right=TRICKY_RIGHT, reference=reference
    )
    assert prompt.template_id == template_id
    assert prompt.template_hash == TEMPLATES[template_id].template_hash
    assert [m["role"] for m in prompt.messages] == ["system", "user"]
    user = prompt.messages[1]["content"]
    assert TRICKY_LEFT in user and TRICKY_RIGHT in user and question in user
    assert user.index(TRICKY_LEFT) < user.index(TRICKY_RIGHT)
    assert (reference in user) if reference is not None else True
    assert prompt.left_sha256 == sha(TRICKY_LEFT)
    assert prompt.right_sha256 == sha(TRICKY_RIGHT)
    # Placeholders inside answers are never expanded a second time.
    assert user.count("{{left}}") == 1
    assert slot_texts(prompt.messages) == (template_id, TRICKY_LEFT, TRICKY_RIGHT)


@pytest.mark.parametrize("template_id", sorted(TEMPLATES))
def test_swapped_render_swaps_only_the_slots(template_id: str) -> None:
    ab = render(template_id, question="q", left="alpha", right="beta")
    ba = render(template_id, question="q", left="beta", right="alpha")
    assert (ab.left_sha256, ab.right_sha256) == (ba.right_sha256, ba.left_sha256)
    assert ab.messages[0] == ba.messages[0]
    assert slot_texts(ba.messages) == (template_id, "beta", "alpha")


@pytest.mark.parametrize("template_id", sorted(TEMPLATES))
def test_templates_never_name_identities_or_models(template_id: str) -> None:
    template = TEMPLATES[template_id]
    text = template.system + template.user + template.user_with_reference
    for word in ("identity", "gpt", "claude", "model A", "Answer A ", "response_A"):
        assert word.lower() not in text.lower()


def test_slot_texts_refuses_what_it_cannot_read_exactly() -> None:
    prompt = render("arena-hard-v1", question="q", left="x", right="y")
    assert slot_texts([{"role": "user", "content": "hello"}]) is None
    assert slot_texts([prompt.messages[0], {"role": "user", "content": "no markers"}]) is None
    assert slot_texts([{"role": "system", "content": "other"}, prompt.messages[1]]) is None
    assert identify_template(prompt.messages) == "arena-hard-v1"
    # An answer that repeats the slot separator has two readings: refuse rather than guess.
    marker = "\n<|The End of Assistant A's Answer|>\n\n<|The Start of Assistant B's Answer|>\n"
    ambiguous = render("arena-hard-v1", question="q", left="a" + marker + "b", right="c")
    assert slot_texts(ambiguous.messages) is None
    # Content given as a list of text parts (OpenAI/Anthropic blocks) reads the same.
    parts: list[dict[str, Any]] = [
        dict(prompt.messages[0]),
        {"role": "user", "content": [{"type": "text", "text": prompt.messages[1]["content"]}]},
    ]
    assert slot_texts(parts) == ("arena-hard-v1", "x", "y")


@pytest.mark.parametrize("template_id", sorted(TEMPLATES))
def test_format_verdict_round_trips_through_the_parser(template_id: str) -> None:
    rationale = 'The first answer cites the rule; the "second" one {does not}.'
    cases = [
        ("Left", "strong"),
        ("Left", "weak"),
        ("Right", "strong"),
        ("Right", "weak"),
        ("Tie", None),
        ("Abstain", None),
    ]
    for label, strength in cases:
        reply = format_verdict(template_id, label, strength, rationale)  # type: ignore[arg-type]
        parsed = parse_reply(template_id, reply)
        assert parsed.label == label, (template_id, label, reply)
        if template_id in ("judgebench-vanilla-v1", "fastchat-pair-v2"):
            assert parsed.strength is None
        else:
            assert parsed.strength == strength
    with pytest.raises(ValueError):
        format_verdict(template_id, "Invalid", None, "x")


def test_render_is_fast() -> None:
    left, right, question = "x" * 2000, "y{}" * 700, "q" * 500
    start = time.perf_counter()
    for _ in range(20_000):
        render("arena-hard-v1", question=question, left=left, right=right)
    elapsed = time.perf_counter() - start
    # 100,000 renders must take well under a few seconds; 20,000 here gets a fifth of it.
    assert elapsed < 1.0, f"20,000 renders took {elapsed:.2f}s"
