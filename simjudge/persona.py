"""Simulated judge personas: what a persona prefers, how it errs, and which faults it injects.

Everything here is pure: a verdict and a fault are functions of the persona, a request
digest and (for faults) the attempt number, drawn from RNGs seeded by SHA-256.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field, model_validator

from schemas import ManifestRow, conform
from schemas.vocabulary import SlotLabel, Strength
from tasks.prompts.profiles import ACCEPTED_EFFORTS
from tasks.prompts.templates import (
    DEFAULT_TEMPLATE,
    format_verdict,
    identify_template,
    slot_texts,
)
from tasks.prompts.verdicts import structured_reply

__all__ = [
    "ACCEPTED_EFFORTS",
    "PRESETS",
    "STAND_IN",
    "FaultKind",
    "Faults",
    "Persona",
    "ReasoningShift",
    "Slot",
    "choose_fault",
    "invalid_reply",
    "latent_slot",
    "persona_file_text",
    "preferred_slot",
    "REFUSAL",
    "refuses",
    "rng_for",
    "simulate_reply",
]

Slot = Literal["Left", "Right"]
FaultKind = Literal[
    "rate_limited", "server_error", "stall", "malformed", "truncated", "overloaded", "quota"
]

# An accepted effort a persona does not configure acts like its nearest configured one.
_EFFORT_FALLBACK = {"none": "minimal", "minimal": "low", "max": "xhigh", "xhigh": "high"}


class Faults(BaseModel):
    """Fault-injection rates per attempt (their sum is at most 1) and their parameters."""

    model_config = ConfigDict(extra="forbid")

    rate_429: float = Field(default=0.0, ge=0, le=1, description="429 with Retry-After.")
    retry_after_s: int = Field(default=1, ge=0, description="Retry-After header value.")
    rate_5xx: float = Field(default=0.0, ge=0, le=1, description="500, 502 or 503.")
    rate_stall: float = Field(default=0.0, ge=0, le=1, description="Sleep before replying.")
    stall_s: float = Field(default=30.0, ge=0, description="How long a stall sleeps.")
    rate_malformed: float = Field(default=0.0, ge=0, le=1, description="200, body not JSON.")
    rate_truncated: float = Field(
        default=0.0, ge=0, le=1, description="Body cut short of its Content-Length."
    )
    rate_529: float = Field(
        default=0.0, ge=0, le=1,
        description="Overloaded: Anthropic 529 overloaded_error; OpenAI and Azure 503.",
    )  # fmt: skip
    rate_quota: float = Field(
        default=0.0, ge=0, le=1,
        description="Quota used up: OpenAI 429 insufficient_quota; Anthropic 400 credit balance.",
    )  # fmt: skip
    max_faults_per_request: int | None = Field(
        default=None, ge=0, description="At most this many faults per distinct request."
    )

    @model_validator(mode="after")
    def _rates_fit(self) -> Faults:
        if self.total() > 1 + 1e-9:
            raise ValueError(f"fault rates sum to {self.total():.3f} > 1")
        return self

    def total(self) -> float:
        return (
            self.rate_429 + self.rate_5xx + self.rate_stall + self.rate_malformed
            + self.rate_truncated + self.rate_529 + self.rate_quota
        )  # fmt: skip


class ReasoningShift(BaseModel):
    """How one `reasoning_effort` value moves a persona (added, then clipped to [0, 1])."""

    model_config = ConfigDict(extra="forbid")

    skill: float = 0.0
    left_bias: float = 0.0


def _default_reasoning() -> dict[str, ReasoningShift]:
    return {
        "low": ReasoningShift(skill=-0.05, left_bias=0.05),
        "medium": ReasoningShift(),
        "high": ReasoningShift(skill=0.05, left_bias=-0.1),
    }


class Persona(BaseModel):
    """A simulated judge, selected by the request's `model`.

    A reply is invalid with `invalid_rate`, else an abstention with `abstain_rate`, else a
    tie with `tie_rate`, else decisive: the left slot with probability `left_bias`
    whatever the content, otherwise the preferred (keyed) answer with probability `skill`.
    """

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    skill: float = Field(default=0.8, ge=0, le=1)
    left_bias: float = Field(default=0.0, ge=0, le=1)
    tie_rate: float = Field(default=0.0, ge=0, le=1)
    abstain_rate: float = Field(default=0.0, ge=0, le=1)
    invalid_rate: float = Field(default=0.0, ge=0, le=1)
    refusal_rate: float = Field(
        default=0.0, ge=0, le=1,
        description="Share of attempts refused (a refusal, not a verdict; drawn per attempt, "
        "so a request sent again may be answered).",
    )  # fmt: skip
    strong_rate: float = Field(default=0.5, ge=0, le=1, description="Share of `>>` verdicts.")
    latency_ms: float = Field(default=0.0, ge=0, description="Mean think time.")
    latency_jitter_ms: float = Field(default=0.0, ge=0, description="Uniform +- jitter.")
    reasoning: dict[str, ReasoningShift] = Field(default_factory=_default_reasoning)
    faults: Faults = Field(default_factory=Faults)
    cache_min_tokens: int | None = Field(
        default=None,
        ge=1,
        description="Shortest prompt its prompt cache keeps, in tokens (None: the API's 1,024; "
        "Anthropic's models take 512 to 4,096).",
    )
    cache_lifetime_s: float | None = Field(
        default=None,
        gt=0,
        description="Seconds an unused cache entry lives (None: OpenAI's 600, Anthropic's 300 "
        "or the request's ttl: 1h).",
    )

    @model_validator(mode="after")
    def _rates_fit(self) -> Persona:
        if self.tie_rate + self.abstain_rate + self.invalid_rate > 1 + 1e-9:
            raise ValueError("tie_rate + abstain_rate + invalid_rate must be at most 1")
        return self

    def shifted(self, effort: str | None) -> tuple[float, float]:
        """(skill, left_bias) under a reasoning effort; unknown efforts are a ValueError.

        An effort the API accepts but the persona does not configure falls back to the
        nearest configured one (`none` -> `minimal` -> `low`, `max` -> `xhigh` -> `high`), else
        leaves the persona as it is.
        """
        if effort is None:
            return self.skill, self.left_bias
        if effort not in self.reasoning and effort not in ACCEPTED_EFFORTS:
            known = sorted({*self.reasoning, *ACCEPTED_EFFORTS})
            raise ValueError(
                f"Invalid value: {effort!r}. Supported values are: "
                + ", ".join(repr(k) for k in known)
                + "."
            )
        nearest: str | None = effort
        while nearest is not None and nearest not in self.reasoning:
            nearest = _EFFORT_FALLBACK.get(nearest)
        if nearest is None:
            return self.skill, self.left_bias
        shift = self.reasoning[nearest]
        return (
            min(1.0, max(0.0, self.skill + shift.skill)),
            min(1.0, max(0.0, self.left_bias + shift.left_bias)),
        )


PRESETS: tuple[Persona, ...] = (
    Persona(name="strong", skill=0.9, left_bias=0.0, tie_rate=0.03),
    Persona(name="left-biased", skill=0.8, left_bias=0.6, tie_rate=0.03),
    Persona(
        name="noisy", skill=0.65, left_bias=0.05, tie_rate=0.15, abstain_rate=0.03,
        invalid_rate=0.12, strong_rate=0.3,
    ),
)  # fmt: skip


STAND_IN = PRESETS[0]
"""How a vendor's model name that no persona has answers (`strong`, under that name)."""


def rng_for(*parts: str) -> random.Random:
    """A Random seeded from the SHA-256 of the parts: the same parts, the same draws."""
    seed = hashlib.sha256("\x1f".join(parts).encode("utf-8")).digest()
    return random.Random(int.from_bytes(seed[:8], "big"))


def preferred_slot(
    messages: Sequence[Mapping[str, Any]], digest: str, key_of: Mapping[tuple[str, str], Any]
) -> tuple[str, Slot]:
    """(template id, slot holding the preferred answer) for the rendered messages: the keyed
    answer where `key_of` (`index_manifest`) knows the pair, else `latent_slot`."""
    found = slot_texts(messages)
    if found is None:
        template_id = identify_template(messages) or DEFAULT_TEMPLATE
        return template_id, ("Left" if int(digest[0], 16) % 2 == 0 else "Right")
    template_id, left, right = found
    left_sha = hashlib.sha256(left.encode("utf-8")).hexdigest()
    right_sha = hashlib.sha256(right.encode("utf-8")).hexdigest()
    keyed = key_of.get((left_sha, right_sha))
    if keyed is not None:
        return template_id, ("Left" if keyed == left_sha else "Right")
    return template_id, latent_slot(left_sha, right_sha)


def latent_slot(left_sha256: str, right_sha256: str) -> Slot:
    """A stable preference without a key: depends on the two answers, not on their order."""
    low, high = sorted((left_sha256, right_sha256))
    pick = hashlib.sha256(f"{low}:{high}".encode()).digest()[0] & 1
    preferred = (low, high)[pick]
    return "Left" if preferred == left_sha256 else "Right"


_REASONS = {
    "Left": (
        "The first answer is more accurate and addresses the question directly.",
        "The answer shown first follows the instructions; the second one misses a step.",
        "The first answer is correct where the second one makes an error.",
    ),
    "Right": (
        "The second answer is more accurate and addresses the question directly.",
        "The answer shown second follows the instructions; the first one misses a step.",
        "The second answer is correct where the first one makes an error.",
    ),
    "Tie": ("Both answers reach the same result with similar quality.",),
    "Abstain": ("I cannot verify either answer from the information given.",),
}


def invalid_reply(template_id: str, rng: random.Random) -> str:
    """A reply outside the template's contract: no verdict, or two conflicting verdicts."""
    conflicting = rng.random() < 0.5
    if template_id == "judgebench-vanilla-v1":
        return "Output (a) or Output (b)" if conflicting else "Both outputs are good."
    if template_id == "json-strict-v1":
        if conflicting:
            return '{"verdict": "left", "verdict": "right", "strength": null, "reason": "?"}'
        return "I think the left answer is better overall."
    if conflicting:
        return (
            "At first the first answer looks better: [[A>B]]. On reflection the second one "
            "is better: [[B>A]]."
        )
    return "Both answers have merit and I will not pick one."


def simulate_reply(
    persona: Persona,
    template_id: str,
    preferred: Slot,
    effort: str | None,
    rng: random.Random,
    structured: bool = False,
) -> tuple[str, SlotLabel]:
    """The persona's reply text for one presentation and the label it means to give.

    `structured`: the request holds the reply to the template's verdict schema
    (`tasks.prompts.verdicts`): the reply is that JSON, and never off contract (the API
    enforces it).
    """
    skill, left_bias = persona.shifted(effort)
    draw = rng.random()
    if structured:  # a draw among the valid replies only
        draw = persona.invalid_rate + draw * (1 - persona.invalid_rate)
    if draw < persona.invalid_rate:
        return invalid_reply(template_id, rng), "Invalid"
    draw -= persona.invalid_rate
    label: SlotLabel
    strength: Strength | None = None
    if draw < persona.abstain_rate:
        label = "Abstain"
    elif draw < persona.abstain_rate + persona.tie_rate:
        label = "Tie"
    else:
        if rng.random() < left_bias:
            label = "Left"
        elif rng.random() < skill:
            label = preferred
        else:
            label = "Right" if preferred == "Left" else "Left"
        strength = "strong" if rng.random() < persona.strong_rate else "weak"
    rationale = rng.choice(_REASONS[label])
    if structured:
        return structured_reply(template_id, label, strength, rationale), label
    return format_verdict(template_id, label, strength, rationale), label


REFUSAL = "I'm sorry, but I can't help with comparing these answers."
"""The text of a simulated refusal."""


def refuses(persona: Persona, request_digest: str, attempt: int) -> bool:
    """Whether the persona refuses this attempt at this request (fixed per attempt)."""
    if persona.refusal_rate <= 0:
        return False
    return rng_for(request_digest, "refusal", str(attempt)).random() < persona.refusal_rate


def choose_fault(faults: Faults, request_digest: str, attempt: int) -> FaultKind | None:
    """The fault (if any) for this attempt at this request: fixed per (request, attempt)."""
    if faults.total() <= 0:
        return None
    draw = rng_for(request_digest, "fault", str(attempt)).random()
    for kind, rate in (
        ("rate_limited", faults.rate_429),
        ("server_error", faults.rate_5xx),
        ("stall", faults.rate_stall),
        ("malformed", faults.rate_malformed),
        ("truncated", faults.rate_truncated),
        ("overloaded", faults.rate_529),
        ("quota", faults.rate_quota),
    ):
        if draw < rate:
            return kind  # type: ignore[return-value]
        draw -= rate
    return None


def persona_file_text(personas: tuple[Persona, ...]) -> str:
    """The personas as JSON (the format `serve-judge --personas` reads)."""
    return json.dumps([p.model_dump() for p in personas], indent=2)


def index_manifest(manifest: pa.Table) -> dict[tuple[str, str], str | None]:
    """(left sha, right sha) in either order -> SHA-256 of the keyed answer (None: no key)."""
    table = conform(manifest, ManifestRow, where="simulated judge manifest")
    index: dict[tuple[str, str], str | None] = {}
    columns = table.select(["answer_a_sha256", "answer_b_sha256", "key"]).to_pydict()
    for a, b, key in zip(
        columns["answer_a_sha256"], columns["answer_b_sha256"], columns["key"], strict=True
    ):
        keyed = {"A": a, "B": b}.get(key) if key else None
        for pair in ((a, b), (b, a)):
            # Two pairs with the same two answers but different keys: the key is unknown.
            if pair in index and index[pair] != keyed:
                index[pair] = None
            else:
                index[pair] = keyed
    return index
