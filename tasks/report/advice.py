"""The report's advice section: the stopping policy advised per judge configuration.

It shows `runs/<id>/advice.parquet` (docs/design.md#advice) as the warehouse's `advice`
view returns it: the advised policy and the runner-up, their savings and change on the
selection half and on the held-out half, and the advice's own sentence.
"""

from __future__ import annotations

import pandas as pd

from schemas.advice import AdviceTableRow
from tasks.report.sections import Section
from tasks.report.tables import columns, table

__all__ = ["advice_section"]


def advice_section(frame: pd.DataFrame) -> Section:
    """The section for a run's advice rows (in judge, config, rank order)."""
    out = Section("advice", "Advice", "Advised stopping policy")
    if frame.empty:
        out.missing = "advice"
        return out
    out.table = table(frame, columns(AdviceTableRow), table_id="t-advice")
    return out
