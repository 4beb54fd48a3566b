"""Checks of a judge against what its vendor's models take, before the first paid call.

`JudgeSpec` itself refuses what no endpoint of its profile takes (a seed on the Messages API,
`store` outside the Responses API, `verdict: json` on a server that cannot be assumed to hold
a reply to a schema). What depends on the model is checked here, against OpenAI's model
profiles (`tasks.prompts.profiles`, which the simulated judge follows too): a reasoning effort
the model does not take, a model served only by the Responses API sent to chat completions,
any effort no OpenAI model takes, and an effort Gemini's endpoint does not take. A model name
the table does not know (a deployment name, an open model) is not checked.

`judge_warnings` names what a run would send that the vendor accepts but that can waste the
calls: a Gemini 2.5 thinking budget that can take all of `max_tokens` (its thinking counts
against them, and a reply with none left is empty).
"""

from __future__ import annotations

from collections.abc import Sequence

from schemas.decoding import ReasoningConfig
from schemas.judge import JudgeSpec
from tasks.errors import InputError
from tasks.prompts.profiles import ACCEPTED_EFFORTS, openai_model, responses_only

__all__ = ["GEMINI_25_BUDGETS", "check_judges", "judge_warnings"]

_OPENAI_VENDOR = ("openai", "azure", "openai-responses", "azure-responses")
GEMINI_EFFORTS = ("none", "minimal", "low", "medium", "high")
"""The `reasoning_effort` values Google's OpenAI-compatible endpoint maps to Gemini's
thinking (levels on Gemini 3, budgets on 2.5; its OpenAI compatibility page)."""
GEMINI_25_BUDGETS = {"none": 0, "minimal": 1024, "low": 1024, "medium": 8192, "high": 24576}
"""The thinking budget (tokens) each `reasoning_effort` is on Gemini 2.5 (Google's OpenAI
compatibility page); `none` turns thinking off (not on 2.5 Pro)."""
GEMINI_25_DYNAMIC_MAX = 32768
"""The most a Gemini 2.5 model thinks with dynamic thinking (no effort, or a budget of -1):
2.5 Pro's largest budget (Flash's is 24,576)."""


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


def _gemini_budget(spec: JudgeSpec, config: ReasoningConfig) -> tuple[int | None, str] | None:
    """The thinking budget of a Gemini 2.5 judge's calls under `config` (None: dynamic, the
    model decides) and what sets it; None when the model is not a Gemini 2.5."""
    if spec.profile != "gemini" or "gemini-2.5" not in spec.model:
        return None
    extra = {**spec.extra, **config.extra}
    google = (extra.get("extra_body") or {}).get("google") or {}
    budget = (google.get("thinking_config") or {}).get("thinking_budget")
    if isinstance(budget, int) and not isinstance(budget, bool):
        if budget < 0:
            return None, "thinking_budget -1 (dynamic thinking)"
        return budget, f"thinking_budget {budget:,}"
    effort = spec.decoding(config).get("reasoning_effort")
    if effort in GEMINI_25_BUDGETS:
        budget = GEMINI_25_BUDGETS[effort]
        return budget, f"reasoning_effort {effort!r} (a {budget:,}-token thinking budget on 2.5)"
    return None, "no reasoning_effort (Gemini 2.5 thinks by default, as much as it decides)"


def judge_warnings(judges: Sequence[JudgeSpec]) -> list[str]:
    """One line per judge config whose calls the vendor accepts but whose reasoning budget
    can take all of `max_tokens`, leaving an empty reply."""
    lines = []
    for spec in judges:
        for config in spec.configs:
            found = _gemini_budget(spec, config)
            limit = spec.decoding(config).get("max_tokens")
            if found is None or not isinstance(limit, int):
                continue
            budget, source = found
            if budget is not None and budget < limit:
                continue
            if budget is None and limit > GEMINI_25_DYNAMIC_MAX:
                continue
            fix = (
                "set a reasoning_effort or a thinking_budget well below max_tokens"
                if budget is None
                else f"raise max_tokens to the budget plus the reply (e.g. {budget + 1024:,})"
            )
            lines.append(
                f"judge {spec.name!r} config {config.name!r}: {source} can take all of "
                f"max_tokens {limit:,}, which Gemini's thinking counts against (a reply left no "
                f"tokens is empty); {fix}, or reasoning_effort: none (no thinking; not on 2.5 Pro)"
            )
    return lines
