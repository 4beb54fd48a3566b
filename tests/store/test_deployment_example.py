"""The Docker work pool example in deployments/prefect.yaml: its containers share only the
object store, and no credential is written in the file."""

from __future__ import annotations

import importlib

import yaml
from support import REPO

from tasks.store import SCRATCH_ENV


def test_the_docker_deployments_share_only_the_store_and_name_no_secret() -> None:
    spec = yaml.safe_load((REPO / "deployments" / "prefect.yaml").read_text())
    docker = [d for d in spec["deployments"] if d["work_pool"]["name"] == "judgeline-docker"]
    assert {d["name"] for d in docker} == {"nightly-benchmark-docker", "rerun-failed-docker"}
    for deployment in docker:
        path, name = deployment["entrypoint"].split(":")
        module = path.removesuffix(".py").replace("/", ".")
        assert callable(getattr(importlib.import_module(module), name))
        assert deployment["pull"][0]["prefect.deployments.steps.set_working_directory"]
        env = deployment["work_pool"]["job_variables"]["env"]
        assert env["JUDGELINE_WORK_DIR"] == "{{ $JUDGELINE_WORK_DIR }}"
        assert env[SCRATCH_ENV] == "/scratch"
        secrets = {k: v for k, v in env.items() if "KEY" in k or "SECRET" in k}
        assert secrets and all(v.startswith("{{ prefect.blocks.secret.") for v in secrets.values())
