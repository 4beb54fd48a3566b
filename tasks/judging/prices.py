"""Built-in list prices of common judge models, dated: defaults only, always overridable.

A judge's own `price:` always wins. These figures were read from the vendors' own model and
price pages (the URL next to each entry, kept as the price's `source`) on `AS_OF`; prices
change, so check them and set `price:` on every judge whose bill matters. The Gemini entries
were not read from Google's page but from third-party tables quoting it (their `source` says
so). The table applies to the vendors' own endpoints (every profile but
`openai_compatible`) only: an
OpenAI-compatible server or the simulated judge has no default price. A model the table does
not list (or whose cached-input price its vendor page did not state) has no default price.

Each vendor page states that its batch API (OpenAI Batch, Anthropic Message Batches) bills
half the standard rates, hence `batch_discount=0.5`. Anthropic states cache-write prices
(1.25x the input price for the default 5-minute lifetime, 2x for 1 hour, read 0.1x). OpenAI
billed no cache writes apart before gpt-5.6; gpt-5.6 and later (the gpt-6 models below
included) report the prompt tokens a call writes (`cache_write_tokens`), and reports of
billed usage put their price at 1.25x the input price. OpenAI's model pages read for this
table state no write price, so the entries have none (writes priced as input): set
`price.cache_write` on such a judge (e.g. 1.25x its `input`) where it matters. Long-prompt
surcharges (OpenAI above 272K input tokens) are not modelled.
"""

from __future__ import annotations

import datetime as dt

from schemas.cost import Price
from schemas.judge import JudgeSpec

AS_OF = dt.date(2026, 11, 30)
"""The date the built-in prices were read."""

_OPENAI = "https://developers.openai.com/api/docs/models/"
_ANTHROPIC = "https://platform.claude.com/docs/en/about-claude/pricing"
_CLAUDE = "https://platform.claude.com/docs/en/models/"

# model: (input, cached input, output) in USD per million tokens, and the page stating them.
_TABLE: dict[str, tuple[float, float, float, str]] = {
    "gpt-6-astra": (10.00, 1.00, 50.00, _OPENAI + "gpt-6-astra"),
    "gpt-6.2-sol": (2.00, 0.10, 10.00, _OPENAI + "gpt-6.2-sol"),
    "gpt-6.1-terra": (1.00, 0.05, 5.00, _OPENAI + "gpt-6.1-terra"),
    "gpt-6-luna": (0.10, 0.01, 0.50, _OPENAI + "gpt-6-luna"),
    "gpt-5-mini": (0.25, 0.025, 2.00, _OPENAI + "gpt-5-mini"),
    "gpt-5-nano": (0.05, 0.005, 0.40, _OPENAI + "gpt-5-nano"),
    "claude-opus-5": (5.00, 0.50, 25.00, _CLAUDE + "opus-5/overview"),
    "claude-sonnet-4-5": (3.00, 0.30, 15.00, _ANTHROPIC),
    "claude-haiku-4-5": (1.00, 0.10, 5.00, _ANTHROPIC),
}

_GEMINI = "https://ai.google.dev/gemini-api/docs/pricing (as quoted by third-party price tables)"
# Gemini (profile `gemini`): prompts up to 200K tokens; the cached price is implicit caching's.
_TABLE.update(
    {
        "gemini-2.5-pro": (1.25, 0.125, 10.00, _GEMINI),
        "gemini-2.5-flash": (0.30, 0.03, 2.50, _GEMINI),
    }
)

# model: USD per million prompt tokens written to the cache for 5 minutes and for 1 hour
# (Anthropic's prompt-caching price table, https://platform.claude.com/docs/en/build-with-
# claude/prompt-caching#pricing).
_WRITES: dict[str, tuple[float, float]] = {
    "claude-opus-5": (6.25, 10.00),
    "claude-sonnet-4-5": (3.75, 6.00),
    "claude-haiku-4-5": (1.25, 2.00),
}

BUILTIN_PRICES: dict[str, Price] = {
    model: Price(
        input=inp,
        cached_input=cached,
        output=out,
        cache_write=_WRITES.get(model, (None, None))[0],
        cache_write_1h=_WRITES.get(model, (None, None))[1],
        batch_discount=0.5,
        as_of=AS_OF,
        source=src,
    )
    for model, (inp, cached, out, src) in _TABLE.items()
}
"""Default prices by model name; a dated snapshot name (`gpt-5-mini-2025-08-07`) takes its
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
