"""`judgeline serve`: Prefect's runner for the deployments, until SIGTERM or Ctrl-C."""

from __future__ import annotations

from typing import Any


def serve_deployments(deployments: list[Any]) -> None:
    """Serve the deployments as `prefect.serve` does (their schedules paused when it stops).
    A stop lets a flow run that has already ended finish its process: Prefect's runner
    cancels only the runs still going."""
    from prefect import serve

    serve(*deployments, pause_on_shutdown=True, print_starting_message=False)
