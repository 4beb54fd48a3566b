"""The stage contracts: Arrow schemas derive from the row models and reject foreign tables."""

from __future__ import annotations

import pyarrow as pa
import pytest

import schemas
from schemas import ReplayRow, SummaryRow, arrow_schema, conform, rows_to_table
from schemas.outcomes import REPLAY_INPUT_COLUMNS, OutcomeRow, ReplayInputRow


def test_public_surface_is_pinned() -> None:
    assert sorted(schemas.__all__) == sorted(
        [
            "MANIFEST_FORMAT",
            "REPLAY_INPUT_COLUMNS",
            "AttemptRecord",
            "CallRecord",
            "ComponentRow",
            "DesignRow",
            "DisclosureRow",
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
            "PresentationRow",
            "ReplayInputRow",
            "ReplayRow",
            "ReplyRecord",
            "SummaryRow",
            "arrow_schema",
            "column_names",
            "conform",
            "rows_to_table",
            # the report's row models (schemas/report.py)
            "BiasTableRow",
            "DESIGN_METRICS",
            "DesignsTableRow",
            "DisclosureTableRow",
            "PolicyTableRow",
            "PositionBiasRow",
            "RealisedRow",
            "RealisedTableRow",
            "ScoreRow",
            "ScoresTableRow",
            "Show",
        ]
    )


def test_replay_columns_are_the_specs() -> None:
    replay = arrow_schema(ReplayRow).names
    assert replay[:6] == ["judge", "config", "dataset", "pair_id", "design", "policy"]
    assert set(replay[6:]) == {
        "expected_calls",
        "p_change",
        "p_neutral_to_decisive",
        "p_decisive_to_neutral",
        "p_reversal",
        "expected_score",
        "reference_score",
        "added_variance",
        "expected_usd",
    }
    summary = arrow_schema(SummaryRow).names
    for col in ("pairs", "savings", "match_cost", "match_extra", "expected_usd", "savings_usd"):
        assert col in summary
    assert tuple(arrow_schema(OutcomeRow).names[:8]) == REPLAY_INPUT_COLUMNS
    assert tuple(arrow_schema(ReplayInputRow).names) == REPLAY_INPUT_COLUMNS


def test_nullable_and_literal_types() -> None:
    schema = arrow_schema(ReplayInputRow)
    assert schema.field("key").nullable
    assert not schema.field("outcome").nullable
    assert schema.field("seed").type == pa.int64()
    assert schema.field("order").type == pa.string()


def test_rows_validate_through_the_model() -> None:
    good = dict(
        judge="j", config="c", dataset="d", pair_id="p", seed=0, order="AB", outcome="A", key=None
    )
    table = rows_to_table([good], ReplayInputRow)
    assert table.num_rows == 1 and table.schema == arrow_schema(ReplayInputRow)
    with pytest.raises(ValueError):
        rows_to_table([{**good, "outcome": "Left"}], ReplayInputRow)


def test_conform_names_extra_and_missing_columns() -> None:
    table = pa.table({"judge": ["j"], "left_identity": ["A"]})
    with pytest.raises(ValueError, match=r"calls\.parquet.*missing.*unexpected.*left_identity"):
        conform(table, ReplayInputRow, where="calls.parquet")
