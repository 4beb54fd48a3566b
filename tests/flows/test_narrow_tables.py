"""Tables of many columns (the spend table, the estimate) in an 80-column terminal: turned,
a line per column and the judge configs side by side, every value whole, never cells cut to
`…`; and the commands' one-line summaries in `judgeline --help`."""

from __future__ import annotations

import datetime as dt
import importlib
import io
import os
import re
import subprocess
from pathlib import Path

import pytest
from rich.console import Console
from support import REPO

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
def test_a_wide_table_is_turned_to_fit_80_columns(
    row: SpendRow | EstimateRow, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Six judge configs at 80 columns: one line per column, the configs side by side in
    chunks that fit, every value whole (it was one run-on `key value; ...` line per row)."""
    rows = [row.model_copy(update={"config": f"config-{i}"}) for i in range(6)]
    text = printed(monkeypatch, 80, "run r · spend", rows, "a caption")
    assert "…" not in text and "; " not in text, text
    assert max(len(line) for line in text.splitlines()) <= 80, text
    lines = text.splitlines()
    for name, value in row.model_dump().items():
        if name in ("judge", "config"):
            continue
        shown = "-" if value is None else f"{value:.4g}" if isinstance(value, float) else value
        label = name.replace("_", " ")
        found = [re.split(r"\s{2,}", ln.strip()) for ln in lines if ln.strip().startswith(label)]
        found = [cells for cells in found if cells[0] == label]
        # One line per chunk of configs, each value whole in its own cell.
        assert found and sum(len(cells) - 1 for cells in found) == 6, (name, text)
        assert all(cell == str(shown) for cells in found for cell in cells[1:]), (name, text)
    assert sum(ln.split().count("config-0") for ln in lines) == 1
    assert " ".join(text.split()).endswith("a caption")


def test_a_table_too_narrow_to_turn_is_a_block_per_row(monkeypatch: pytest.MonkeyPatch) -> None:
    text = printed(monkeypatch, 30, "run r · spend", [SPEND], None)
    assert "…" not in text and "  sent calls: 6912" in text and "  usd: 123.5" in text, text
    assert "gpt-small · high-reasoning" in text


def test_a_table_that_fits_stays_a_table(monkeypatch: pytest.MonkeyPatch) -> None:
    text = printed(monkeypatch, 250, "run r · spend", [SPEND], "a caption")
    header = next(line for line in text.splitlines() if "sent calls" in line)
    assert "judge" in header and "price as of" in header
    assert "gpt-small · high-reasoning:" not in text


def test_help_summaries_are_not_broken_mid_sentence() -> None:
    """`judgeline --help` kept each docstring's line breaks ("... rebuild everything
    after," on a line of its own): a line of a command's summary is broken only where the
    next word would not fit."""
    from typer.testing import CliRunner

    from flows.cli import app

    out = CliRunner().invoke(app, ["--help"], terminal_width=100, env={"COLUMNS": "100"}).output
    panel = [ln for ln in out[out.index("Commands") :].splitlines()[1:] if ln.startswith("│")]
    inside = [ln[1:-1].rstrip() for ln in panel]  # between the borders
    room = len(panel[0]) - 3  # the inner width less the right padding
    broken = []
    for line, after in zip(inside, inside[1:], strict=False):
        if re.match(r"^ [a-z-]+\s{2,}", after) or not after.strip():  # the next command
            continue
        if len(line) + 1 + len(after.split()[0]) <= room:
            broken.append((line, after))
    assert not broken, broken
    assert "rerun-failed" in out and "reusing every reply stored" in out


def test_a_title_is_never_broken_inside_an_id(monkeypatch: pytest.MonkeyPatch) -> None:
    """`judge --dry-run` titled its one-config estimate `estimate · plan <64 hex>` under the
    turned table's width, which broke the plan id in two."""
    plan = "ee1f1db295089541b34dd4c559b6c8fa2ade5216f433802d2e22f2070b631211"
    for width in (80, 100):
        text = printed(monkeypatch, width, f"estimate · plan {plan}", [ESTIMATE], "a caption")
        assert any(plan in line for line in text.splitlines()), text
        assert max(len(line) for line in text.splitlines()) <= width, text


def test_a_piped_table_is_as_wide_as_a_terminal(tmp_path: Path) -> None:
    """Piped (`| less`, a file, cron) with no terminal and no COLUMNS, tables were printed
    123-154 columns wide: they take 80 columns (a terminal on stderr or stdin lends its
    width), turned where they do not fit, COLUMNS winning."""
    config = tmp_path / "run.yaml"
    configs = ", ".join(f"{{name: config-{i}}}" for i in range(4))
    config.write_text(
        "name: n\nk: 2\ndatasets: [{kind: demo}]\n"
        "judges: [{name: j, base_url: 'http://127.0.0.1:9/v1', model: m, "
        f"configs: [{configs}]}}]\n",
        "utf-8",
    )
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "PREFECT_API_URL")}
    argv = [str(REPO / ".venv" / "bin" / "judgeline"), "--work-dir", str(tmp_path / "w"),
            "estimate", str(config)]  # fmt: skip
    for columns, width in ((None, 80), ("120", 120)):
        done = subprocess.run(
            argv, env=env | ({"COLUMNS": columns} if columns else {}), capture_output=True,
            text=True, stdin=subprocess.DEVNULL, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        lines = done.stdout.splitlines()
        assert max(len(line) for line in lines) <= width, done.stdout
        assert "config-3" in done.stdout and "…" not in done.stdout
