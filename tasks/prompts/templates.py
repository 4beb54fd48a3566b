"""Versioned judge prompt templates: rendering a presentation into messages, and back.

A template names the two answers by *slot* only (first/left, second/right), never by
identity or model. Rendering places each answer's text exactly as given (no strip, no
normalisation) and records the SHA-256 of the text placed in each slot. Placeholders are
`{{question}}`, `{{reference}}`, `{{left}}`, `{{right}}`; templates are split at them once,
so rendering is a join of literal segments and never re-reads the substituted text
(answers full of `{}` or even `{{left}}` are placed verbatim). The built-in templates'
texts are in `tasks.prompts.texts`.
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
from tasks.prompts.texts import ARENA_LABELS, BUILT_IN, FASTCHAT_LABELS, VANILLA_LABELS

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


TEMPLATES: Mapping[str, Template] = {texts["template_id"]: Template(**texts) for texts in BUILT_IN}
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
        return f"{rationale}\n\nMy final verdict is {ARENA_LABELS[key]}"
    if template_id == "judgebench-vanilla-v1":
        return VANILLA_LABELS[label]
    if template_id == "fastchat-pair-v2":
        return f"{rationale}\n\nMy final verdict: {FASTCHAT_LABELS[label]}"
    if template_id == "json-strict-v1":
        reply = {
            "verdict": label.lower(),
            "strength": (strength or "weak") if decisive else None,
            "reason": rationale,
        }
        return json.dumps(reply, ensure_ascii=False)
    raise ValueError(f"no verdict format for template {template_id!r}")
