"""The README's worked judge configurations, exactly as written, against the simulated judge.

Each `# judge profile: NAME` YAML block of README.md is loaded as is; only its base URL's
scheme and host are pointed at the simulated judge (path and query stay, e.g. Azure's
`/openai/deployments/D?api-version=...`). A tiny judge run must store every call, and the
simulated judge's request log must show the URL, headers and body fields each API expects.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
import yaml
from support import REPO, StagedPlan, stage_demo_plan

from schemas.judge import JudgeSpec
from tasks.judging.request import JudgeRequest
from tasks.judging.stage import run_judge_stage
from tasks.simjudge.persona import Persona
from tasks.simjudge.server import SimJudgeServer
from tasks.workdir import WorkDir

KEY = "sk-judgeline-readme-3c9a"
BLOCK = re.compile(r"```yaml\n# judge profile: (\S+)\n(.*?)```", re.DOTALL)


def readme_judges() -> dict[str, list[dict[str, Any]]]:
    """Every `# judge profile: NAME` block of the README: NAME -> its `judges:` list."""
    text = (REPO / "README.md").read_text("utf-8")
    return {name: yaml.safe_load(body)["judges"] for name, body in BLOCK.findall(text)}


BLOCKS = readme_judges()

# What the simulated judge must see per block: path, query, header names present and
# absent, body fields with their values (None: absent).
EXPECTED: dict[str, dict[str, Any]] = {
    "openai-reasoning": {
        "path": "/v1/chat/completions", "query": "", "headers": {"authorization"},
        "fields": {"temperature": None, "max_tokens": None},
        "efforts": {("low", 4096), ("high", 16000)},
    },
    "anthropic-thinking": {
        "path": "/v1/messages", "query": "", "headers": {"x-api-key", "anthropic-version"},
        "fields": {"temperature": None, "seed": None, "max_tokens": 5024,
                   "thinking": {"type": "enabled", "budget_tokens": 4000}},
    },
    "azure-deployment": {
        "path": "/openai/deployments/gpt-4o/chat/completions", "query": "api-version=2024-10-21",
        "headers": {"api-key"}, "fields": {"temperature": 0.0, "max_tokens": 1024},
    },
    "azure-v1": {
        "path": "/openai/v1/chat/completions", "query": "", "headers": {"api-key"},
        "fields": {"model": "o4-mini", "temperature": None, "max_completion_tokens": 4096},
    },
    "vllm": {
        "path": "/v1/chat/completions", "query": "", "headers": {"authorization"},
        "fields": {"temperature": 0.0, "max_tokens": 1024},
        "seeded": True,
    },
    "openrouter": {
        "path": "/api/v1/chat/completions", "query": "",
        "headers": {"authorization", "http-referer", "x-title"},
        "fields": {"seed": None, "temperature": 0.0},
    },
    "litellm": {
        "path": "/v1/chat/completions", "query": "", "headers": {"authorization"},
        "fields": {"model": "gpt-4o-mini", "temperature": 0.0, "max_tokens": 1024},
    },
    "litellm-anthropic": {
        "path": "/v1/messages", "query": "", "headers": {"x-api-key", "anthropic-version"},
        "fields": {"model": "claude-sonnet-4-5", "temperature": 0.0, "max_tokens": 1024},
    },
}  # fmt: skip


def test_the_readme_has_one_block_per_profile() -> None:
    assert set(BLOCKS) == set(EXPECTED)
    profiles = {JudgeSpec.model_validate(j).profile for js in BLOCKS.values() for j in js}
    assert profiles == {"openai", "anthropic", "azure", "openai_compatible"}


@pytest.fixture(scope="module")
def _stored_plan(tmp_path_factory: pytest.TempPathFactory) -> StagedPlan:
    """One demo pair, K = 2: four calls per judge config."""
    return stage_demo_plan(WorkDir(tmp_path_factory.mktemp("readme") / "work"), pairs=1, k=2)


@pytest.fixture(scope="module")
def server() -> Iterator[SimJudgeServer]:
    models = {j["model"] for js in BLOCKS.values() for j in js}
    personas = [Persona(name=m, skill=0.9) for m in sorted(models)]
    with SimJudgeServer(personas, api_key=KEY, require_anthropic_version=True) as srv:
        yield srv


def _at(server: SimJudgeServer, base_url: str) -> str:
    """`base_url` with the simulated judge's scheme and host; path and query unchanged."""
    local, given = urlsplit(server.base_url), urlsplit(base_url)
    return urlunsplit((local.scheme, local.netloc, given.path, given.query, ""))


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_readme_judge_against_the_simulated_judge(
    name: str,
    server: SimJudgeServer,
    _stored_plan: StagedPlan,
    work: WorkDir,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    staged = _stored_plan.copy_to(work)
    judges = []
    for raw in BLOCKS[name]:
        monkeypatch.setenv(raw["api_key_env"], KEY)
        judges.append(JudgeSpec.model_validate({**raw, "base_url": _at(server, raw["base_url"])}))
    server.clear_log()
    request = JudgeRequest(
        work=staged.work, run_id=f"readme-{name}", plan_id=staged.plan_id, judges=tuple(judges)
    )
    counts = asyncio.run(run_judge_stage(request))
    assert counts["stored"] == counts["planned"] > 0, counts

    want = EXPECTED[name]
    log = server.request_log()
    assert len(log) == counts["planned"] and {e["status"] for e in log} == {200}
    for entry in log:
        assert (entry["path"], entry["query"]) == (want["path"], want["query"]), entry
        assert want["headers"] <= set(entry["headers"]), entry["headers"]
        keyed = {"authorization", "x-api-key", "api-key"}
        assert len(keyed & set(entry["headers"])) == 1  # the key in its API's one header
        for field, value in want["fields"].items():
            assert entry["fields"].get(field) == value, (field, entry["fields"])
        seeded = want.get("seeded", name.startswith(("openai", "azure")))
        assert ("seed" in entry["fields"]) == seeded, entry["fields"]
    if name == "anthropic-thinking":
        assert {e["anthropic_version"] for e in log} == {"2023-06-01"}
    if "efforts" in want:
        sent = {
            (e["fields"]["reasoning_effort"], e["fields"]["max_completion_tokens"]) for e in log
        }
        assert sent == want["efforts"]
