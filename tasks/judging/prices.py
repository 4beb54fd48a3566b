"""Built-in list prices of common judge models, dated: defaults only, always overridable.

A judge's own `price:` always wins. These figures were copied from the vendors' public
price pages on `AS_OF`; prices change, so check them and set `price:` on every judge whose
bill matters. The table applies to the vendors' own endpoints (profiles `openai`, `azure`,
`anthropic`) only: an OpenAI-compatible server or the simulated judge has no default price.
"""

from __future__ import annotations

import datetime as dt

from schemas.cost import Price
from schemas.judge import JudgeSpec

AS_OF = dt.date(2025, 10, 1)
"""The date the built-in prices were read."""

_OPENAI = "https://openai.com/api/pricing"
_ANTHROPIC = "https://www.anthropic.com/pricing#api"

# model: (input, cached input, output) in USD per million tokens; batch APIs halve them.
_TABLE: dict[str, tuple[float, float, float, str]] = {
    "gpt-4o": (2.50, 1.25, 10.00, _OPENAI),
    "gpt-4o-mini": (0.15, 0.075, 0.60, _OPENAI),
    "gpt-4.1": (2.00, 0.50, 8.00, _OPENAI),
    "gpt-4.1-mini": (0.40, 0.10, 1.60, _OPENAI),
    "gpt-4.1-nano": (0.10, 0.025, 0.40, _OPENAI),
    "o3": (2.00, 0.50, 8.00, _OPENAI),
    "o4-mini": (1.10, 0.275, 4.40, _OPENAI),
    "gpt-5": (1.25, 0.125, 10.00, _OPENAI),
    "gpt-5-mini": (0.25, 0.025, 2.00, _OPENAI),
    "gpt-5-nano": (0.05, 0.005, 0.40, _OPENAI),
    "claude-sonnet-4-5": (3.00, 0.30, 15.00, _ANTHROPIC),
    "claude-sonnet-4": (3.00, 0.30, 15.00, _ANTHROPIC),
    "claude-haiku-4-5": (1.00, 0.10, 5.00, _ANTHROPIC),
    "claude-opus-4-1": (15.00, 1.50, 75.00, _ANTHROPIC),
}

BUILTIN_PRICES: dict[str, Price] = {
    model: Price(
        input=inp, cached_input=cached, output=out, batch_discount=0.5, as_of=AS_OF, source=src
    )
    for model, (inp, cached, out, src) in _TABLE.items()
}
"""Default prices by model name; a dated snapshot name (`gpt-4o-2024-08-06`) takes its
model's entry."""


def builtin_price(model: str) -> Price | None:
    """The table's price of `model`, or of the model a dated snapshot name belongs to."""
    if model in BUILTIN_PRICES:
        return BUILTIN_PRICES[model]
    stem = model.rsplit("-20", 1)[0] if "-20" in model else None
    return BUILTIN_PRICES.get(stem) if stem else None


def price_of(judge: JudgeSpec) -> Price | None:
    """A judge's price: its own `price:`, else the built-in table's for a vendor endpoint."""
    if judge.price is not None:
        return judge.price
    if judge.simulated or judge.profile == "openai_compatible":
        return None
    return builtin_price(judge.model)
