"""`judgeline serve`: Prefect's runner for the deployments, until SIGTERM or Ctrl-C; it
replaces no deployment a `prefect deploy` registered on a work pool under one of its names
(`pooled_namesakes`)."""

from __future__ import annotations

from typing import Any


async def pooled_namesakes(deployments: list[Any]) -> list[str]:
    """The deployments on the server under a served deployment's name (its flow's and its
    own) that run on a work pool, as `flow/name (work pool P)`: serving would replace them."""
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound

    found = []
    async with get_client() as client:
        for deployment in deployments:
            name = f"{deployment.flow_name}/{deployment.name}"
            try:
                existing = await client.read_deployment_by_name(name)
            except ObjectNotFound:
                continue
            if existing.work_pool_name:
                found.append(f"{name} (work pool {existing.work_pool_name!r})")
    return found


def serve_deployments(deployments: list[Any]) -> None:
    """Serve the deployments as `prefect.serve` does (their schedules paused when it stops).
    A stop lets a flow run that has already ended finish its process: Prefect's runner
    cancels only the runs still going."""
    from prefect import serve

    serve(*deployments, pause_on_shutdown=True, print_starting_message=False)
