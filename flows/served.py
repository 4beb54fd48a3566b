"""Runs of a deployment keep what its owner deployed: where judge calls go and which key
they carry are never a run's parameter.

Anyone who can create a flow run on a Prefect server (every user of a shared server; before
judgeline's local server took a secret, every local user) could otherwise start a deployed
flow with a configuration of their own: a judge whose base URL is their listener and whose
key variable is the owner's, which the owner's runner would then send. A deployment run
whose configuration, inline configuration or work dir differs from the deployment's own
parameters is refused before anything is read or sent.
"""

from __future__ import annotations

from typing import Any

from tasks.errors import InputError

FIXED = ("config_path", "config", "work_dir", "dask_address")
"""The parameters a deployment's run may not change: the configuration (its judges' URLs and
key variables), the work dir (whose runs' recorded configurations a rerun sends) and the
Dask scheduler (whose workers' replies the run would unpickle)."""


def overrides(given: dict[str, Any], deployed: dict[str, Any]) -> list[str]:
    """The FIXED parameters whose value in a run differs from the deployment's."""
    return [name for name in FIXED if given.get(name) != deployed.get(name)]


def _refuse(deployment_name: str, changed: list[str]) -> None:
    if changed:
        raise InputError(
            f"this run of deployment {deployment_name} sets {', '.join(changed)} to values of "
            "its own; a deployment's runs use the configuration and work dir it was deployed "
            "with (deploy another configuration to run it)"
        )


def _deployment_id() -> Any:
    """The deployment that made the current flow run (None: no deployment did)."""
    from prefect.context import FlowRunContext

    context = FlowRunContext.get()  # None outside a flow run (a flow's function called alone)
    run = None if context is None else context.flow_run
    return None if run is None else run.deployment_id


async def refuse_overrides(given: dict[str, Any]) -> None:
    """In a flow: refuse a deployment run whose FIXED parameters are not the deployment's.
    Does nothing for a flow run that no deployment made."""
    from prefect.client.orchestration import get_client

    deployment_id = _deployment_id()
    if deployment_id is None:
        return
    async with get_client() as client:
        deployment = await client.read_deployment(deployment_id)
    _refuse(deployment.name, overrides(given, deployment.parameters or {}))


def refuse_overrides_sync(given: dict[str, Any]) -> None:
    """`refuse_overrides` for a synchronous flow."""
    from prefect.client.orchestration import get_client

    deployment_id = _deployment_id()
    if deployment_id is None:
        return
    with get_client(sync_client=True) as client:
        deployment = client.read_deployment(deployment_id)
    _refuse(deployment.name, overrides(given, deployment.parameters or {}))
