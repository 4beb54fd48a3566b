"""The embedded demo's run configuration: three simulated personas, two reasoning configs each."""

from __future__ import annotations

import datetime as dt

from schemas.config import DatasetSpec, RunConfig
from schemas.cost import Price
from schemas.decoding import ReasoningConfig
from schemas.judge import JudgeSpec

DEMO_PERSONAS = ("strong", "left-biased", "noisy")
"""Simulated-judge presets: a skilled unbiased judge, a left-slot-biased one, a noisy one."""

DEMO_CONFIGS = (
    ReasoningConfig(name="low", extra={"reasoning_effort": "low"}),
    ReasoningConfig(name="high", extra={"reasoning_effort": "high"}),
)


DEMO_CACHE_MIN_TOKENS = 512
"""The shortest prompt the demo's simulated judge caches: its prompts are about 620 tokens,
under OpenAI's 1,024-token minimum, so the demo's judge keeps prompts from 512 tokens (Claude
Opus 5's minimum) to show what the provider's prompt cache saves on the K repeats."""

DEMO_PRICE = Price(
    input=0.15,
    cached_input=0.075,
    output=0.60,
    batch_discount=0.5,
    as_of=dt.date(2025, 10, 1),
    source="illustrative: the simulated judge is free; priced like a small hosted model",
)
"""What the demo's money figures assume each simulated judge charges."""


def demo_config(base_url: str, *, k: int = 4) -> RunConfig:
    """The demo benchmark judged by every persona under both reasoning configs, full grid."""
    judges = [
        JudgeSpec(
            name=persona,
            provider="openai",
            base_url=base_url,
            simulated=True,
            model=persona,
            configs=list(DEMO_CONFIGS),
            max_concurrency=32,
            timeout_s=30.0,
            price=DEMO_PRICE,
        )
        for persona in DEMO_PERSONAS
    ]
    return RunConfig(
        name="demo",
        datasets=[DatasetSpec(kind="demo")],
        judges=judges,
        k=k,
        # Balanced first: the summary shows the first design, and every policy (paired
        # unanimity included) is defined under balanced.
        designs=["balanced", "common", "independent"],
        batch_size=400,
    )
