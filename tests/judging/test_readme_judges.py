"""The README's worked judge configurations, exactly as written, against the simulated judge.

Each `# judge profile: NAME` YAML block of README.md is loaded as is; only its base URL's
scheme and host are pointed at the simulated judge (path and query stay, e.g. Azure's
`/openai/deployments/D?api-version=...`). A tiny judge run must store every call, and the
simulated judge's request log must show the URL, headers and body fields each API expects.
Every other README block with a `judges:` list (the run configuration, the batch judges)
is run the same way, and every request body any README judge config sends passes the
simulated judge's model profiles (`simjudge.rules`: what the vendors refuse).
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
from simjudge.persona import Persona
from simjudge.server import SimJudgeServer
from tasks.judging.request import JudgeRequest
from tasks.judging.stage import run_judge_stage
from tasks.store.workdir import WorkDir

KEY = "sk-judgeline-readme-3c9a"
BLOCK = re.compile(r"```yaml\n# judge profile: (\S+)\n(.*?)```", re.DOTALL)
ANY_BLOCK = re.compile(r"^## ([^\n]+)$|```yaml\n(.*?)```", re.DOTALL | re.MULTILINE)
FRAGMENTS = {"prices-and-estimates"}
"""Blocks that show one field of a judge written in full above (its `price:`), not a judge."""


def readme_judges() -> dict[str, list[dict[str, Any]]]:
    """Every `# judge profile: NAME` block of the README: NAME -> its `judges:` list."""
    text = (REPO / "README.md").read_text("utf-8")
    return {name: yaml.safe_load(body)["judges"] for name, body in BLOCK.findall(text)}


def other_readme_judges() -> dict[str, list[dict[str, Any]]]:
    """Every other README block with a `judges:` list, named after its section (the
    fragments of FRAGMENTS left out)."""
    text = (REPO / "README.md").read_text("utf-8")
    found: dict[str, list[dict[str, Any]]] = {}
    section = ""
    for match in ANY_BLOCK.finditer(text):
        heading, body = match.groups()
        if heading is not None:
            section = re.sub(r"[^a-z0-9]+", "-", heading.lower()).strip("-")
            continue
        if body.startswith("# judge profile:") or "judges:" not in body:
            continue
        assert section not in found, f"two judge blocks in README section {section!r}"
        if section not in FRAGMENTS:
            found[section] = yaml.safe_load(body)["judges"]
    return found


BLOCKS = readme_judges()
OTHER_BLOCKS = other_readme_judges()

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
        # The proxy forwards it to OpenAI: without it, half the cache hits.
        "seeded": True, "cache_key": True,
    },
    "openai-responses": {
        "path": "/v1/responses", "query": "", "headers": {"authorization"},
        "fields": {"store": False, "temperature": None, "seed": None, "max_tokens": None},
        "seeded": False, "format": "text",
        "efforts": {("high", 4096), ("xhigh", 16000)},
    },
    "azure-responses": {
        "path": "/openai/v1/responses", "query": "", "headers": {"api-key"},
        "fields": {"store": False, "max_output_tokens": 4096, "temperature": None},
        "seeded": False,
    },
    "anthropic-structured": {
        "path": "/v1/messages", "query": "", "headers": {"x-api-key", "anthropic-version"},
        "fields": {"seed": None, "max_tokens": 1024}, "format": "output_config",
    },
    "gemini": {
        "path": "/v1beta/openai/chat/completions", "query": "", "headers": {"authorization"},
        "fields": {"temperature": 0.0, "max_tokens": 2048, "reasoning_effort": "low"},
        "seeded": False,
    },
    "litellm-anthropic": {
        "path": "/v1/messages", "query": "", "headers": {"x-api-key", "anthropic-version"},
        "fields": {"model": "claude-sonnet-4-5", "temperature": 0.0, "max_tokens": 1024},
    },
}  # fmt: skip


def test_the_readme_has_one_block_per_profile() -> None:
    assert set(BLOCKS) == set(EXPECTED)
    profiles = {JudgeSpec.model_validate(j).profile for js in BLOCKS.values() for j in js}
    assert profiles == {"openai", "anthropic", "azure", "openai_compatible",
                        "openai-responses", "azure-responses", "gemini"}  # fmt: skip
    assert set(OTHER_BLOCKS) == {
        "a-run-configuration", "provider-prompt-caching", "provider-batch-apis-half-price",
    }  # fmt: skip


def test_every_readme_judge_config_passes_the_model_profiles() -> None:
    """The body each config of each README judge sends is one its vendor accepts (the
    README's first judge once sent `reasoning_effort` to gpt-4o-mini: OpenAI answers 400)."""
    from simjudge.responses import chat_view
    from simjudge.rules import anthropic_problem, openai_problem
    from tasks.judging.endpoints import anthropic_body, openai_body, responses_body
    from tasks.prompts.templates import render

    messages = render("arena-hard-v1", question="q", left="a", right="b").messages
    headers = {"anthropic-version": "2023-06-01"}
    checked = 0
    for name, judges in {**BLOCKS, **OTHER_BLOCKS}.items():
        for raw in judges:
            spec = JudgeSpec.model_validate(raw)
            for config in spec.configs:
                if spec.provider == "anthropic":
                    body = anthropic_body(spec, config, messages, 0)
                    problem = anthropic_problem(body, headers, require_version=True)
                elif spec.provider == "openai-responses":
                    view, problem = chat_view(responses_body(spec, config, messages, 0))
                    if problem is None and view is not None:
                        problem = openai_problem(view, spec.model, responses=True)
                else:
                    problem = openai_problem(openai_body(spec, config, messages, 0), spec.model)
                assert problem is None, (name, spec.name, config.name, problem)
                checked += 1
    assert checked >= 14
    from tasks.prompts.preflight import check_judges, judge_warnings

    judges = [JudgeSpec.model_validate(j) for js in {**BLOCKS, **OTHER_BLOCKS}.values() for j in js]
    check_judges(judges)
    # The gemini block once sent `reasoning_effort: low` (1,024 tokens of thinking on Gemini
    # 2.5, counted in max_tokens) with max_tokens 1024: replies left no room.
    assert judge_warnings(judges) == []


@pytest.fixture(scope="module")
def _stored_plan(tmp_path_factory: pytest.TempPathFactory) -> StagedPlan:
    """One demo pair, K = 2: four calls per judge config."""
    return stage_demo_plan(WorkDir(tmp_path_factory.mktemp("readme") / "work"), pairs=1, k=2)


@pytest.fixture(scope="module")
def server() -> Iterator[SimJudgeServer]:
    models = {j["model"] for js in (*BLOCKS.values(), *OTHER_BLOCKS.values()) for j in js}
    personas = [Persona(name=m, skill=0.9) for m in sorted(models)]
    with SimJudgeServer(personas, api_key=KEY, require_anthropic_version=True) as srv:
        yield srv


def _at(server: SimJudgeServer, base_url: str) -> str:
    """`base_url` with the simulated judge's scheme and host; path and query unchanged."""
    local, given = urlsplit(server.base_url), urlsplit(base_url)
    return urlunsplit((local.scheme, local.netloc, given.path, given.query, ""))


@pytest.mark.slow
def _judged(
    name: str,
    blocks: list[dict[str, Any]],
    server: SimJudgeServer,
    staged: StagedPlan,
    monkeypatch: pytest.MonkeyPatch,
) -> dict[str, Any]:
    """Judge the staged plan with a README block's judges on the simulated judge (its log
    cleared first); every call must be stored. Returns the stage's counts."""
    judges = []
    for raw in blocks:
        monkeypatch.setenv(raw["api_key_env"], KEY)
        judges.append(JudgeSpec.model_validate({**raw, "base_url": _at(server, raw["base_url"])}))
    server.clear_log()
    request = JudgeRequest(
        work=staged.work, run_id=f"readme-{name}", plan_id=staged.plan_id, judges=tuple(judges)
    )
    counts = asyncio.run(run_judge_stage(request))
    assert counts["stored"] == counts["planned"] > 0, counts
    return counts


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_readme_judge_against_the_simulated_judge(
    name: str,
    server: SimJudgeServer,
    _stored_plan: StagedPlan,
    work: WorkDir,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    counts = _judged(name, BLOCKS[name], server, _stored_plan.copy_to(work), monkeypatch)
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
        keyed_cache = want.get("cache_key", name.startswith("openai"))
        assert ("prompt_cache_key" in entry["fields"]) == keyed_cache, (name, entry["fields"])
    if name == "anthropic-thinking":
        assert {e["anthropic_version"] for e in log} == {"2023-06-01"}
    if "efforts" in want:
        responses = want["path"].endswith("/responses")
        sent = {
            (e["fields"]["reasoning"]["effort"], e["fields"]["max_output_tokens"])
            if responses
            else (e["fields"]["reasoning_effort"], e["fields"]["max_completion_tokens"])
            for e in log
        }
        assert sent == want["efforts"]
    if "format" in want:
        # verdict: json: the template's labels as a strict JSON schema, reasoning first
        fmt = log[0]["fields"][want["format"]]
        schema = fmt["format"]["schema"]
        assert list(schema["properties"]) == ["reasoning", "verdict"]
        assert schema["properties"]["verdict"]["enum"][:2] == ["A>>B", "A>B"]


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(OTHER_BLOCKS))
def test_other_readme_judges_against_the_simulated_judge(
    name: str,
    server: SimJudgeServer,
    _stored_plan: StagedPlan,
    work: WorkDir,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The run configuration's and the batch section's judges store every call (batch
    judges through the simulated judge's batch APIs), and every request was answered 200."""
    _judged(name, OTHER_BLOCKS[name], server, _stored_plan.copy_to(work), monkeypatch)
    assert {e["status"] for e in server.request_log()} == {200}
