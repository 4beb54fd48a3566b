"""`prefect deploy` of deployments/prefect.yaml and `judgeline serve` on one server: no
deployment of one replaces a deployment of the other (a deployment is its flow's name and its
own)."""

from __future__ import annotations

import importlib
from pathlib import Path

import yaml
from support import REPO


def _pooled() -> dict[tuple[str, str], str]:
    """(flow name, deployment name) -> work pool, of every deployment in prefect.yaml."""
    spec = yaml.safe_load((REPO / "deployments" / "prefect.yaml").read_text("utf-8"))
    found = {}
    for deployment in spec["deployments"]:
        path, attr = deployment["entrypoint"].split(":")
        flow = getattr(importlib.import_module(path.removesuffix(".py").replace("/", ".")), attr)
        found[(flow.name, deployment["name"])] = deployment["work_pool"]["name"]
    return found


def test_deploying_the_pool_deployments_replaces_no_served_one(tmp_path: Path) -> None:
    """They once had the same names: `prefect deploy` silently replaced what `judgeline
    serve` registered (and the next serve replaced them back)."""
    from flows.deploy import build_deployments

    config = tmp_path / "nightly.yaml"
    config.write_text(
        "name: n\nk: 2\ndatasets: [{kind: demo}]\n"
        "judges: [{name: j, base_url: 'http://127.0.0.1:9/v1', model: m}]\n",
        "utf-8",
    )
    served = {(d.flow_name, d.name) for d in build_deployments(config, tmp_path / "work")}
    pooled = _pooled()
    assert len(served) == 3 and len(pooled) == 5
    assert not served & set(pooled), served & set(pooled)
    # Each served deployment has a namesake on each pool, told apart by its suffix.
    for flow, name in served:
        assert (flow, f"{name}-process") in pooled
    assert {pool for (_, name), pool in pooled.items() if name.endswith("-process")} == {
        "judgeline"
    }
