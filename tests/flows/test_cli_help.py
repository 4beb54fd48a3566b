"""What `--help` and option checks tell a new user: every `--map` field, the simulated
judge's personas and `--manifest`, fault-rate options that name themselves when out of
range."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from flows.cli import app
from tasks.ingest.tables import ColumnMapping


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args), terminal_width=200, env={"COLUMNS": "200"})
    return result.exit_code, " ".join(result.output.split())


@pytest.mark.parametrize(
    "option",
    [
        "--fault-429",
        "--fault-5xx",
        "--fault-stall",
        "--fault-malformed",
        "--fault-truncated",
    ],
)
def test_a_fault_rate_out_of_range_names_its_option(option: str, tmp_path: Path) -> None:
    code, text = invoke("--work-dir", str(tmp_path), "serve-judge", option, "1.5")
    assert code == 2, text
    assert f"Invalid value for '{option}'" in text and "equal to 1" in text, text


@pytest.mark.parametrize("option", ["--latency-ms", "--stall-s", "--max-faults-per-request"])
def test_a_negative_amount_names_its_option(option: str, tmp_path: Path) -> None:
    code, text = invoke("--work-dir", str(tmp_path), "serve-judge", option, "-1")
    assert code == 2, text
    assert f"Invalid value for '{option}'" in text, text


def test_serve_judge_help_explains_personas_and_the_manifest() -> None:
    code, text = invoke("serve-judge", "--help")
    assert code == 0, text
    for persona in ("strong", "left-biased", "noisy"):
        assert persona in text, persona
    assert "about 0.5" in text and "--manifest" in text and "judgeline freeze" in text


def test_freeze_help_lists_every_map_field() -> None:
    code, text = invoke("freeze", "--help")
    assert code == 0, text
    fields = [f for f in ColumnMapping.__dataclass_fields__ if f != "key_values"]
    assert {"pair_id", "reference", "source", "metadata"} <= set(fields)
    for field in fields:
        assert f"{field}=" in text, field
    assert "key=label{A>B:A,B>A:B" in text  # the value mapping of a key column


def test_every_command_a_help_text_names_exists() -> None:
    """`judge --help` once named a `judgeline simjudge` that does not exist."""
    import re

    import typer.main

    commands = set(typer.main.get_command(app).commands)  # type: ignore[attr-defined]
    for command in sorted(commands):
        code, text = invoke(command, "--help")
        assert code == 0, (command, text)
        for named in re.findall(r"judgeline ([a-z][a-z-]+)", text):
            assert named in commands, (command, named)
