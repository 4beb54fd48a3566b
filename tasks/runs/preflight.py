"""What a run configuration needs before its first stage: checked at once, before any
record is written, so that a run that cannot finish is refused in a second and leaves no
entry in `judgeline runs`.

`check_run` is quick and needs no Prefect (the command line calls it before the flow
starts); `check_keys` also loads Prefect Secret blocks, so the flow calls it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from schemas.config import RunConfig
from schemas.judge import JudgeSpec
from tasks.errors import InputError
from tasks.ingest.tables import ColumnMapping
from tasks.judging.claims import RunLock
from tasks.judging.client import aresolve_api_key
from tasks.judging.token_budget import budget_for
from tasks.prompts.templates import get_template
from tasks.runs.folder import RunFolder, check_run_id
from tasks.runs.jobs import check_reuse
from tasks.store.workdir import WorkDir

__all__ = ["check_keys", "check_run", "unset_key_variables"]


def check_run(config: RunConfig, work: WorkDir, run_id: str | None) -> None:
    """Refuse a configuration whose run id, template, dataset files, followed advice, key
    variables or token budget folders would fail a stage: an InputError naming the first
    problem."""
    if run_id is not None:
        check_run_id(run_id)
    get_template(config.template)
    for number, dataset in enumerate(config.datasets):
        _check_dataset(number, dataset.kind, dataset.path, dataset.mapping)
        if dataset.kind == "answers" and dataset.path is not None:
            # Cheap to read in full: a table that cannot make one answer per (question,
            # system) is refused before a server starts or a call is sent.
            from tasks.ingest.answers import read_answers

            read_answers(dataset.path, baseline=dataset.baseline, pairs=dataset.pairs)
    if config.live is not None and config.live.advised_by is not None:
        from tasks.live.advice import live_advice

        live_advice(work, config.live, config.judges)  # advice that cannot be followed
    if not _keys_resolved_elsewhere(config):  # Dask workers pace with their own budgets
        for judge in config.judges:
            _check_key_variable(judge)
            budget_for(judge)  # a budget folder that is not the user's alone is refused
    if run_id is not None:
        _check_run_id(config, work, run_id)


async def check_keys(config: RunConfig) -> None:
    """Every judge's key resolves here: its environment variable is set, its Prefect Secret
    block exists and holds a string. Skipped when a Dask cluster resolves the keys."""
    if _keys_resolved_elsewhere(config):
        return
    for judge in config.judges:
        await aresolve_api_key(judge)


def _keys_resolved_elsewhere(config: RunConfig) -> bool:
    # Dask workers resolve keys themselves (they never travel), and may hold variables
    # this process does not.
    return bool(config.dask_address or os.environ.get("JUDGELINE_DASK_ADDRESS"))


def _check_dataset(number: int, kind: str, path: str | None, mapping: str | None) -> None:
    if path is None:
        return
    where = f"datasets[{number}] ({kind})"
    source = Path(path)
    if not source.exists():
        raise InputError(f"{where}: file not found", file=path)
    if not source.is_file():
        raise InputError(f"{where}: is a directory, not a file", file=path)
    if not os.access(source, os.R_OK):
        raise InputError(f"{where}: cannot read file: permission denied", file=path)
    if kind == "table" and mapping is not None:
        ColumnMapping.parse(mapping)


def _key_variable_problem(judge: JudgeSpec) -> str | None:
    if judge.api_key_env and not os.environ.get(judge.api_key_env):
        return f"judge {judge.name!r}: environment variable {judge.api_key_env} is not set"
    return None


def _check_key_variable(judge: JudgeSpec) -> None:
    problem = _key_variable_problem(judge)
    if problem is not None:
        raise InputError(f"{problem} (api_key_env); set it, or name another variable")


def unset_key_variables(judges: Sequence[JudgeSpec], dask_address: str | None = None) -> list[str]:
    """For an estimate (which sends nothing, so refuses nothing): one line per judge whose
    key variable is unset here, for which a run would be refused."""
    if dask_address or os.environ.get("JUDGELINE_DASK_ADDRESS"):
        return []
    problems = filter(None, (_key_variable_problem(judge) for judge in judges))
    return [f"{p}: a run of these judges is refused until it is set" for p in problems]


def _check_run_id(config: RunConfig, work: WorkDir, run_id: str) -> None:
    """The run id is not being judged by another process, and a run under it was made with
    this configuration (`tasks.runs.jobs.check_reuse`)."""
    folder = RunFolder(work, run_id)
    if folder.lock.exists():
        with RunLock(work, run_id):  # refuses, naming the holder, if another process has it
            pass
    check_reuse(work, run_id, config.model_dump(mode="json"))
