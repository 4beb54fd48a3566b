"""The simulated judge's prompt cache: OpenAI's and Anthropic's accounting, lifetimes, limits,
`cache_control` checked as the Messages API checks it, and replies that caching never
changes. The official SDKs parse its usage fields."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import anthropic
import httpx
import openai
import pytest

from simjudge.demo import DEMO_CACHE_MIN_TOKENS
from simjudge.persona import Persona
from simjudge.server import SimJudgeServer, simjudge_subprocess
from tasks.ingest.demo_benchmark import demo_pairs
from tasks.prompts.templates import render

PERSONAS = [
    Persona(name="strong", skill=0.9),
    Persona(name="haiku", skill=0.9, cache_min_tokens=4096),
    Persona(name="slow", skill=0.9, latency_ms=500),
]
VERSION = {"anthropic-version": "2023-06-01"}


class Clock:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def prompt(i: int, size: int = 4000, order: str = "AB") -> list[dict[str, str]]:
    """A JudgeBench-sized prompt (two answers of `size` characters), messages as sent."""
    a = f"Answer A{i}. " + "The first answer works it out step by step. " * (size // 44)
    b = f"Answer B{i}. " + "The second answer checks every value twice. " * (size // 44)
    left, right = (a, b) if order == "AB" else (b, a)
    return list(render("arena-hard-v1", question=f"Question {i}?", left=left, right=right).messages)


def tokens(messages: list[dict[str, Any]]) -> int:
    return sum(len(m["content"]) for m in messages) // 4


@pytest.fixture(scope="module")
def server() -> Iterator[SimJudgeServer]:
    with SimJudgeServer(PERSONAS) as srv:
        yield srv


@pytest.fixture
def clock(server: SimJudgeServer) -> Iterator[Clock]:
    fake = Clock()
    server.judge.prompt_cache.clock = fake
    server.judge.prompt_cache.clear()
    yield fake
    server.judge.prompt_cache.clear()


@pytest.fixture(scope="module")
def http() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=10.0) as client:
        yield client


def chat(http: httpx.Client, server: SimJudgeServer, messages: list[Any], seed: int = 0,
         model: str = "strong", **extra: Any) -> dict[str, Any]:  # fmt: skip
    body = {"model": model, "messages": messages, "seed": seed, **extra}
    response = http.post(f"{server.base_url}/chat/completions", json=body)
    assert response.status_code == 200, response.text
    return dict(response.json())


def claude(http: httpx.Client, server: SimJudgeServer, messages: list[dict[str, str]],
           mark: dict[str, Any] | None = None, model: str = "strong",
           **extra: Any) -> httpx.Response:  # fmt: skip
    """A Messages request with the user message's block marked with `mark` (if given)."""
    system, user = messages[0]["content"], messages[1]["content"]
    block: dict[str, Any] = {"type": "text", "text": user}
    if mark is not None:
        block["cache_control"] = mark
    body = {"model": model, "max_tokens": 512, "system": system,
            "messages": [{"role": "user", "content": [block]}], **extra}  # fmt: skip
    return http.post(f"{server.base_url}/messages", json=body, headers=VERSION)


def cached(reply: dict[str, Any]) -> int:
    return int(reply["usage"]["prompt_tokens_details"]["cached_tokens"])


def test_openai_caches_long_prompts_in_steps_of_128_for_its_lifetime(
    server: SimJudgeServer, http: httpx.Client, clock: Clock
) -> None:
    messages = prompt(1)
    total = tokens(messages)
    assert total > 1900
    first = chat(http, server, messages, seed=0)
    assert cached(first) == 0 and first["usage"]["prompt_tokens"] == total
    # A repeat (another seed: the prompt is the same) reads its whole prefix in 128s.
    again = chat(http, server, messages, seed=1)
    assert cached(again) == 1024 + (total - 1024) // 128 * 128 > 0.9 * total
    # The other order shares the system text and the question, not the first answer.
    assert cached(chat(http, server, prompt(1, order="BA"))) == 0
    # Another prompt_cache_key routes elsewhere: a miss, then its own entries.
    assert cached(chat(http, server, messages, seed=2, prompt_cache_key="k2")) == 0
    assert cached(chat(http, server, messages, seed=3, prompt_cache_key="k2")) == cached(again)
    # A short prompt is never cached.
    short = prompt(2, size=400)
    assert tokens(short) < 1024
    assert [cached(chat(http, server, short, seed=s)) for s in range(2)] == [0, 0]
    # Unused for 10 minutes, an entry is gone; a read keeps it.
    clock.now += 599
    assert cached(chat(http, server, messages, seed=4)) == cached(again)
    clock.now += 599
    assert cached(chat(http, server, messages, seed=5)) == cached(again)
    clock.now += 601
    assert cached(chat(http, server, messages, seed=6)) == 0


def test_openai_reads_the_longest_shared_prefix(
    server: SimJudgeServer, http: httpx.Client, clock: Clock
) -> None:
    base = prompt(3)
    chat(http, server, base)
    text = base[1]["content"]
    cut = 1400 * 4 - len(base[0]["content"])  # keep the first 1,400 tokens, change the rest
    changed = [base[0], {"role": "user", "content": text[:cut] + "x" * (len(text) - cut)}]
    assert cached(chat(http, server, changed)) == 1024 + 2 * 128  # 1,280 <= 1,400 < 1,408


def test_openai_overflows_a_busy_route_unless_each_prompt_has_its_key(
    server: SimJudgeServer, http: httpx.Client, clock: Clock
) -> None:
    """Prompts of one template begin alike: without a prompt_cache_key they share a route,
    and past 15 requests a minute their repeats land on machines that never saw them."""
    prompts = [prompt(100 + i) for i in range(20)]
    for with_key in (False, True):
        clock.now += 3600
        extra = [{"prompt_cache_key": f"judgeline-{i}"} if with_key else {} for i in range(20)]
        for i, messages in enumerate(prompts):
            chat(http, server, messages, seed=0, **extra[i])
        hits = [cached(chat(http, server, m, seed=1, **extra[i])) for i, m in enumerate(prompts)]
        if with_key:
            assert all(h > 0 for h in hits)
        else:
            # Requests 0-14 went to machine 0, 15-29 to 1, 30-39 to 2: no repeat meets its first.
            assert not any(hits)


def test_anthropic_caches_marked_prefixes_with_writes_and_ttls(
    server: SimJudgeServer, http: httpx.Client, clock: Clock
) -> None:
    messages = prompt(4)
    total = tokens(messages)
    usage = claude(http, server, messages, {"type": "ephemeral"}).json()["usage"]
    assert (usage["cache_creation_input_tokens"], usage["cache_read_input_tokens"]) == (total, 0)
    assert usage["input_tokens"] == 0
    assert usage["cache_creation"] == {"ephemeral_5m_input_tokens": total,
                                       "ephemeral_1h_input_tokens": 0}  # fmt: skip
    usage = claude(http, server, messages, {"type": "ephemeral"}).json()["usage"]
    assert (usage["cache_creation_input_tokens"], usage["cache_read_input_tokens"]) == (0, total)
    # Unmarked: nothing is read or written, even with the prefix in the cache.
    usage = claude(http, server, messages).json()["usage"]
    assert (usage["input_tokens"], usage["cache_read_input_tokens"]) == (total, 0)
    # Five minutes after its last read, the entry is gone; an hour-long one is not.
    clock.now += 301
    usage = claude(http, server, messages, {"type": "ephemeral", "ttl": "1h"}).json()["usage"]
    assert usage["cache_creation"]["ephemeral_1h_input_tokens"] == total
    clock.now += 3000
    usage = claude(http, server, messages, {"type": "ephemeral", "ttl": "1h"}).json()["usage"]
    assert usage["cache_read_input_tokens"] == total
    # A model whose minimum is 4,096 tokens (Claude Haiku 4.5) caches none of it.
    usage = claude(http, server, messages, {"type": "ephemeral"}, model="haiku").json()["usage"]
    assert (usage["input_tokens"], usage["cache_creation_input_tokens"]) == (total, 0)
    # Automatic caching (a top-level cache_control) marks the last block.
    other = prompt(5)
    auto = claude(http, server, other, cache_control={"type": "ephemeral"}).json()["usage"]
    assert auto["cache_creation_input_tokens"] == tokens(other)
    assert claude(http, server, other, {"type": "ephemeral"}).json()["usage"][
        "cache_read_input_tokens"
    ] == tokens(other)


def test_requests_sent_together_all_miss(server: SimJudgeServer, clock: Clock) -> None:
    """A cache entry exists once an answer is ready: repeats sent at once pay in full, as
    the vendors document (which is why judgeline sends a prompt's first call first)."""
    messages = prompt(6)
    ready = threading.Barrier(4)

    def send(seed: int) -> int:
        with httpx.Client(timeout=10.0) as client:
            ready.wait()
            return cached(chat(client, server, messages, seed=seed, model="slow"))

    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(send, range(4))) == [0, 0, 0, 0]
    with httpx.Client(timeout=10.0) as client:
        assert cached(chat(client, server, messages, seed=9, model="slow")) > 0


@pytest.mark.parametrize(
    ("marks", "top", "message"),
    [
        ([{"type": "ephemeral"}] * 5, None,
         "A maximum of 4 blocks with cache_control may be provided. Found 5."),
        ([{"type": "ephemeral"}] * 4 + [None], {"type": "ephemeral"},
         "A maximum of 4 blocks with cache_control may be provided. Found 5."),
        ([{"type": "persistent"}], None,
         "messages.0.content.0.cache_control.type: Input should be 'ephemeral'"),
        ([{"type": "ephemeral", "ttl": "2h"}], None,
         "messages.0.content.0.cache_control.ttl: Input should be '5m' or '1h'"),
        ([{"type": "ephemeral"}, {"type": "ephemeral", "ttl": "1h"}], None,
         "messages.0.content.1.cache_control.ttl: a ttl='1h' cache_control block must not "
         "come after a ttl='5m' cache_control block. Note that blocks are processed in the "
         "following order: `tools`, `system`, `messages`."),
    ],
)  # fmt: skip
def test_cache_control_is_checked_as_the_messages_api_checks_it(
    server: SimJudgeServer, http: httpx.Client, marks: list[dict[str, Any] | None],
    top: dict[str, Any] | None, message: str,
) -> None:  # fmt: skip
    """Four breakpoints at most, the automatic one (top-level, on the last block) included;
    errors in Anthropic's shape and words."""
    blocks = [
        {"type": "text", "text": f"part {i}", **({"cache_control": m} if m else {})}
        for i, m in enumerate(marks)
    ]
    body: dict[str, Any] = {"model": "strong", "max_tokens": 64,
                            "messages": [{"role": "user", "content": blocks}]}  # fmt: skip
    if top is not None:
        body["cache_control"] = top
    response = http.post(f"{server.base_url}/messages", json=body, headers=VERSION)
    assert response.status_code == 400
    error = response.json()
    assert error["type"] == "error" and error["request_id"].startswith("req_")
    assert error["error"] == {"type": "invalid_request_error", "message": message}


def test_caching_fields_never_change_the_reply(
    server: SimJudgeServer, http: httpx.Client, clock: Clock
) -> None:
    messages = prompt(7)
    plain = chat(http, server, messages, seed=3)
    keyed = chat(http, server, messages, seed=3, prompt_cache_key="judgeline-abc")
    text = [r["choices"][0]["message"]["content"] for r in (plain, keyed)]
    assert text[0] == text[1]
    headers = {**VERSION, "x-judgeline-call-key": "ck-1"}
    bare = {"model": "strong", "max_tokens": 512, "system": messages[0]["content"],
            "messages": [messages[1]]}  # fmt: skip
    marked = claude(http, server, messages, {"type": "ephemeral"})
    unmarked = http.post(f"{server.base_url}/messages", json=bare, headers=headers)
    again = http.post(
        f"{server.base_url}/messages",
        json={**bare, "messages": [{"role": "user", "content": [
            {"type": "text", "text": messages[1]["content"], "cache_control": {"type": "ephemeral"}}
        ]}]},
        headers=headers,
    )  # fmt: skip
    assert marked.status_code == unmarked.status_code == again.status_code == 200
    assert unmarked.json()["content"] == again.json()["content"]


def test_official_sdks_parse_the_cache_usage_fields(server: SimJudgeServer, clock: Clock) -> None:
    messages = prompt(8)
    total = tokens(messages)
    with openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0) as oai:
        for seed in (0, 1):
            completion = oai.chat.completions.create(
                model="strong", messages=messages, seed=seed,  # type: ignore[arg-type]
                prompt_cache_key="judgeline-sdk",
            )  # fmt: skip
        assert completion.usage is not None and completion.usage.prompt_tokens == total
        details = completion.usage.prompt_tokens_details
        assert details is not None and details.cached_tokens == 1024 + (total - 1024) // 128 * 128
    root = server.base_url.removesuffix("/v1")
    system = [{"type": "text", "text": messages[0]["content"]}]
    user = [{"type": "text", "text": messages[1]["content"],
             "cache_control": {"type": "ephemeral", "ttl": "1h"}}]  # fmt: skip
    with anthropic.Anthropic(base_url=root, api_key="k", max_retries=0) as client:
        made = [
            client.messages.create(
                model="strong",
                max_tokens=512,
                system=system,  # type: ignore[arg-type]
                messages=[{"role": "user", "content": user}],  # type: ignore[list-item,misc]
            )  # fmt: skip
            for _ in range(2)
        ]
    first, second = (m.usage for m in made)
    assert (first.cache_creation_input_tokens, first.cache_read_input_tokens) == (total, 0)
    assert first.cache_creation is not None
    assert first.cache_creation.ephemeral_1h_input_tokens == total
    assert (second.cache_read_input_tokens, second.input_tokens) == (total, 0)


@pytest.mark.slow
def test_the_demos_judge_caches_its_short_prompts(http: httpx.Client) -> None:
    """`serve-judge --cache-min-tokens 512`, as `judgeline demo` starts it: the demo's
    prompts (about 620 tokens, under OpenAI's 1,024) show what caching saves."""
    pair = demo_pairs()[0]
    messages = list(
        render("arena-hard-v1", question=pair.question, left=pair.answer_a,
               right=pair.answer_b).messages
    )  # fmt: skip
    assert DEMO_CACHE_MIN_TOKENS <= tokens(messages) < 1024
    with simjudge_subprocess("--persona", "strong", "--cache-min-tokens", "512") as base_url:
        url = f"{base_url}/chat/completions"
        body = {"model": "strong", "messages": messages, "prompt_cache_key": "judgeline-demo"}
        usage = [http.post(url, json={**body, "seed": s}).json()["usage"] for s in range(2)]
    assert [u["prompt_tokens_details"]["cached_tokens"] for u in usage] == [0, 512]
