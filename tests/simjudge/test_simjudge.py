"""The simulated judge over real loopback HTTP: determinism, statistics, faults, auth, log."""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from schemas import ManifestRow, rows_to_table
from simjudge.persona import PRESETS, Faults, Persona, ReasoningShift
from simjudge.server import SimJudgeServer, simjudge_subprocess
from tasks.hashing import sha256_text
from tasks.prompts.parsing import parse_reply
from tasks.prompts.templates import TEMPLATES, render

API_KEY = "sk-simjudge-test-9f3c1d"
N_PAIRS = 240


def answers(i: int) -> tuple[str, str]:
    """Pair i's two answers (identity A, identity B): distinct, exact bytes with oddities."""
    return f"Answer {i}: the value is {i * 7}.\r\n  ", f"Answer {i}: it is {{x}} \u00e9 {i + 1}\n"


def keyed_manifest() -> Any:
    rows = []
    for i in range(N_PAIRS):
        a, b = answers(i)
        rows.append(
            ManifestRow(
                manifest_hash="0" * 64,
                pair_id=f"p{i}",
                dataset="sim",
                source="test",
                question=f"Question {i}?",
                answer_a=a,
                answer_b=b,
                answer_a_sha256=sha256_text(a),
                answer_b_sha256=sha256_text(b),
                key="A" if i % 3 else "B",
            )
        )
    return rows_to_table(rows, ManifestRow)


def key_of(i: int) -> str:
    return "A" if i % 3 else "B"


PERSONAS = [
    *PRESETS,
    Persona(name="perfect", skill=1.0, strong_rate=1.0),
    Persona(
        name="thinker",
        skill=0.5,
        reasoning={"high": ReasoningShift(skill=0.5), "low": ReasoningShift(skill=-0.5)},
    ),
    Persona(name="flaky", skill=1.0, faults=Faults(rate_5xx=0.3)),
    Persona(name="always-429", faults=Faults(rate_429=1.0, retry_after_s=7)),
    Persona(name="always-5xx", faults=Faults(rate_5xx=1.0)),
    Persona(name="always-stall", faults=Faults(rate_stall=1.0, stall_s=3.0)),
    Persona(name="always-malformed", faults=Faults(rate_malformed=1.0)),
    Persona(name="always-truncated", faults=Faults(rate_truncated=1.0)),
]


@pytest.fixture(scope="module")
def keyed() -> Iterator[SimJudgeServer]:
    with SimJudgeServer(PERSONAS, manifest=keyed_manifest(), api_key=API_KEY) as server:
        yield server


@pytest.fixture(scope="module")
def unkeyed() -> Iterator[SimJudgeServer]:
    with SimJudgeServer(PERSONAS) as server:
        yield server


@pytest.fixture(scope="module")
def client() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=10.0) as http:
        yield http


def openai_body(model: str, i: int, order: str, *, seed: int = 0, template: str = "arena-hard-v1",
                **extra: Any) -> dict[str, Any]:  # fmt: skip
    a, b = answers(i)
    left, right = (a, b) if order == "AB" else (b, a)
    prompt = render(template, question=f"Question {i}?", left=left, right=right)
    return {"model": model, "messages": list(prompt.messages), "seed": seed, **extra}


def post(client: httpx.Client, server: SimJudgeServer, body: dict[str, Any],
         key: str | None = API_KEY, **headers: str) -> httpx.Response:  # fmt: skip
    auth = {"Authorization": f"Bearer {key}"} if key else {}
    return client.post(
        f"{server.base_url}/chat/completions", json=body, headers={**auth, **headers}
    )


def reply_text(response: httpx.Response) -> str:
    assert response.status_code == 200, response.text
    return str(response.json()["choices"][0]["message"]["content"])


def identity_of(label: str, order: str) -> str:
    """Remap a slot label through the test's own (trusted) order, for checking statistics."""
    if label not in ("Left", "Right"):
        return label
    return ("A" if label == "Left" else "B") if order == "AB" else ("B" if label == "Left" else "A")


def test_same_request_same_reply_and_seeds_vary(
    keyed: SimJudgeServer, client: httpx.Client
) -> None:
    body = openai_body("noisy", 1, "AB", seed=3, temperature=0.7)
    first, second = reply_text(post(client, keyed, body)), reply_text(post(client, keyed, body))
    assert first == second
    by_seed = {reply_text(post(client, keyed, {**body, "seed": s})) for s in range(12)}
    assert len(by_seed) > 1


def test_openai_shape_and_models(keyed: SimJudgeServer, client: httpx.Client) -> None:
    data = post(client, keyed, openai_body("strong", 2, "AB")).json()
    assert data["object"] == "chat.completion" and data["model"] == "strong"
    assert data["choices"][0]["finish_reason"] == "stop"
    assert data["choices"][0]["message"]["role"] == "assistant"
    usage = data["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"] > 0
    models = client.get(f"{keyed.base_url}/models", headers={"Authorization": f"Bearer {API_KEY}"})
    assert {m["id"] for m in models.json()["data"]} == {p.name for p in PERSONAS}


def test_unknown_model_is_404_with_openai_error(
    keyed: SimJudgeServer, client: httpx.Client
) -> None:
    response = post(client, keyed, openai_body("gpt-9", 0, "AB"))
    assert response.status_code == 404
    error = response.json()["error"]
    assert "gpt-9" in error["message"] and error["code"] == "model_not_found"


def test_vendor_named_models_are_answered_as_the_readme_says(
    keyed: SimJudgeServer, client: httpx.Client
) -> None:
    """`o4-mini`, `gpt-5.1` and `claude-sonnet-4-5` were 404s unless a personas file listed
    them: a vendor's model name is answered as `strong` under that name, and refuses what
    that model's API refuses."""
    o4 = post(client, keyed, openai_body("o4-mini", 1, "AB", max_completion_tokens=800))
    assert reply_text(o4).strip() and o4.json()["model"] == "o4-mini"
    refused = post(client, keyed, openai_body("o4-mini", 1, "AB", max_tokens=800))
    assert refused.status_code == 400 and "max_completion_tokens" in refused.text
    gpt51 = openai_body("gpt-5.1", 2, "BA", reasoning_effort="none", max_completion_tokens=800)
    assert reply_text(post(client, keyed, gpt51)).strip()
    prompt = render("arena-hard-v1", question="Question 3?", left="a", right="b")
    claude = client.post(
        f"{keyed.base_url}/messages",
        json={"model": "claude-sonnet-4-5", "max_tokens": 800,
              "system": prompt.messages[0]["content"], "messages": list(prompt.messages[1:])},
        headers={"x-api-key": API_KEY, "anthropic-version": "2023-06-01"},
    )  # fmt: skip
    assert claude.status_code == 200 and claude.json()["content"][0]["text"].strip()
    assert post(client, keyed, openai_body("gpt-9", 0, "AB")).status_code == 404
    # Faults set for every persona reach a stand-in first used afterwards too.
    with SimJudgeServer(api_key=API_KEY) as fresh:
        fresh.set_faults(rate_5xx=1.0)
        assert post(client, fresh, openai_body("gpt-4o-mini", 4, "AB")).status_code >= 500


def test_keyed_persona_statistics(keyed: SimJudgeServer, client: httpx.Client) -> None:
    counts: dict[str, Counter[str]] = {"strong": Counter(), "left-biased": Counter()}
    for model, tally in counts.items():
        for i in range(N_PAIRS):
            order = "AB" if i % 2 else "BA"
            parsed = parse_reply(
                "arena-hard-v1", reply_text(post(client, keyed, openai_body(model, i, order)))
            )
            assert parsed.label != "Invalid", parsed.note
            tally[parsed.label] += 1
            if parsed.label in ("Left", "Right"):
                tally["correct" if identity_of(parsed.label, order) == key_of(i) else "wrong"] += 1
    strong, biased = counts["strong"], counts["left-biased"]
    decisive = strong["Left"] + strong["Right"]
    # skill 0.9, no bias: ~90% keyed, slots balanced.
    assert 0.84 <= strong["correct"] / decisive <= 0.96, strong
    assert 0.4 <= strong["Left"] / decisive <= 0.6, strong
    # left_bias 0.6 + 0.4 * (skill 0.8 keyed-left, 0.2 keyed-right): ~80% Left overall.
    biased_decisive = biased["Left"] + biased["Right"]
    assert 0.72 <= biased["Left"] / biased_decisive <= 0.88, biased
    assert strong["Tie"] <= 0.08 * N_PAIRS


def test_noisy_persona_ties_and_invalid_replies(
    keyed: SimJudgeServer, client: httpx.Client
) -> None:
    labels: Counter[str] = Counter()
    notes = set()
    for i in range(N_PAIRS):
        parsed = parse_reply(
            "arena-hard-v1", reply_text(post(client, keyed, openai_body("noisy", i, "AB")))
        )
        labels[parsed.label] += 1
        if parsed.note:
            notes.add(parsed.note.split(" ")[0])
    assert 0.06 <= labels["Invalid"] / N_PAIRS <= 0.2, labels  # configured 0.12
    assert 0.09 <= labels["Tie"] / N_PAIRS <= 0.22, labels  # configured 0.15
    assert labels["Abstain"] >= 1
    assert notes == {"no", "conflicting"}  # both kinds of off-contract reply occur


@pytest.mark.parametrize("template_id", sorted(TEMPLATES))
def test_replies_follow_each_template_and_the_key(
    template_id: str, keyed: SimJudgeServer, client: httpx.Client
) -> None:
    for i in range(30):
        for order in ("AB", "BA"):
            body = openai_body("perfect", i, order, template=template_id)
            parsed = parse_reply(template_id, reply_text(post(client, keyed, body)))
            assert identity_of(parsed.label, order) == key_of(i), (template_id, i, order)


def test_unkeyed_latent_preference_is_order_consistent(
    unkeyed: SimJudgeServer, client: httpx.Client
) -> None:
    stable: Counter[str] = Counter()
    for i in range(40):
        outcomes = [
            identity_of(
                parse_reply(
                    "arena-hard-v1",
                    reply_text(post(client, unkeyed, openai_body("perfect", i, o), key=None)),
                ).label,
                o,
            )
            for o in ("AB", "BA")
        ]
        assert outcomes[0] == outcomes[1] in ("A", "B")
        stable[outcomes[0]] += 1
    assert stable["A"] > 5 and stable["B"] > 5  # the latent preference is not always one identity


def test_reasoning_effort_moves_skill(keyed: SimJudgeServer, client: httpx.Client) -> None:
    def correct(effort: str) -> int:
        hits = 0
        for i in range(60):
            body = openai_body("thinker", i, "AB", reasoning_effort=effort)
            label = parse_reply("arena-hard-v1", reply_text(post(client, keyed, body))).label
            hits += identity_of(label, "AB") == key_of(i)
        return hits

    assert correct("high") == 60  # skill 0.5 + 0.5
    assert correct("low") == 0  # skill 0.5 - 0.5: always the other answer
    response = post(client, keyed, openai_body("thinker", 0, "AB", reasoning_effort="extreme"))
    assert response.status_code == 400 and "extreme" in response.json()["error"]["message"]


def test_each_fault_kind(keyed: SimJudgeServer, client: httpx.Client) -> None:
    limited = post(client, keyed, openai_body("always-429", 0, "AB"))
    assert limited.status_code == 429 and limited.headers["retry-after"] == "7"
    assert limited.json()["error"]["code"] == "rate_limit_exceeded"
    statuses = {
        post(client, keyed, openai_body("always-5xx", i, "AB")).status_code for i in range(30)
    }
    assert statuses == {500, 502, 503}
    malformed = post(client, keyed, openai_body("always-malformed", 0, "AB"))
    assert malformed.status_code == 200
    with pytest.raises(json.JSONDecodeError):
        json.loads(malformed.content)
    with pytest.raises(httpx.RemoteProtocolError, match="incomplete|complete message body"):
        post(client, keyed, openai_body("always-truncated", 0, "AB"))
    with pytest.raises(httpx.ReadTimeout):
        client.post(
            f"{keyed.base_url}/chat/completions",
            json=openai_body("always-stall", 0, "AB"),
            headers={"Authorization": f"Bearer {API_KEY}"},
            timeout=0.3,
        )
    faults = Counter(e["fault"] for e in keyed.request_log() if e["fault"])
    assert set(faults) >= {"rate_limited", "server_error", "malformed", "truncated", "stall"}


def test_faults_are_per_attempt_so_retries_succeed(
    keyed: SimJudgeServer, client: httpx.Client
) -> None:
    first_failed = recovered = 0
    for i in range(80):
        body = openai_body("flaky", i, "AB")
        statuses = []
        for _ in range(6):
            statuses.append(post(client, keyed, body).status_code)
            if statuses[-1] == 200:
                break
        first_failed += statuses[0] != 200
        recovered += statuses[0] != 200 and statuses[-1] == 200
    assert 10 <= first_failed <= 40  # rate 0.3 of 80
    assert recovered == first_failed


def test_runtime_fault_changes_and_max_faults(keyed: SimJudgeServer, client: httpx.Client) -> None:
    admin = keyed.base_url.rsplit("/v1", 1)[0] + "/_judgeline/faults"
    changed = client.post(
        admin, json={"persona": "strong", "rate_429": 1.0, "max_faults_per_request": 1}
    )
    assert changed.status_code == 200 and changed.json()["strong"]["rate_429"] == 1.0
    try:
        body = openai_body("strong", 5, "AB", seed=99)
        assert [post(client, keyed, body).status_code for _ in range(3)] == [429, 200, 200]
        assert client.post(admin, json={"rate_429": 2.0}).status_code == 400
    finally:
        keyed.set_faults(persona="strong", rate_429=0.0, max_faults_per_request=None)
    assert post(client, keyed, openai_body("strong", 6, "AB", seed=99)).status_code == 200


def test_api_key_is_required(keyed: SimJudgeServer, client: httpx.Client) -> None:
    body = openai_body("strong", 0, "AB")
    assert post(client, keyed, body, key=None).status_code == 401
    assert post(client, keyed, body, key="sk-wrong").status_code == 401
    # Anthropic's header is x-api-key; a bearer token does not count there.
    url = f"{keyed.base_url}/messages"
    anthropic = {"model": "strong", "max_tokens": 64, "messages": body["messages"][1:]}
    bearer = {"Authorization": f"Bearer {API_KEY}"}
    refused = client.post(url, json=anthropic, headers=bearer)
    assert refused.status_code == 401 and refused.json()["error"]["type"] == "authentication_error"
    assert client.post(url, json=anthropic, headers={"x-api-key": API_KEY}).status_code == 200


def test_log_records_call_keys_and_never_the_key(
    keyed: SimJudgeServer, client: httpx.Client
) -> None:
    keyed.clear_log()
    post(client, keyed, openai_body("strong", 7, "AB"), **{"X-Judgeline-Call-Key": "ck-777"})
    post(client, keyed, openai_body("strong", 7, "AB"), key="sk-wrong-key-zz")
    log = keyed.request_log()
    assert [e["status"] for e in log] == [200, 401]
    assert log[0]["call_key"] == "ck-777" and log[0]["model"] == "strong"
    assert log[0]["path"] == "/v1/chat/completions" and log[0]["latency_ms"] >= 0
    assert dt.datetime.fromisoformat(log[0]["time"]).tzinfo is not None  # others parse it
    admin = keyed.base_url.rsplit("/v1", 1)[0] + "/_judgeline/log"
    served = client.get(admin).json()
    text = json.dumps(served)
    assert API_KEY not in text and "sk-wrong-key-zz" not in text and "Bearer" not in text
    assert [e["call_key"] for e in served] == ["ck-777", None]
    assert client.delete(admin).status_code == 200
    assert keyed.request_log() == []


def test_anthropic_messages_shape(keyed: SimJudgeServer, client: httpx.Client) -> None:
    prompt = render(
        "json-strict-v1", question="Question 4?", left=answers(4)[0], right=answers(4)[1]
    )
    body = {
        "model": "perfect",
        "max_tokens": 256,
        "system": prompt.messages[0]["content"],
        "messages": [prompt.messages[1]],
    }
    response = client.post(f"{keyed.base_url}/messages", json=body, headers={"x-api-key": API_KEY})
    data = response.json()
    assert response.status_code == 200
    assert data["type"] == "message" and data["role"] == "assistant"
    assert data["stop_reason"] == "end_turn"
    usage = data["usage"]
    assert usage["cache_read_input_tokens"] == usage["cache_creation_input_tokens"] == 0
    assert set(data["usage"]) == {
        "input_tokens",
        "output_tokens",
        "cache_creation_input_tokens",
        "cache_read_input_tokens",
        "cache_creation",
    }
    assert data["usage"]["cache_creation"] == {
        "ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0,
    }  # fmt: skip
    [block] = data["content"]
    assert block["type"] == "text"
    assert identity_of(parse_reply("json-strict-v1", block["text"]).label, "AB") == key_of(4)
    missing = client.post(
        f"{keyed.base_url}/messages", json={**body, "model": "nope"}, headers={"x-api-key": API_KEY}
    )
    assert missing.status_code == 404 and missing.json()["error"]["type"] == "not_found_error"
    no_max = {k: v for k, v in body.items() if k != "max_tokens"}
    bad = client.post(f"{keyed.base_url}/messages", json=no_max, headers={"x-api-key": API_KEY})
    assert bad.status_code == 400 and bad.json()["type"] == "error"


def test_persona_validation() -> None:
    with pytest.raises(ValueError, match="at most 1"):
        Persona(name="x", tie_rate=0.6, invalid_rate=0.6)
    with pytest.raises(ValueError, match="sum"):
        Faults(rate_429=0.7, rate_5xx=0.7)
    with pytest.raises(ValueError, match="unique"):
        SimJudgeServer([Persona(name="a"), Persona(name="a")])


def test_serve_judge_subprocess(monkeypatch: pytest.MonkeyPatch, client: httpx.Client) -> None:
    monkeypatch.setenv("SIMJUDGE_TEST_KEY", API_KEY)
    args = ("--persona", "strong", "--fault-429", "1", "--max-faults-per-request", "1",
            "--api-key-env", "SIMJUDGE_TEST_KEY")  # fmt: skip
    with simjudge_subprocess(*args) as base_url:
        assert base_url.startswith("http://127.0.0.1:") and base_url.endswith("/v1")
        headers = {"Authorization": f"Bearer {API_KEY}"}
        body = openai_body("strong", 1, "AB")
        url = f"{base_url}/chat/completions"
        assert [client.post(url, json=body, headers=headers).status_code for _ in range(2)] == [
            429,
            200,
        ]
        for model in ("noisy", "o4-mini"):  # --persona serves those it names only
            assert (
                client.post(url, json={**body, "model": model}, headers=headers).status_code == 404
            )
    with pytest.raises(httpx.TransportError):
        client.get(base_url.rsplit("/v1", 1)[0] + "/_judgeline/health", timeout=1.0)
    with (
        pytest.raises(RuntimeError, match="unknown persona"),
        simjudge_subprocess("--persona", "nope"),
    ):
        pass
