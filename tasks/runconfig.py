"""Reading the run configuration: YAML in, a validated RunConfig or an error naming the field."""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import ValidationError

from schemas.config import RunConfig
from tasks.errors import InputError
from tasks.hashing import canonical_json, sha256_text


def load_run_config(path: str | Path) -> RunConfig:
    """Read and validate a YAML run configuration; errors name the file and the field."""
    source = Path(path)
    try:
        raw = yaml.safe_load(source.read_text(encoding="utf-8"))
    except OSError as exc:
        problem = f"cannot read the run configuration: {exc.strerror}"
        raise InputError(problem, file=str(source)) from None
    except yaml.YAMLError as exc:
        raise InputError(f"not valid YAML: {exc}", file=str(source)) from None
    if not isinstance(raw, dict):
        raise InputError("a run configuration is a YAML mapping", file=str(source))
    try:
        return RunConfig.model_validate(raw)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            where = ".".join(str(p) for p in err["loc"]) or "(top level)"
            msg = err["msg"]
            if err["type"] == "extra_forbidden":
                msg = "unknown field"
            problems.append(f"{where}: {msg}")
        problem = "invalid run configuration: " + "; ".join(problems)
        raise InputError(problem, file=str(source)) from None


def config_hash(config: RunConfig) -> str:
    """SHA-256 of the configuration's canonical JSON (it holds no credentials)."""
    return sha256_text(canonical_json(config.model_dump(mode="json")))
