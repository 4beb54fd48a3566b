"""The checks a run passes before its first stage: template, dataset files, key variables,
the run id's lock and origin; a refused run leaves nothing in the work dir."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from support import REPO

from schemas.config import RunConfig
from schemas.run import RunInfo
from tasks.errors import InputError, IntegrityError
from tasks.judging.claims import RunLock
from tasks.runs.folder import RunFolder
from tasks.runs.preflight import check_keys, check_run
from tasks.store.workdir import WorkDir

JUDGELINE = str(REPO / ".venv" / "bin" / "judgeline")
KEY_VAR = "JUDGELINE_TEST_UNSET_KEY"


def config(**changes: Any) -> RunConfig:
    raw: dict[str, Any] = {
        "name": "preflight",
        "datasets": [{"kind": "demo"}],
        "judges": [{"name": "j", "base_url": "http://127.0.0.1:9/v1", "model": "m"}],
        "k": 2,
    }
    raw.update(changes)
    return RunConfig.model_validate(raw)


def keyed_judge() -> list[dict[str, Any]]:
    return [
        {"name": "j", "base_url": "http://127.0.0.1:9/v1", "model": "m", "api_key_env": KEY_VAR}
    ]


def test_a_good_configuration_passes(work: WorkDir) -> None:
    check_run(config(), work, "r1")
    assert not work.root.exists()  # checking writes nothing


def test_an_unknown_template_is_refused(work: WorkDir) -> None:
    with pytest.raises(InputError, match="unknown template 'arena-hard-v9'"):
        check_run(config(template="arena-hard-v9"), work, None)


def test_a_missing_dataset_file_is_refused(work: WorkDir, tmp_path: Path) -> None:
    missing = str(tmp_path / "nope.jsonl")
    cfg = config(datasets=[{"kind": "demo"}, {"kind": "judgebench", "path": missing}])
    with pytest.raises(InputError, match=r"nope\.jsonl: datasets\[1\] \(judgebench\): file not"):
        check_run(cfg, work, None)
    table = tmp_path / "t.csv"
    table.write_text("q,a,b\n", "utf-8")
    bad_map = config(datasets=[{"kind": "table", "path": str(table), "mapping": "question=q"}])
    with pytest.raises(InputError, match="missing answer_a, answer_b"):
        check_run(bad_map, work, None)


def test_an_unset_key_variable_is_refused(work: WorkDir, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY_VAR, raising=False)
    cfg = config(judges=keyed_judge())
    with pytest.raises(InputError, match=f"judge 'j': environment variable {KEY_VAR} is not set"):
        check_run(cfg, work, None)
    with pytest.raises(InputError, match=KEY_VAR):
        asyncio.run(check_keys(cfg))
    monkeypatch.setenv(KEY_VAR, "sk-test")
    check_run(cfg, work, None)
    asyncio.run(check_keys(cfg))
    # On Dask the workers resolve the keys: this process need not hold them.
    monkeypatch.delenv(KEY_VAR)
    check_run(config(judges=keyed_judge(), dask_address="tcp://10.0.0.5:8786"), work, None)


def test_a_run_id_being_judged_is_refused(work: WorkDir) -> None:
    with RunLock(work, "busy"), pytest.raises(InputError, match="being judged by another"):
        check_run(config(), work, "busy")
    check_run(config(), work, "busy")  # free again


def test_a_run_id_made_with_other_judges_is_refused(work: WorkDir) -> None:
    cfg = config()
    info = RunInfo(
        run_id="old",
        plan_id="p",
        manifest_hash="m",
        template_id=cfg.template,
        template_hash="h",
        judges=[{**cfg.judges[0].model_dump(mode="json"), "model": "other"}],
    )
    RunFolder(work, "old").write_info(info)
    with pytest.raises(IntegrityError, match="differs from this job in judges"):
        check_run(cfg, work, "old")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("change", "words"),
    [
        ("template: arena-hard-v9\n", ["unknown template 'arena-hard-v9'"]),
        (f"judges: {keyed_judge()}\n", [f"environment variable {KEY_VAR} is not set"]),
        (None, ["run 'busy' is being judged by another process"]),
    ],
    ids=["template", "key", "lock"],
)
def test_the_run_command_refuses_before_freezing(
    change: str | None, words: list[str], tmp_path: Path
) -> None:
    work = WorkDir(tmp_path / "work")
    path = tmp_path / "run.yaml"
    text = "name: preflight\ndatasets: [{kind: demo}]\nk: 2\n"
    if not (change or "").startswith("judges"):
        text += "judges: [{name: j, base_url: 'http://127.0.0.1:9/v1', model: m}]\n"
    text += change or ""
    path.write_text(text, "utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", KEY_VAR)}
    argv = [JUDGELINE, "--work-dir", str(work.root), "run", str(path), "--run-id", "busy"]
    with RunLock(work, "busy"):
        done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 2, done.stdout + done.stderr
    message = done.stderr.strip()
    assert message.startswith("error: ") and "\n\n" not in message, message
    assert all(w in message for w in words), message
    assert "Traceback" not in done.stdout + done.stderr
    # Nothing was frozen or planned, and no record lists the refused run.
    assert not (work.root / "manifests").exists() and not (work.root / "plans").exists()
    assert not (work.run_dir("busy") / "record.json").exists()


@pytest.mark.parametrize("command", [["estimate"], ["run", "--dry-run"]])
def test_an_estimate_names_an_unset_key_variable(
    command: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`estimate` and `run --dry-run` once said nothing of a key variable the run would be
    refused for."""
    from typer.testing import CliRunner

    from flows.cli import app

    monkeypatch.delenv(KEY_VAR, raising=False)
    data = tmp_path / "pairs.csv"
    data.write_text("q,a,b\nWhat is 1+1?,2,3\n", "utf-8")
    path = tmp_path / "run.yaml"
    path.write_text(
        "name: n\nk: 2\njudges: " + str(keyed_judge()) + "\n"
        f"datasets: [{{kind: table, path: {data}, mapping: 'question=q,answer_a=a,answer_b=b'}}]\n",
        "utf-8",
    )
    work = tmp_path / "work"
    result = CliRunner().invoke(app, ["--work-dir", str(work), command[0], str(path), *command[1:]])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert f"judge 'j': environment variable {KEY_VAR} is not set" in text, text
    assert "a run of these judges is refused until it is set" in text, text
    monkeypatch.setenv(KEY_VAR, "sk-test")
    result = CliRunner().invoke(app, ["--work-dir", str(work), command[0], str(path), *command[1:]])
    assert result.exit_code == 0 and KEY_VAR not in result.output, result.output


def test_a_token_budget_folder_others_can_write_is_refused_before_a_call(
    work: WorkDir, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared = tmp_path / "budgets"
    shared.mkdir()
    shared.chmod(0o777)
    monkeypatch.setenv("JUDGELINE_TOKEN_BUDGETS", str(shared))
    judges = [{"name": "j", "base_url": "http://127.0.0.1:9/v1", "model": "m",
               "tokens_per_minute": 1000}]  # fmt: skip
    with pytest.raises(InputError, match="judge 'j': tokens_per_minute: the token budget"):
        check_run(config(judges=judges), work, "r1")
    assert not work.root.exists()


GEMINI = {"name": "g", "profile": "gemini", "model": "gemini-2.5-flash",
          "base_url": "https://generativelanguage.googleapis.com/v1beta/openai/"}  # fmt: skip


@pytest.mark.parametrize(
    ("config", "words"),
    [
        ({"reasoning_effort": "low"}, ["'low' (a 1,024-token thinking budget", "max_tokens 1,024"]),
        ({"reasoning_effort": "high", "max_tokens": 16000}, ["24,576-token", "16,000"]),
        ({}, ["no reasoning_effort (Gemini 2.5 thinks by default", "max_tokens 1,024"]),
        (
            {
                "extra": {"extra_body": {"google": {"thinking_config": {"thinking_budget": 3000}}}},
                "max_tokens": 3000,
            },
            ["thinking_budget 3,000 can take all of max_tokens 3,000"],
        ),  # fmt: skip
        ({"reasoning_effort": "low", "max_tokens": 2048}, []),
        ({"reasoning_effort": "none"}, []),
    ],
    ids=["low-1024", "high-16000", "dynamic", "budget", "room-left", "no-thinking"],
)
def test_a_thinking_budget_that_can_take_all_of_max_tokens_is_warned_of(
    config: dict[str, Any], words: list[str], tmp_path: Path
) -> None:
    """Gemini 2.5 counts its thinking against max_tokens: `reasoning_effort: low` (1,024
    tokens of thinking) with max_tokens 1024 leaves replies empty. The estimate says so
    before a run, on stderr; nothing is refused."""
    from tasks.prompts.preflight import judge_warnings

    judge = RunConfig.model_validate(
        {"name": "n", "datasets": [{"kind": "demo"}], "k": 2,
         "judges": [{**GEMINI, "configs": [{"name": "c", **config}]}]}
    ).judges  # fmt: skip
    lines = judge_warnings(judge)
    assert len(lines) == (1 if words else 0), lines
    for word in words:
        assert word in lines[0], lines
    if words:
        assert lines[0].startswith("judge 'g' config 'c': ") and "empty" in lines[0]
    elsewhere = {**GEMINI, "model": "gemini-3-flash", "configs": [{"name": "c", **config}]}
    assert judge_warnings(config_of(elsewhere).judges) == []  # levels on Gemini 3, no budget


def config_of(judge: dict[str, Any]) -> RunConfig:
    return RunConfig.model_validate(
        {"name": "n", "datasets": [{"kind": "demo"}], "k": 2, "judges": [judge]}
    )


def test_the_estimate_prints_the_warning(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from flows.cli import app

    path = tmp_path / "run.yaml"
    judge = {
        **GEMINI,
        "api_key_env": "HOME",
        "configs": [{"name": "low", "reasoning_effort": "low"}],
    }
    path.write_text(
        "name: n\nk: 2\ndatasets: [{kind: demo}]\njudges: [" + json.dumps(judge) + "]\n", "utf-8"
    )
    result = CliRunner().invoke(app, ["--work-dir", str(tmp_path / "work"), "estimate", str(path)])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "warning: judge 'g' config 'low': reasoning_effort 'low'" in text, text
