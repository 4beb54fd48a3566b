"""The report's money section: what the run spent per judge config, and each policy's
expected savings in USD beside its savings in calls.

Spend is `tasks.judging.spend.run_spend`: sent calls only, calls answered from the cache
counted apart at zero. Expected money is the replay summary's `expected_usd` (mean per pair)
and `savings_usd`; `saved_usd` is the full policy's expected USD less the policy's, per pair.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from schemas.cost import SpendRow
from schemas.report import SavingsUsdTableRow, SpendTableRow
from tasks.judging.spend import run_spend
from tasks.report.tables import GROUP, Table, columns, ordered, table
from tasks.runs.folder import RunFolder
from tasks.store.workdir import WorkDir

__all__ = ["MoneySection", "money_section", "run_spend_rows", "spend_frame", "usd_saved"]


@dataclass
class MoneySection:
    """Data for `money.html.j2` (the attributes every report section has, plus two tables)."""

    sid: str = "money"
    label: str = "Money"
    title: str = "Tokens and money"
    missing: str = ""
    spent: Table | None = None
    expected: Table | None = None
    dated: str = ""
    """The dates of the prices the figures use (money is never shown without its date)."""


def run_spend_rows(work: WorkDir, run_id: str) -> list[SpendRow] | None:
    """The run's `run_spend` rows (None for a run without a calls table)."""
    return run_spend(work, run_id) if RunFolder(work, run_id).calls.is_file() else None


def spend_frame(spend: list[SpendRow] | None) -> pd.DataFrame | None:
    """A run's spend per judge config (`run_spend_rows`) as the report's frame."""
    if spend is None:
        return None
    rows = [r.model_dump() for r in spend]
    frame = pd.DataFrame(rows, columns=list(SpendTableRow.model_fields))
    frame["price_as_of"] = [str(d) if d is not None else "no price" for d in frame["price_as_of"]]
    return frame


def _expected(summary: pd.DataFrame) -> pd.DataFrame:
    """Summary rows with a price, and each one's USD saved per pair against `full`."""
    if "expected_usd" not in summary or summary["expected_usd"].isna().all():
        return summary.iloc[0:0]
    priced = summary[summary["expected_usd"].notna()]
    groups = list(zip(*(priced[k].tolist() for k in (*GROUP, "design")), strict=True))
    usd = priced["expected_usd"].to_numpy(dtype=float)
    full = {g: u for g, u, p in zip(groups, usd, priced["policy"].tolist(), strict=True)
            if p == "full"}  # fmt: skip
    full_usd = np.array([full.get(g, np.nan) for g in groups], dtype=float)
    return ordered(priced.assign(full_usd=full_usd, saved_usd=full_usd - usd))


def money_section(spend: pd.DataFrame | None, summary: pd.DataFrame) -> MoneySection | None:
    """Tokens and USD spent per judge config, and expected savings in USD per policy (None
    when the report knows neither: no spend given and no priced replay)."""
    out = MoneySection()
    expected = _expected(summary)
    if (spend is None or spend.empty) and expected.empty:
        return None
    if spend is not None and not spend.empty:
        spend = spend.sort_values(["judge", "config"], kind="mergesort")
        out.spent = table(spend, columns(SpendTableRow), table_id="t-spent")
        dates = sorted({d for d in spend["price_as_of"] if d != "no price"})
        out.dated = ", ".join(dates)
    if not expected.empty:
        out.expected = table(expected, columns(SavingsUsdTableRow), table_id="t-money")
    return out


def usd_saved(summary: pd.DataFrame) -> dict[tuple[str, ...], float]:
    """Per (judge, config, dataset, design, policy) with a price: the USD the policy is
    expected to save over the group's pairs against the full policy (replay summary)."""
    expected = _expected(summary)
    keys = [*GROUP, "design", "policy"]
    return {
        tuple(str(r[k]) for k in keys): float(r["saved_usd"]) * int(r["pairs"])
        for r in expected.to_dict("records")
        if pd.notna(r["saved_usd"])
    }
