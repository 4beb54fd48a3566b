"""Versioned judge prompt templates: rendering a presentation into messages, and back.

A template names the two answers by *slot* only (first/left, second/right), never by
identity or model. Rendering places each answer's text exactly as given (no strip, no
normalisation) and records the SHA-256 of the text placed in each slot. Placeholders are
`{{question}}`, `{{reference}}`, `{{left}}`, `{{right}}`; templates are split at them once,
so rendering is a join of literal segments and never re-reads the substituted text
(answers full of `{}` or even `{{left}}` are placed verbatim).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from schemas.vocabulary import SlotLabel, Strength
from tasks.errors import InputError
from tasks.hashing import canonical_json, sha256_text

__all__ = [
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

_PLACEHOLDER = re.compile(r"\{\{(question|reference|left|right)\}\}")
_FIELDS_PLAIN = ("question", "left", "right")
_FIELDS_REFERENCE = ("question", "reference", "left", "right")


def _compile(text: str, fields: tuple[str, ...], where: str) -> tuple[tuple[str, ...], int]:
    """Split a template text into literal segments around its placeholders, checked."""
    names = _PLACEHOLDER.findall(text)
    if tuple(names) != fields:
        raise ValueError(f"{where}: placeholders {names} must be exactly {list(fields)}")
    literals = tuple(_PLACEHOLDER.split(text)[0::2])
    return literals, len(fields)


@dataclass(frozen=True)
class Template:
    """One versioned judge prompt. Any change of text is a new `template_id`.

    `user` is used without a reference, `user_with_reference` when one is given; both,
    and the system text, enter `template_hash`.
    """

    template_id: str
    system: str
    user: str
    user_with_reference: str
    description: str = ""
    _plain: tuple[str, ...] = field(init=False, repr=False, compare=False)
    _with_ref: tuple[str, ...] = field(init=False, repr=False, compare=False)
    _hash: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        plain, _ = _compile(self.user, _FIELDS_PLAIN, f"{self.template_id}.user")
        with_ref, _ = _compile(
            self.user_with_reference, _FIELDS_REFERENCE, f"{self.template_id}.user_with_reference"
        )
        if _PLACEHOLDER.search(self.system):
            raise ValueError(f"{self.template_id}: the system text takes no placeholders")
        object.__setattr__(self, "_plain", plain)
        object.__setattr__(self, "_with_ref", with_ref)
        texts = {
            "template_id": self.template_id,
            "system": self.system,
            "user": self.user,
            "user_with_reference": self.user_with_reference,
        }
        object.__setattr__(self, "_hash", sha256_text(canonical_json(texts)))

    @property
    def template_hash(self) -> str:
        """SHA-256 of the template id and every text of the template."""
        return self._hash


@dataclass(frozen=True)
class RenderedPrompt:
    """The messages sent for one presentation, with the hashes of the slot texts."""

    template_id: str
    template_hash: str
    messages: tuple[dict[str, str], ...]
    left_sha256: str
    right_sha256: str


_ARENA_SYSTEM = (
    "Please act as an impartial judge and evaluate the quality of the responses provided by "
    "two AI assistants to the user prompt displayed below. You will be given assistant A's "
    "answer and assistant B's answer. Your job is to evaluate which assistant's answer is "
    "better. Assistant A is simply the answer shown first and Assistant B the answer shown "
    "second; the letters say nothing else about them.\n\n"
    "Begin your evaluation by generating your own answer to the prompt. You must provide your "
    "answers before judging any answers.\n\n"
    "When evaluating the assistants' answers, compare both assistants' answers with your "
    "answer. You must identify and correct any mistakes or inaccurate information.\n\n"
    "Then consider if the assistant's answers are helpful, relevant, and concise. Helpful "
    "means the answer correctly responds to the prompt or follows the instructions. Note when "
    "user prompt has any ambiguity or more than one interpretation, it is more helpful and "
    "appropriate to ask for clarifications or more information from the user than providing "
    "an answer based on assumptions. Relevant means all parts of the response closely connect "
    "or are appropriate to what is being asked. Concise means the response is clear and not "
    "verbose or excessive.\n\n"
    "Then consider the creativity and novelty of the assistant's answers when needed. "
    "Finally, identify any missing important information in the assistants' answers that "
    "would be beneficial to include when responding to the user prompt.\n\n"
    "After providing your explanation, you must output only one of the following choices as "
    "your final verdict with a label:\n\n"
    "1. Assistant A is significantly better: [[A>>B]]\n"
    "2. Assistant A is slightly better: [[A>B]]\n"
    "3. Tie, relatively the same: [[A=B]]\n"
    "4. Assistant B is slightly better: [[B>A]]\n"
    "5. Assistant B is significantly better: [[B>>A]]\n"
    "6. You cannot judge the answers at all: [[ABSTAIN]]\n\n"
    'Example output: "My final verdict is tie: [[A=B]]".\n\n'
    "Output contract: the reply must contain exactly one of these six labels (it may be "
    "repeated, but two different labels make the reply invalid); a label in a fenced code "
    "block, or after the word 'example' on its line, is read as an example, not a verdict."
)
_ARENA_ANSWERS = (
    "<|The Start of Assistant A's Answer|>\n{{left}}\n<|The End of Assistant A's Answer|>\n\n"
    "<|The Start of Assistant B's Answer|>\n{{right}}\n<|The End of Assistant B's Answer|>"
)

_VANILLA_SYSTEM = (
    "You are a helpful assistant in evaluating the quality of the outputs for a given "
    "instruction. Your goal is to select the best output for the given instruction."
)
_VANILLA_RULES = (
    "Select the Output (a) or Output (b) that is better for the given instruction. The two "
    "outputs are generated by two different AI chatbots respectively. Output (a) is simply "
    "the output shown first and Output (b) the output shown second.\n\n"
    "Do NOT provide any explanation for your choice.\n"
    'You should answer using ONLY "Output (a)" or "Output (b)". Only if the two outputs '
    'are exactly equally good, answer "Tie"; only if you cannot judge them at all, answer '
    '"Abstain". Do NOT output any other words.\n\n'
    "Output contract: the whole reply, ignoring surrounding whitespace, bold markers, quotes, "
    'a trailing period and letter case, must be exactly "Output (a)", "Output (b)", "Tie" '
    'or "Abstain"; anything else is an invalid reply.\n\n'
)
_VANILLA_ANSWERS = (
    "# Output (a):\n{{left}}\n\n# Output (b):\n{{right}}\n\n"
    '# Which is better, Output (a) or Output (b)? Your response should be either "Output (a)" '
    'or "Output (b)" (or "Tie" / "Abstain" as described above):'
)

_FASTCHAT_SYSTEM = (
    "Please act as an impartial judge and evaluate the quality of the responses provided by "
    "two AI assistants to the user question displayed below. You should choose the assistant "
    "that follows the user's instructions and answers the user's question better. Your "
    "evaluation should consider factors such as the helpfulness, relevance, accuracy, depth, "
    "creativity, and level of detail of their responses. Begin your evaluation by comparing "
    "the two responses and provide a short explanation. Avoid any position biases and ensure "
    "that the order in which the responses were presented does not influence your decision. "
    "Do not allow the length of the responses to influence your evaluation. Do not favor "
    "certain names of the assistants. Be as objective as possible. Assistant A is simply the "
    "answer shown first and Assistant B the answer shown second. After providing your "
    'explanation, output your final verdict by strictly following this format: "[[A]]" if '
    'assistant A is better, "[[B]]" if assistant B is better, and "[[C]]" for a tie '
    '("[[ABSTAIN]]" only if you cannot judge them at all).\n\n'
    "Output contract: the reply must contain exactly one of these four labels (it may be "
    "repeated, but two different labels make the reply invalid); a label in a fenced code "
    "block, or after the word 'example' on its line, is read as an example, not a verdict."
)
_FASTCHAT_ANSWERS = (
    "[The Start of Assistant A's Answer]\n{{left}}\n[The End of Assistant A's Answer]\n\n"
    "[The Start of Assistant B's Answer]\n{{right}}\n[The End of Assistant B's Answer]"
)

_JSON_SYSTEM = (
    "You are an impartial judge comparing two answers to the same question. The answers are "
    "named only by where they are shown: the LEFT answer is shown first, the RIGHT answer "
    "second.\n\n"
    "Reply with only one JSON object and nothing else (no prose, no code fence):\n"
    '{"verdict": "left" | "right" | "tie" | "abstain", "strength": "strong" | "weak" | null, '
    '"reason": "<one or two sentences>"}\n\n'
    "Output contract: `verdict` is required and is one of the four lower-case strings; "
    '`strength` is "strong" or "weak" for left/right and null (or absent) for tie/abstain; '
    "`reason` is a string or null; no other keys and no repeated keys. Anything else is an "
    "invalid reply."
)
_JSON_ANSWERS = (
    "=== LEFT ANSWER (begin) ===\n{{left}}\n=== LEFT ANSWER (end) ===\n\n"
    "=== RIGHT ANSWER (begin) ===\n{{right}}\n=== RIGHT ANSWER (end) ===\n\n"
    "Reply with the JSON object only."
)


def _build_templates() -> dict[str, Template]:
    templates = [
        Template(
            template_id="arena-hard-v1",
            system=_ARENA_SYSTEM,
            user="<|User Prompt|>\n{{question}}\n\n" + _ARENA_ANSWERS,
            user_with_reference=(
                "<|User Prompt|>\n{{question}}\n\n"
                "<|Reference Answer|>\n{{reference}}\n<|End of Reference Answer|>\n\n"
                + _ARENA_ANSWERS
            ),
            description="Arena-Hard pairwise prompt; final verdict [[A>>B]]..[[B>>A]] by slot.",
        ),
        Template(
            template_id="judgebench-vanilla-v1",
            system=_VANILLA_SYSTEM,
            user=_VANILLA_RULES + "# Instruction:\n{{question}}\n\n" + _VANILLA_ANSWERS,
            user_with_reference=(
                _VANILLA_RULES
                + "# Instruction:\n{{question}}\n\n# Reference or rubric:\n{{reference}}\n\n"
                + _VANILLA_ANSWERS
            ),
            description='JudgeBench vanilla prompt; reply is only "Output (a)"/"Output (b)".',
        ),
        Template(
            template_id="fastchat-pair-v2",
            system=_FASTCHAT_SYSTEM,
            user="[User Question]\n{{question}}\n\n" + _FASTCHAT_ANSWERS,
            user_with_reference=(
                "[User Question]\n{{question}}\n\n[The Start of Reference Answer]\n"
                "{{reference}}\n[The End of Reference Answer]\n\n" + _FASTCHAT_ANSWERS
            ),
            description="FastChat MT-Bench pairwise prompt; final verdict [[A]]/[[B]]/[[C]].",
        ),
        Template(
            template_id="json-strict-v1",
            system=_JSON_SYSTEM,
            user="=== QUESTION ===\n{{question}}\n\n" + _JSON_ANSWERS,
            user_with_reference=(
                "=== QUESTION ===\n{{question}}\n\n"
                "=== REFERENCE OR RUBRIC ===\n{{reference}}\n\n" + _JSON_ANSWERS
            ),
            description="Reply is only a JSON object with verdict left/right/tie/abstain.",
        ),
    ]
    return {t.template_id: t for t in templates}


TEMPLATES: Mapping[str, Template] = _build_templates()
DEFAULT_TEMPLATE = "arena-hard-v1"
_BY_SYSTEM: dict[str, str] = {t.system: t.template_id for t in TEMPLATES.values()}


def get_template(template_id: str) -> Template:
    """The template with this id; an unknown id is an InputError listing the known ones."""
    try:
        return TEMPLATES[template_id]
    except KeyError:
        known = ", ".join(sorted(TEMPLATES))
        raise InputError(f"unknown template {template_id!r}; known templates: {known}") from None


def render(
    template_id: str, *, question: str, left: str, right: str, reference: str | None = None
) -> RenderedPrompt:
    """Messages for one presentation: `left` is shown first, `right` second, verbatim."""
    template = get_template(template_id)
    if reference is None:
        lit = template._plain
        user = lit[0] + question + lit[1] + left + lit[2] + right + lit[3]
    else:
        lit = template._with_ref
        user = lit[0] + question + lit[1] + reference + lit[2] + left + lit[3] + right + lit[4]
    return RenderedPrompt(
        template_id=template_id,
        template_hash=template._hash,
        messages=(
            {"role": "system", "content": template.system},
            {"role": "user", "content": user},
        ),
        left_sha256=sha256_text(left),
        right_sha256=sha256_text(right),
    )


def message_text(content: Any) -> str | None:
    """A message's text: a string, or the concatenated text parts of a content list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if not isinstance(part, Mapping) or part.get("type") != "text":
                return None
            text = part.get("text")
            if not isinstance(text, str):
                return None
            parts.append(text)
        return "".join(parts)
    return None


def identify_template(messages: Sequence[Mapping[str, Any]]) -> str | None:
    """The template whose system text the first message carries exactly, if any."""
    if not messages or messages[0].get("role") != "system":
        return None
    system = message_text(messages[0].get("content"))
    return _BY_SYSTEM.get(system) if system is not None else None


def _splits(text: str, literals: tuple[str, ...], limit: int = 2) -> list[list[str]]:
    """Every way (up to `limit`) to read `text` as literals interleaved with field values."""
    first, last = literals[0], literals[-1]
    end = len(text) - len(last)
    if end < len(first) or not text.startswith(first) or not text.endswith(last):
        return []
    found: list[list[str]] = []

    def walk(pos: int, index: int, values: list[str]) -> None:
        if len(found) >= limit:
            return
        if index == len(literals) - 1:
            found.append([*values, text[pos:end]])
            return
        literal = literals[index]
        at = text.find(literal, pos, end)
        while at != -1 and len(found) < limit:
            walk(at + len(literal), index + 1, [*values, text[pos:at]])
            at = text.find(literal, at + 1, end)

    walk(len(first), 1, [])
    return found


def slot_texts(messages: Sequence[Mapping[str, Any]]) -> tuple[str, str, str] | None:
    """(template_id, left, right) recovered exactly from rendered messages, else None.

    None when no template's markers match, or when answer text repeats a marker so that
    more than one reading is possible (the slots would be a guess).
    """
    template_id = identify_template(messages)
    if template_id is None or len(messages) != 2 or messages[1].get("role") != "user":
        return None
    user = message_text(messages[1].get("content"))
    if user is None:
        return None
    template = TEMPLATES[template_id]
    # A question quoting the reference marker reads both with and without a reference;
    # that is harmless as long as every reading puts the same texts in the slots.
    readings = {(v[1], v[2]) for v in _splits(user, template._plain)}
    readings |= {(v[2], v[3]) for v in _splits(user, template._with_ref)}
    if len(readings) != 1:
        return None
    left, right = readings.pop()
    return template_id, left, right


_ARENA_LABELS: dict[tuple[str, str | None], str] = {
    ("Left", "strong"): "Assistant A is significantly better: [[A>>B]]",
    ("Left", "weak"): "Assistant A is slightly better: [[A>B]]",
    ("Tie", None): "tie: [[A=B]]",
    ("Right", "weak"): "Assistant B is slightly better: [[B>A]]",
    ("Right", "strong"): "Assistant B is significantly better: [[B>>A]]",
    ("Abstain", None): "that I cannot judge these answers: [[ABSTAIN]]",
}
_FASTCHAT_LABELS = {"Left": "[[A]]", "Right": "[[B]]", "Tie": "[[C]]", "Abstain": "[[ABSTAIN]]"}
_VANILLA_LABELS = {"Left": "Output (a)", "Right": "Output (b)", "Tie": "Tie", "Abstain": "Abstain"}


def format_verdict(
    template_id: str, label: SlotLabel, strength: Strength | None, rationale: str
) -> str:
    """A reply in the template's verdict format; `parse_reply` reads it back as `label`.

    Decisive labels without a strength are written as weak where the format has strength
    (the vanilla and FastChat formats have none). The vanilla format drops the rationale.
    """
    get_template(template_id)
    if label == "Invalid":
        raise ValueError("Invalid is not a verdict; an invalid reply is any text off contract")
    decisive = label in ("Left", "Right")
    if template_id == "arena-hard-v1":
        key = (label, (strength or "weak") if decisive else None)
        return f"{rationale}\n\nMy final verdict is {_ARENA_LABELS[key]}"
    if template_id == "judgebench-vanilla-v1":
        return _VANILLA_LABELS[label]
    if template_id == "fastchat-pair-v2":
        return f"{rationale}\n\nMy final verdict: {_FASTCHAT_LABELS[label]}"
    if template_id == "json-strict-v1":
        reply = {
            "verdict": label.lower(),
            "strength": (strength or "weak") if decisive else None,
            "reason": rationale,
        }
        return json.dumps(reply, ensure_ascii=False)
    raise ValueError(f"no verdict format for template {template_id!r}")
