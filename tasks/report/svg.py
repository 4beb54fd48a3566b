"""Drawing pieces shared by the report's inline SVG charts: colours, scales, ticks, text."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from markupsafe import Markup

from tasks.report.filters import esc, pct

POLICY_COLORS: Mapping[str, str] = {
    "full": "#6b7280",
    "nonstrict": "#d55e00",
    "strict": "#0072b2",
    "paired_unanimity": "#009e73",
}
DESIGN_COLORS: Mapping[str, str] = {
    "common": "#cc79a7",
    "independent": "#e69f00",
    "balanced": "#0072b2",
}
CHANGE_COLORS: Mapping[str, str] = {
    "p_neutral_to_decisive": "#e69f00",
    "p_decisive_to_neutral": "#56b4e9",
    "p_reversal": "#d55e00",
}
SLOT_COLORS: Mapping[str, str] = {"left_left": "#0072b2", "right_right": "#d55e00"}
OTHER_COLOR = "#d1d5db"
INK = "#1f2937"

_LABEL_CHARS = 30


def num(value: float) -> str:
    """A coordinate, rounded so output is compact and byte-for-byte deterministic."""
    text = f"{value:.1f}"
    return "0.0" if text == "-0.0" else text


def clip(text: str, limit: int = _LABEL_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round tick values covering [lo, hi] with about `count` steps (1, 2, 2.5 or 5 x 10^n)."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        hi = lo + 1.0
    raw = (hi - lo) / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = magnitude
    for mult in (1.0, 2.0, 2.5, 5.0, 10.0):
        step = mult * magnitude
        if (hi - lo) / step <= count:
            break
    first = math.floor(lo / step + 1e-9)
    last = max(math.ceil(hi / step - 1e-9), first + 1)
    return [round(i * step, 10) for i in range(first, last + 1)]


def tick_label(value: float, as_pct: bool) -> str:
    if as_pct:
        return f"{100 * value:.0f}%" if abs(100 * value - round(100 * value)) < 1e-6 else pct(value)
    return f"{value:g}"


@dataclass(frozen=True)
class Scale:
    """Linear map from data values onto pixels."""

    lo: float
    hi: float
    px0: float
    px1: float

    def __call__(self, value: float) -> float:
        span = self.hi - self.lo or 1.0
        value = min(max(value, self.lo), self.hi)
        return self.px0 + (value - self.lo) / span * (self.px1 - self.px0)


def svg_doc(width: float, height: float, body: list[str], label: str) -> Markup:
    """The chart's `<svg>` element.

    Marked safe (`Markup`) because every piece is built here, by this package's chart
    functions, and every data-derived text in it went through `esc`; templates insert it as is.
    """
    return Markup(
        f'<svg class="chart" viewBox="0 0 {num(width)} {num(height)}" '
        f'xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{esc(label)}" '
        f'style="max-width:{num(width)}px">' + "".join(body) + "</svg>"
    )


def svg_text(x: float, y: float, text: str, *, cls: str = "", anchor: str = "start") -> str:
    attr = f' class="{cls}"' if cls else ""
    return f'<text x="{num(x)}" y="{num(y)}" text-anchor="{anchor}"{attr}>{esc(text)}</text>'


def x_axis(scale: Scale, ticks: list[float], top: float, bottom: float, as_pct: bool) -> str:
    parts = []
    for tick in ticks:
        x = scale(tick)
        parts.append(
            f'<line x1="{num(x)}" x2="{num(x)}" y1="{num(top)}" y2="{num(bottom)}" class="grid"/>'
        )
        label = tick_label(tick, as_pct)
        parts.append(svg_text(x, bottom + 14, label, cls="tick", anchor="middle"))
    return "".join(parts)


def ok(value: float | None) -> bool:
    return value is not None and not math.isnan(value)
