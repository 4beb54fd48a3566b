"""The report's advice section: the stopping policy advised per judge configuration.

It shows `runs/<id>/advice.parquet` (docs/design.md#advice) as the warehouse's `advice`
view returns it: per judge and config the advised policy, the runner-up and the best
candidate not certified, with savings, observed change, the upper bound on the true change
rate, the budget, the certificate and the advice's own sentence.
"""

from __future__ import annotations

import pandas as pd

from schemas.advice import AdviceTableRow
from tasks.replay.advisor import shown
from tasks.report.sections import Section
from tasks.report.tables import columns, table

__all__ = ["advice_section"]


def advice_section(frame: pd.DataFrame) -> Section:
    """The section for a run's advice rows (every policy of each judge configuration)."""
    out = Section("advice", "Advice", "Advised stopping policy")
    if frame.empty:
        out.missing = "advice"
        return out
    rows = shown(frame)
    out.table = table(rows, columns(AdviceTableRow), table_id="t-advice")
    level = float(rows["level"].iloc[0])
    out.note = (
        f"Certificates hold at {level:.0%} family-wise per judge configuration: the chance that "
        "any certified policy's true change rate exceeds the budget is at most "
        f"{1 - level:.0%}."
    )
    return out
