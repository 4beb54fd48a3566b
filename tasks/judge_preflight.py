"""Checks of a judge against what its vendor's models take, before the first paid call.

`JudgeSpec` itself refuses what no endpoint of its profile takes (a seed on the Messages API,
`store` outside the Responses API, `verdict: json` on a server that cannot be assumed to hold
a reply to a schema). What depends on the model is checked here, against OpenAI's model
profiles (`tasks.model_profiles`, which the simulated judge follows too): a reasoning effort
the model does not take, a model served only by the Responses API sent to chat completions,
any effort no OpenAI model takes, and an effort Gemini's endpoint does not take. A model name
the table does not know (a deployment name, an open model) is not checked.
"""

from __future__ import annotations

from collections.abc import Sequence

from schemas.judge import JudgeSpec
from tasks.errors import InputError
from tasks.model_profiles import ACCEPTED_EFFORTS, openai_model, responses_only

__all__ = ["check_judges"]

_OPENAI_VENDOR = ("openai", "azure", "openai-responses", "azure-responses")
GEMINI_EFFORTS = ("none", "minimal", "low", "medium", "high")
"""The `reasoning_effort` values Google's OpenAI-compatible endpoint maps to Gemini's
thinking (levels on Gemini 3, budgets on 2.5; its OpenAI compatibility page)."""


def _problem(spec: JudgeSpec) -> str | None:
    if spec.provider == "anthropic" or spec.simulated:
        return None
    vendor = spec.profile in _OPENAI_VENDOR
    if vendor and spec.provider == "openai" and responses_only(spec.model):
        return (
            f"judge {spec.name!r}: model {spec.model!r} is served by OpenAI's Responses API "
            "only; set profile: openai-responses (azure-responses on Azure)"
        )
    profile = openai_model(spec.model) if vendor else None
    for config in spec.configs:
        effort = spec.decoding(config).get("reasoning_effort")
        if effort is None:
            continue
        where = f"judge {spec.name!r} config {config.name!r}: reasoning_effort {effort!r}"
        if spec.profile == "gemini" and effort not in GEMINI_EFFORTS:
            return f"{where}: Gemini's OpenAI-compatible endpoint takes {', '.join(GEMINI_EFFORTS)}"
        if spec.profile != "openai_compatible" and effort not in ACCEPTED_EFFORTS:
            return f"{where} is not an effort OpenAI's API takes ({', '.join(ACCEPTED_EFFORTS)})"
        if profile is None:
            continue
        if not profile.reasoning:
            return f"{where}: model {spec.model!r} does not reason and takes no reasoning_effort"
        if effort not in profile.efforts:
            return (
                f"{where}: model {spec.model!r} takes {', '.join(profile.efforts)}; the API "
                "would answer every call 400"
            )
    return None


def check_judges(judges: Sequence[JudgeSpec]) -> None:
    """Refuse (InputError, one paragraph) a judge whose model does not take its settings."""
    for spec in judges:
        problem = _problem(spec)
        if problem is not None:
            raise InputError(problem)
