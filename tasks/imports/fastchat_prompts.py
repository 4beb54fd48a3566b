"""FastChat pairwise judgments' stored prompts -> the question and the two answers they showed.

`fastchat/llm_judge/common.py` (`run_judge_pair`) stores the user prompt of each game
(`g1_user_prompt`, `g2_user_prompt`) rendered from `judge_prompts.jsonl`: `pair-v2` and
`pair-math-v1` for turn 1 (`[User Question]`, an optional reference answer, then the
Assistant A and B answers between their markers), `pair-v2-multi-turn` and
`pair-math-v1-multi-turn` for turn 2 (an optional reference conversation, then each
assistant's whole conversation between its markers). Anthropic judges get the system prompt
in front (`[Instruction]\\n<system prompt>\\n\\n`). The texts come out as the side files would
give them (`fastchat._conversation`), so both ways make the same pairs.
"""

from __future__ import annotations

from pathlib import Path

from tasks.errors import InputError

__all__ = ["conversation", "prompt_texts"]

_INSTRUCTION = "[Instruction]\n"
_QUESTION = "[User Question]\n"
_REFERENCE_END = "\n[The End of Reference Answer]\n\n"
_ANSWER = "[The {} of Assistant {}'s Answer]"
_SINGLE_MARKERS = tuple(_ANSWER.format(e, s) for s in "AB" for e in ("Start", "End"))
_SINGLE = (
    "[The Start of Assistant A's Answer]\n",
    "\n[The End of Assistant A's Answer]\n\n[The Start of Assistant B's Answer]\n",
    "\n[The End of Assistant B's Answer]",
)
_CONVERSATION = "<|The {} of Assistant {}'s Conversation with User|>"
_MULTI_MARKERS = tuple(_CONVERSATION.format(e, s) for s in "AB" for e in ("Start", "End"))
_MULTI_START = _CONVERSATION.format("Start", "A") + "\n\n"
_MULTI_MIDDLE = (
    "\n\n" + _CONVERSATION.format("End", "A") + "\n\n\n" + _CONVERSATION.format("Start", "B")
    + "\n\n"
)  # fmt: skip
_MULTI_END = "\n\n" + _CONVERSATION.format("End", "B")
_USER = "### User:\n"


class _Unreadable(ValueError):
    """A stored prompt not laid out as FastChat renders it (the message says how)."""


def _body(prompt: str, start: str) -> str:
    """The rendered template: the prompt from `start` on, after an Anthropic system prefix."""
    if prompt.startswith(start):
        return prompt
    at = prompt.find("\n\n" + start)
    if not prompt.startswith(_INSTRUCTION) or at < 0:
        raise _Unreadable(f"does not start with {start.strip()!r} (nor an [Instruction] prefix)")
    return prompt[at + 2 :]


def _once(text: str, markers: tuple[str, ...]) -> None:
    for marker in markers:
        if marker not in text:
            raise _Unreadable(f"has no {marker!r}: it is not laid out as FastChat renders it")
        if text.count(marker) != 1:
            raise _Unreadable(
                f"the marker {marker!r} must appear once (an answer that quotes a marker "
                "makes the slots a guess)"
            )


def _single(prompt: str) -> tuple[str, str, str]:
    """(question, slot A answer, slot B answer) of a turn-1 prompt."""
    body = _body(prompt, _QUESTION)
    _once(body, _SINGLE_MARKERS)
    if not body.endswith(_SINGLE[2]):
        raise _Unreadable("does not end with the Assistant B answer's end marker")
    head, _, rest = body[len(_QUESTION) : -len(_SINGLE[2])].partition("\n\n" + _SINGLE[0])
    left, _, right = rest.partition(_SINGLE[1])
    if not rest or _SINGLE[1] not in rest:
        raise _Unreadable("the answer markers are not laid out as FastChat renders them")
    question = head.split("\n\n[The Start of Reference Answer]\n", 1)[0]
    if head != question and not head.endswith(_REFERENCE_END.rstrip("\n")):
        raise _Unreadable("the reference answer is not laid out as FastChat renders it")
    return question, left, right


def _turns(conversation: str, slot: str) -> tuple[list[str], list[str]]:
    """([question 1, question 2], [answer 1, answer 2]) of one assistant's conversation."""
    assistant = f"\n\n### Assistant {slot}:\n"
    if conversation.count(_USER) != 2 or conversation.count(assistant) != 2:
        raise _Unreadable(
            f"Assistant {slot}'s conversation must hold '### User:' and '### Assistant {slot}:' "
            "twice each (an answer that quotes them makes the turns a guess)"
        )
    if not conversation.startswith(_USER):
        raise _Unreadable(f"Assistant {slot}'s conversation does not start with '### User:'")
    q1, _, rest = conversation[len(_USER) :].partition(assistant)
    a1, _, rest = rest.partition("\n\n" + _USER)
    q2, _, a2 = rest.partition(assistant)
    return [q1, q2], [a1, a2]


def _multi(prompt: str) -> tuple[list[str], list[str], list[str]]:
    """(questions, slot A answers, slot B answers) of a turn-2 prompt."""
    start = prompt.find(_MULTI_START)
    if start < 0 or not prompt.endswith(_MULTI_END):
        raise _Unreadable("the conversation markers are not laid out as FastChat renders them")
    _once(prompt, _MULTI_MARKERS)
    left, _, right = prompt[start + len(_MULTI_START) : -len(_MULTI_END)].partition(_MULTI_MIDDLE)
    questions, answers_left = _turns(left, "A")
    others, answers_right = _turns(right, "B")
    if questions != others:
        raise _Unreadable("the two conversations do not ask the same questions")
    return questions, answers_left, answers_right


def conversation(questions: list[str], answers: list[str], turn: int) -> str:
    """A model's answer at `turn` as judgeline keeps it: turn 1 the first answer, turn 2 the
    whole conversation up to that turn (as FastChat's multi-turn prompt shows it)."""
    if turn == 1:
        return answers[0]
    parts = [
        f"### User:\n{q}\n\n### Assistant:\n{a}"
        for q, a in zip(questions[:turn], answers[:turn], strict=True)
    ]
    return "\n\n".join(parts)


def _slots(prompt: str, turn: int) -> tuple[str, str, str]:
    if turn == 1:
        return _single(prompt)
    questions, left, right = _multi(prompt)
    return questions[1], conversation(questions, left, 2), conversation(questions, right, 2)


def prompt_texts(
    g1: object, g2: object, turn: int, *, path: Path, row: int
) -> tuple[str, str, str]:
    """(question, model_1's answer, model_2's answer) from a line's two stored prompts: g1
    showed model_1 as Assistant A, g2 showed model_2 as Assistant A."""
    seen = []
    for game, prompt in (("g1", g1), ("g2", g2)):
        if not isinstance(prompt, str):
            raise InputError(
                f"field '{game}_user_prompt' holds no prompt text, and the question and answers "
                "are only there: give the question file with --questions and the model answers "
                "with --answers-dir",
                file=str(path),
                row=row,
            )
        try:
            question, left, right = _slots(prompt, turn)
        except _Unreadable as exc:
            raise InputError(
                f"field '{game}_user_prompt' {exc}; or give the texts with --questions and "
                "--answers-dir",
                file=str(path),
                row=row,
            ) from None
        seen.append((question, left, right) if game == "g1" else (question, right, left))
    if seen[0] != seen[1]:
        raise InputError(
            "g1_user_prompt and g2_user_prompt do not show the same question and the same two "
            "answers in swapped places",
            file=str(path),
            row=row,
        )
    return seen[0]
