"""The report's money section: spend per judge config and expected savings in USD."""

from __future__ import annotations

import re
from dataclasses import replace

import pandas as pd
from test_report import synthetic_report_data

from tasks.report.filters import usd
from tasks.report.render import render_report


def _money(html: str) -> str:
    match = re.search(r'<section id="money">(.*?)</section>', html, re.S)
    assert match, "section money missing"
    return match.group(1)


def test_money_section_shows_spend_and_savings_in_usd() -> None:
    data = synthetic_report_data(realised=False)
    summary = data.summary.copy()
    calls = {"full": 4.0, "nonstrict": 2.5, "strict": 3.0, "paired_unanimity": 2.0}
    summary["expected_usd"] = [0.01 * calls[p] for p in summary["policy"]]
    summary["savings_usd"] = [1 - calls[p] / 4.0 for p in summary["policy"]]
    spend = pd.DataFrame(
        [
            {"judge": "strong", "config": "low", "sent_calls": 30, "cached_calls": 2,
             "prompt_tokens": 12345, "cached_prompt_tokens": 9876, "cache_write_tokens": 2469,
             "completion_tokens": 678, "reasoning_tokens": 0, "usd": 0.0123,
             "prompt_cache_saved_usd": 0.0456, "price_as_of": "2025-10-01"},
            {"judge": "noisy", "config": "low", "sent_calls": 0, "cached_calls": 32,
             "prompt_tokens": 0, "cached_prompt_tokens": 0, "cache_write_tokens": 0,
             "completion_tokens": 0, "reasoning_tokens": 0, "usd": None,
             "prompt_cache_saved_usd": None, "price_as_of": "no price"},
        ]
    )  # fmt: skip
    html = render_report(replace(data, summary=summary, spend=spend))
    money = _money(html)
    assert 'href="#money"' in html and "<h2>Tokens and money</h2>" in money
    assert "Prices as of <b>2025-10-01</b>" in money
    assert "12,345" in money and "$0.0123" in money and "no price" in money
    # The provider's prompt cache: tokens read and written, and the USD it saved.
    assert "9,876" in money and "2,469" in money and "$0.0456" in money
    assert "saved by prompt cache" in money and "cache writes" in money
    # paired unanimity: $0.02 expected, $0.02 saved per pair, half the full policy's USD.
    rows = re.findall(r"<tr>(.*?)</tr>", money.split('id="t-money"')[1], re.S)
    pu = [r for r in rows if "paired_unanimity" in r]
    assert pu and all("$0.02" in r and "50.0%" in r for r in pu)
    # Without spend and without prices, no money section at all.
    assert 'id="money"' not in render_report(data)


def test_usd_cells_read_as_plain_decimals_to_four_digits() -> None:
    assert [usd(v) for v in (5.528e-05, 0.0004569, 0.1342, 12.3456, 0.0, 1234.5)] == [
        "$0.00005528", "$0.0004569", "$0.1342", "$12.35", "$0", "$1,234.50",
    ]  # fmt: skip
