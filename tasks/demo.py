"""The embedded demo's run configuration: three simulated personas, two reasoning configs each."""

from __future__ import annotations

from schemas.config import DatasetSpec, RunConfig
from schemas.judge import JudgeSpec, ReasoningConfig

DEMO_PERSONAS = ("strong", "left-biased", "noisy")
"""Simulated-judge presets: a skilled unbiased judge, a left-slot-biased one, a noisy one."""

DEMO_CONFIGS = (
    ReasoningConfig(name="low", extra={"reasoning_effort": "low"}),
    ReasoningConfig(name="high", extra={"reasoning_effort": "high"}),
)


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
