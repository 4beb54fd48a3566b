"""Report: one self-contained HTML page per run, and the Prefect artifacts.

`data` gathers a run's tables from the warehouse; `render` validates them and renders the
Jinja2 templates in `templates/` (autoescaped) through `page`, with `sections` and
`tables` shaping each section's rows, `charts`, `panels` and `svg` drawing inline SVG and
`filters` formatting numbers; `artifacts` publishes the summary to Prefect.
"""

from tasks.report.artifacts import artifact_key, publish_artifacts, run_artifacts
from tasks.report.charts import PolicyPoint, cost_agreement_chart, dot_rows_chart, share_bar_chart
from tasks.report.data import build_report, load_report_data
from tasks.report.filters import bar_share, esc, finalize, pct, shown, signed_pct, sort_value
from tasks.report.page import environment, render_page
from tasks.report.panels import Row, change_chart, interval_chart
from tasks.report.render import ReportData, render_report, validate_report_data, write_report
from tasks.report.sections import (
    Header,
    Section,
    bias_section,
    changes_section,
    cost_section,
    designs_section,
    disclosure_section,
    header_view,
    realised_section,
    scores_section,
)
from tasks.report.svg import Scale, clip, nice_ticks, num, ok, svg_doc, svg_text, tick_label, x_axis
from tasks.report.tables import Col, Table, columns, group_rows, ordered, present, row_title, table

__all__ = [
    "Col",
    "Header",
    "PolicyPoint",
    "ReportData",
    "Row",
    "Scale",
    "Section",
    "Table",
    "artifact_key",
    "bar_share",
    "bias_section",
    "build_report",
    "change_chart",
    "changes_section",
    "clip",
    "columns",
    "cost_agreement_chart",
    "cost_section",
    "designs_section",
    "disclosure_section",
    "dot_rows_chart",
    "environment",
    "esc",
    "finalize",
    "group_rows",
    "header_view",
    "interval_chart",
    "load_report_data",
    "nice_ticks",
    "num",
    "ok",
    "ordered",
    "pct",
    "present",
    "publish_artifacts",
    "realised_section",
    "render_page",
    "render_report",
    "row_title",
    "run_artifacts",
    "scores_section",
    "share_bar_chart",
    "shown",
    "signed_pct",
    "sort_value",
    "svg_doc",
    "svg_text",
    "table",
    "tick_label",
    "validate_report_data",
    "write_report",
    "x_axis",
]
