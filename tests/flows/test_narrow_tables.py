"""Tables of many columns (the spend table, the estimate) in an 80-column terminal: one
paragraph per row with every value whole, never cells cut to `…`."""

from __future__ import annotations

import datetime as dt
import importlib
import io

import pytest
from rich.console import Console

from schemas.cost import EstimateRow, SpendRow

cli = importlib.import_module("flows.cli.app")  # `flows.cli.app` the attribute is the Typer app


def printed(monkeypatch: pytest.MonkeyPatch, width: int, *args: object) -> str:
    out = io.StringIO()
    monkeypatch.setattr(cli, "console", Console(file=out, width=width, color_system=None))
    cli.print_rows(*args)  # type: ignore[arg-type]
    return out.getvalue()


SPEND = SpendRow(
    judge="gpt-small", config="high-reasoning", sent_calls=6_912, cached_calls=288,
    prompt_tokens=12_345_678, cached_prompt_tokens=1_234_567, cache_write_tokens=234_567,
    completion_tokens=2_345_678, reasoning_tokens=987_654, usd=123.456789,
    prompt_cache_saved_usd=4.5678, price_as_of=dt.date(2026, 11, 30),
)  # fmt: skip
ESTIMATE = EstimateRow(
    judge="gpt-small", config="high-reasoning", planned_calls=7_200, cached_calls=288,
    calls_to_send=6_912, input_tokens=12_345_678, cached_share=0.375, cache_write_tokens=98_765,
    output_tokens_per_call=312.5, uncached_usd_low=14.56, uncached_usd_high=50.12,
    output_source="cached replies (288)", usd_low=12.3456, usd_high=45.6789,
    price_as_of=dt.date(2026, 11, 30), pu_expected_calls=4_321.5, pu_usd_low=7.891,
    pu_usd_high=28.765,
)  # fmt: skip


@pytest.mark.parametrize("row", [SPEND, ESTIMATE], ids=["spend", "estimate"])
def test_a_wide_table_is_a_paragraph_per_row_at_80_columns(
    row: SpendRow | EstimateRow, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = printed(monkeypatch, 80, "run r · spend", [row, row], "a caption")
    assert "…" not in text, text
    assert max(len(line) for line in text.splitlines()) <= 80, text
    flat = " ".join(text.split())
    assert flat.count("gpt-small · high-reasoning:") == 2, text
    for name, value in row.model_dump().items():
        if name in ("judge", "config"):
            continue
        shown = "-" if value is None else f"{value:.4g}" if isinstance(value, float) else value
        assert f"{name.replace('_', ' ')} {shown}" in flat, (name, text)
    assert "a caption" in flat


def test_a_table_that_fits_stays_a_table(monkeypatch: pytest.MonkeyPatch) -> None:
    text = printed(monkeypatch, 250, "run r · spend", [SPEND], "a caption")
    header = next(line for line in text.splitlines() if "sent calls" in line)
    assert "judge" in header and "price as of" in header
    assert "gpt-small · high-reasoning:" not in text
