"""Panel chart rows: one per (judge, config, dataset) group, marks by design and policy."""

from __future__ import annotations

import pandas as pd

from tasks.report.panels import panel_rows


def test_panel_rows_groups_by_judge_config_dataset_and_files_marks_by_design_and_policy() -> None:
    frame = pd.DataFrame(
        [
            ("b", "low", "ds", "balanced", "full", 0.5),
            ("a", "low", "ds", "balanced", "full", 0.25),
            ("b", "low", "ds", "balanced", "strict", 0.75),
            ("b", "low", "ds", "common", "full", 1.0),
        ],
        columns=["judge", "config", "dataset", "design", "policy", "score"],
    )
    rows = panel_rows(frame, lambda rec: (float(rec["score"]), 2 * float(rec["score"])))
    assert [(r.title, r.subtitle) for r in rows] == [("b", "low · ds"), ("a", "low · ds")]
    assert rows[0].values == {
        "balanced": {"full": (0.5, 1.0), "strict": (0.75, 1.5)},
        "common": {"full": (1.0, 2.0)},
    }
    assert rows[1].values == {"balanced": {"full": (0.25, 0.5)}}


def test_panel_rows_of_an_empty_frame_is_empty() -> None:
    frame = pd.DataFrame(columns=["judge", "config", "dataset", "design", "policy"])
    assert panel_rows(frame, lambda rec: (0.0,)) == []
