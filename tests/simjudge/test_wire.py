"""The simulated judge's prompt digest: the same text whatever dialect carried it."""

from __future__ import annotations

from simjudge.wire import messages_digest
from tasks.prompts.templates import render

PROMPT = render("arena-hard-v1", question="What is 2+2?", left="4", right="5")


def test_a_prompt_digests_the_same_in_either_dialect() -> None:
    system, user = PROMPT.messages
    chat = {"model": "m", "messages": [system, user], "seed": 3}
    blocks = [{"type": "text", "text": user["content"]}]
    messages = {"model": "m", "system": system["content"], "messages": [{"role": "user",
                "content": blocks}], "max_tokens": 9}  # fmt: skip
    digest = messages_digest(chat)
    assert digest is not None and digest == messages_digest(messages)
    changed = {**chat, "messages": [system, {**user, "content": user["content"] + " "}]}
    assert messages_digest(changed) != digest
    assert messages_digest({"model": "m"}) is None and messages_digest([1]) is None
