"""What OpenAI's models take, by name: the facts judgeline checks a judge against before its
first call (`tasks.prompts.preflight`) and the simulated judge refuses by
(`simjudge.rules`), read on 2026-11-30 from OpenAI's reasoning guide, API reference
and the `openai` 3.57 SDK (updated 2026-12-02 for gpt-5.6). Standard library only: the
command line reads it while it checks a configuration.

A name with a `provider/` prefix or a date suffix is read as the model's. Models that do not
reason (`gpt-3.5*`, `gpt-4*`, `gpt-4o*`, `gpt-4.1*`, `chatgpt-*`, `-chat` variants) take no
effort; reasoning families take their own efforts; the pro and codex models are served by
the Responses API only; gpt-5.6 and later take `prompt_cache_options`. Any other name (open
models, the simulated judge's personas) is not known here.
"""

from __future__ import annotations

import re
from typing import NamedTuple

__all__ = [
    "ACCEPTED_EFFORTS",
    "OpenAIModel",
    "is_reasoning_model",
    "openai_model",
    "responses_only",
    "takes_cache_options",
]

ACCEPTED_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")
"""The `reasoning_effort` values OpenAI's API (and its SDK) accepts today, lowest first."""

_CHAT_NAME = re.compile(r"^(?:gpt-3\.5|gpt-4|chatgpt-)|-chat(?:$|-)")
_O_SERIES = re.compile(r"^o\d+(?:$|-)")
_GPT5 = re.compile(r"^gpt-5(?:\.(\d+))?(?:$|-)")
_GPT = re.compile(r"^gpt-(\d+)(?:\.(\d+))?(?:$|-)")


class OpenAIModel(NamedTuple):
    """What an OpenAI model name takes: whether it reasons, its efforts, its default one."""

    reasoning: bool
    efforts: tuple[str, ...] = ()
    default_effort: str | None = None


_O_EFFORTS = ("low", "medium", "high")
_GPT5_EFFORTS = ("minimal", "low", "medium", "high")
_GPT51_EFFORTS = ("none", "low", "medium", "high")
_GPT52_EFFORTS = ("none", "low", "medium", "high", "xhigh")
_GPT56_EFFORTS = ("none", "low", "medium", "high", "xhigh", "max")
_RESPONSES_ONLY = re.compile(r"^gpt-5(?:\.\d+)?-(?:pro|codex)(?:$|-)")


def openai_model(model: str) -> OpenAIModel | None:
    """The profile of an OpenAI model name; None for a name OpenAI does not use."""
    name = model.rsplit("/", 1)[-1]
    if _CHAT_NAME.search(name):
        return OpenAIModel(reasoning=False)
    if _O_SERIES.match(name):
        return OpenAIModel(True, _O_EFFORTS, "medium")
    gpt5 = _GPT5.match(name)
    if gpt5 is None:
        return None
    minor = int(gpt5.group(1) or 0)
    if minor == 0:
        if name.startswith("gpt-5-pro"):
            return OpenAIModel(True, ("high",), "high")
        return OpenAIModel(True, _GPT5_EFFORTS, "medium")
    if minor == 1 and "codex-max" not in name:
        return OpenAIModel(True, _GPT51_EFFORTS, "none")
    if minor >= 6:
        return OpenAIModel(True, _GPT56_EFFORTS, "none")
    return OpenAIModel(True, _GPT52_EFFORTS, "none")


def responses_only(model: str) -> bool:
    """Whether OpenAI serves the model through the Responses API only (pro, codex)."""
    return bool(_RESPONSES_ONLY.match(model.rsplit("/", 1)[-1]))


def takes_cache_options(model: str) -> bool:
    """Whether an OpenAI model takes `prompt_cache_options` and reports (and bills) the prompt
    tokens a call writes to the cache: gpt-5.6 and later, by name (the `openai` 3.57 SDK and
    OpenAI's API reference)."""
    found = _GPT.match(model.rsplit("/", 1)[-1])
    if found is None:
        return False
    major, minor = int(found.group(1)), int(found.group(2) or 0)
    return major > 5 or (major == 5 and minor >= 6)


def is_reasoning_model(model: str) -> bool:
    """Whether the model name is an OpenAI reasoning model's (o-series, gpt-5)."""
    profile = openai_model(model)
    return profile is not None and profile.reasoning
