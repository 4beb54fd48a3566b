"""How the report writes values: escaping, percentages and table-cell numbers (Jinja2 filters)."""

from __future__ import annotations

import math
from collections.abc import Callable
from html import escape
from typing import Any

from markupsafe import Markup

from schemas.report import Kind


def esc(value: object) -> str:
    """Escape any data-derived text for HTML or SVG text and attributes."""
    return escape(str(value), quote=True)


def finalize(value: Any) -> Any:
    """Every `{{ value }}` of a template, before autoescaping: quotes written as `esc` does.

    Autoescaping (markupsafe) escapes `&`, `<` and `>` exactly as `esc` does, but writes
    quotes as `&#34;` and `&#39;`; text with a quote is escaped here instead (and marked safe
    because it was just escaped), so the page reads as it always has. Text without quotes is
    left to autoescaping; `Markup` (the charts' own SVG) passes through unchanged.
    """
    if isinstance(value, Markup):
        return value
    text = str(value)
    if '"' in text or "'" in text:
        return Markup(esc(text))
    return text


def pct(value: float, digits: int = 1) -> str:
    """A share as a percentage, or an em dash when unknown."""
    if value is None or math.isnan(value):
        return "—"
    return f"{100 * value:.{digits}f}%"


def signed_pct(value: float, digits: int = 1) -> str:
    """A relative change with its sign, e.g. `+23.4%`; a rounding residue reads `+0.0%`."""
    if value is None or math.isnan(value):
        return "—"
    rounded = round(100 * value, digits)
    return f"{'-' if rounded < 0 else '+'}{abs(rounded):.{digits}f}%"


def usd(value: float) -> str:
    """Dollars to four significant digits, in plain decimals (never `5.5e-05`); cents from $100."""
    if abs(value) >= 100:
        return f"${value:,.2f}"
    if value == 0:
        return "$0"
    decimals = max(2, 3 - math.floor(math.log10(abs(value))))
    return f"${value:.{decimals}f}"


_SHOWN: dict[Kind, Callable[[float], str]] = {
    "int": lambda v: f"{round(v):,}",
    "pct": lambda v: pct(v, 1),
    "pct2": lambda v: pct(v, 2),
    "score": lambda v: f"{v:.3f}",
    "calls": lambda v: f"{v:.2f}",
    "extra": lambda v: signed_pct(v, 1),
    "var": lambda v: f"{v:.5f}",
    "usd": usd,
}


def shown(number: float, kind: Kind) -> str:
    """A table cell's number as it reads, by the column's kind."""
    return _SHOWN[kind](number)


def sort_value(number: float) -> str:
    """The exact-enough number a cell sorts by (its `data-v`)."""
    return f"{number:.10g}"


def bar_share(number: float) -> str:
    """A cell's in-cell bar length: the number clipped to [0, 1]."""
    return f"{min(max(number, 0.0), 1.0):.4f}"


FILTERS: dict[str, Callable[..., str]] = {
    "pct": pct,
    "shown": shown,
    "sort_value": sort_value,
    "bar_share": bar_share,
}
"""The filters the report's templates use."""
