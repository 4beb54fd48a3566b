"""Structured verdicts: a template's verdict labels as a JSON schema the judge must follow.

A judge with `verdict: json` is sent the schema of its template (`verdict_schema`): an object
with a free-text `reasoning` first (so the judge still reasons before it decides) and a
`verdict` drawn from the template's own labels, nothing else. Each API carries it its own
way (`response_format` for chat completions, `text.format` for the Responses API,
`output_config.format` for the Messages API; `format_field`). The reply is that JSON object;
`parse_structured` reads it back to a slot label, and a reply that does not validate is
Invalid with a note (its text is stored as for any reply). A refusal is not a reply at all
(a `refused` failure, `tasks.judging.providers`).
"""

from __future__ import annotations

import json
from typing import Any

from schemas.vocabulary import SlotLabel, Strength
from tasks.prompts.templates import get_template

__all__ = [
    "SCHEMA_NAME",
    "VERDICT_LABELS",
    "format_field",
    "is_structured",
    "parse_structured",
    "structured_reply",
    "verdict_schema",
]

SCHEMA_NAME = "judge_verdict"
"""The schema's name (OpenAI requires one; `a-zA-Z0-9_-`)."""

_STRUCTURED_KEYS = ("reasoning", "verdict")

VERDICT_LABELS: dict[str, dict[str, tuple[SlotLabel, Strength | None]]] = {
    "arena-hard-v1": {
        "A>>B": ("Left", "strong"),
        "A>B": ("Left", "weak"),
        "A=B": ("Tie", None),
        "B>A": ("Right", "weak"),
        "B>>A": ("Right", "strong"),
        "ABSTAIN": ("Abstain", None),
    },
    "fastchat-pair-v2": {
        "A": ("Left", None),
        "B": ("Right", None),
        "C": ("Tie", None),
        "ABSTAIN": ("Abstain", None),
    },
    "judgebench-vanilla-v1": {
        "Output (a)": ("Left", None),
        "Output (b)": ("Right", None),
        "Tie": ("Tie", None),
        "Abstain": ("Abstain", None),
    },
    "json-strict-v1": {
        "left": ("Left", None),
        "right": ("Right", None),
        "tie": ("Tie", None),
        "abstain": ("Abstain", None),
    },
}
"""Each template's verdict labels as its prompt names them (brackets dropped), and what each
means."""


def _labels(template_id: str) -> dict[str, tuple[SlotLabel, Strength | None]]:
    get_template(template_id)
    try:
        return VERDICT_LABELS[template_id]
    except KeyError:
        raise ValueError(f"template {template_id!r} has no structured verdict labels") from None


def verdict_schema(template_id: str) -> dict[str, Any]:
    """The JSON schema of a template's structured verdict (strict: every property required,
    nothing else allowed; `reasoning` comes before `verdict`)."""
    return {
        "type": "object",
        "properties": {
            "reasoning": {"type": "string"},
            "verdict": {"type": "string", "enum": list(_labels(template_id))},
        },
        "required": list(_STRUCTURED_KEYS),
        "additionalProperties": False,
    }


def format_field(api: str, template_id: str) -> tuple[str, dict[str, Any]]:
    """(body field, value) that asks `api` (`chat`, `responses`, `anthropic`) for the
    template's structured verdict."""
    schema = verdict_schema(template_id)
    if api == "chat":
        spec = {"name": SCHEMA_NAME, "strict": True, "schema": schema}
        return "response_format", {"type": "json_schema", "json_schema": spec}
    if api == "responses":
        fmt = {"type": "json_schema", "name": SCHEMA_NAME, "strict": True, "schema": schema}
        return "text", {"format": fmt}
    if api == "anthropic":
        return "output_config", {"format": {"type": "json_schema", "schema": schema}}
    raise ValueError(f"no structured-output field for API {api!r}")


def is_structured(text: str) -> bool:
    """Whether a reply is a structured verdict object (exactly `reasoning` and `verdict`)."""
    body = text.strip()
    if not (body.startswith("{") and body.endswith("}") and '"verdict"' in body):
        return False
    try:
        obj = json.loads(body)
    except json.JSONDecodeError:
        return False
    return isinstance(obj, dict) and sorted(obj) == sorted(_STRUCTURED_KEYS)


def parse_structured(template_id: str, text: str) -> tuple[SlotLabel, Strength | None, str | None]:
    """(label, strength, note) of a structured verdict; Invalid with a note when the text
    does not validate against `verdict_schema`."""
    labels = _labels(template_id)
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        return "Invalid", None, f"structured verdict is not valid JSON: {exc.msg} at char {exc.pos}"
    if not isinstance(obj, dict):
        return "Invalid", None, "structured verdict is not a JSON object"
    if sorted(obj) != sorted(_STRUCTURED_KEYS):
        return "Invalid", None, f"structured verdict keys {sorted(obj)} are not reasoning, verdict"
    if not isinstance(obj["reasoning"], str):
        return "Invalid", None, "structured verdict: reasoning is not a string"
    verdict = obj["verdict"]
    if not isinstance(verdict, str) or verdict not in labels:
        return "Invalid", None, f"structured verdict {verdict!r} is not a label of the template"
    label, strength = labels[verdict]
    return label, strength, None


def structured_reply(
    template_id: str, label: SlotLabel, strength: Strength | None, rationale: str
) -> str:
    """A structured verdict meaning `label` (decisive labels without a strength are weak where
    the template has strength)."""
    if label == "Invalid":
        raise ValueError("Invalid is not a verdict")
    decisive = label in ("Left", "Right")
    want = (label, (strength or "weak") if decisive else None)
    labels = _labels(template_id)
    name = next(
        (k for k, v in labels.items() if v == want),
        next(k for k, v in labels.items() if v[0] == label),
    )
    return json.dumps({"reasoning": rationale, "verdict": name}, ensure_ascii=False)
