"""judgeline's vocabulary: every table that crosses a stage, defined once (pydantic + Arrow)."""

from schemas.arrow import arrow_schema, column_names, conform, rows_to_table
from schemas.calls import AttemptRecord, CallRecord, LabelRecord, ReplyRecord
from schemas.live import LiveDrawRow, LivePairRow, LiveSummaryRow
from schemas.manifest import MANIFEST_FORMAT, ManifestInfo, ManifestRow, Pair
from schemas.outcomes import (
    REPLAY_INPUT_COLUMNS,
    DisclosureRow,
    DispositionRow,
    OutcomeRow,
    ReplayInputRow,
)
from schemas.plan import PlanInfo, PresentationRow
from schemas.replay import ComponentRow, DesignRow, ReplayRow, SummaryRow
from schemas.report import (
    DESIGN_METRICS,
    BiasTableRow,
    DesignsTableRow,
    DisclosureTableRow,
    PolicyTableRow,
    PositionBiasRow,
    RealisedRow,
    RealisedTableRow,
    ScoreRow,
    ScoresTableRow,
    Show,
)

__all__ = [
    "DESIGN_METRICS",
    "MANIFEST_FORMAT",
    "REPLAY_INPUT_COLUMNS",
    "AttemptRecord",
    "BiasTableRow",
    "CallRecord",
    "ComponentRow",
    "DesignRow",
    "DesignsTableRow",
    "DisclosureRow",
    "DisclosureTableRow",
    "DispositionRow",
    "LabelRecord",
    "LiveDrawRow",
    "LivePairRow",
    "LiveSummaryRow",
    "ManifestInfo",
    "ManifestRow",
    "OutcomeRow",
    "Pair",
    "PlanInfo",
    "PolicyTableRow",
    "PositionBiasRow",
    "PresentationRow",
    "RealisedRow",
    "RealisedTableRow",
    "ReplayInputRow",
    "ReplayRow",
    "ReplyRecord",
    "ScoreRow",
    "ScoresTableRow",
    "Show",
    "SummaryRow",
    "arrow_schema",
    "column_names",
    "conform",
    "rows_to_table",
]
