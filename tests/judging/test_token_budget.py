"""Pacing by token budget: a judge's `tokens_per_minute` holds requests before a 429, one
budget shared by every client of the judge on this machine (a file, 0600), and the simulated
judge enforcing a token limit with both vendors' headers."""

from __future__ import annotations

import asyncio
import stat
import time
from pathlib import Path

import httpx
import pytest
from support import AS_OTHER_UID, as_other_user, shared_folder

from schemas.judge import JudgeSpec
from simjudge.persona import Persona
from simjudge.server import SimJudgeServer
from tasks.errors import InputError
from tasks.judging.client import JudgeClient
from tasks.judging.providers import CallRequest
from tasks.judging.token_budget import TokenBudget, budget_for, remaining_tokens


def test_one_budget_file_is_shared_and_goes_into_debt(tmp_path: Path) -> None:
    path = tmp_path / "budgets" / "judge.json"
    first, second = TokenBudget(path, 600.0), TokenBudget(path, 600.0)  # 10 tokens a second
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    started = time.monotonic()
    asyncio.run(first.reserve(580))  # fits the full bucket: no wait
    assert time.monotonic() - started < 0.2
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    started = time.monotonic()
    asyncio.run(second.reserve(25))  # the other client sees 20 left: 5 in debt, 0.5 s
    assert 0.35 < time.monotonic() - started < 1.5
    second.settle(25, 5)  # the reply used 5 of its 25
    assert 15 <= second._update(0.0) <= 30
    second.observe_left(3)  # the provider says fewer are left: believed
    assert second._update(0.0) < 5


def test_a_budget_folder_that_cannot_be_made_is_one_paragraph(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    spec = JudgeSpec(name="a", base_url="https://x/v1", model="m", tokens_per_minute=9)
    with pytest.raises(InputError, match="judge 'a': tokens_per_minute keeps its budget"):
        budget_for(spec, blocker / "tokens")


def test_budgets_are_per_judge_and_headers_are_read() -> None:
    a = JudgeSpec(name="a", base_url="https://api.openai.com/v1", model="m", tokens_per_minute=9)
    b = a.model_copy(update={"name": "b", "model": "n"})
    assert budget_for(a.model_copy(update={"tokens_per_minute": None})) is None
    pa, pb = budget_for(a), budget_for(b)
    assert pa is not None and pb is not None and pa.path != pb.path
    assert remaining_tokens({"x-ratelimit-remaining-tokens": "42"}) == 42
    claude = {"anthropic-ratelimit-tokens-remaining": "90",
              "anthropic-ratelimit-input-tokens-remaining": "70"}  # fmt: skip
    assert remaining_tokens(claude) == 70 and remaining_tokens({}) is None


def _calls(spec: JudgeSpec, n: int) -> list[CallRequest]:
    text = "Compare the two answers and say which one is better. " * 7
    return [
        CallRequest(
            call_key=f"k{i}",
            seed=i,
            config=spec.configs[0],
            messages=({"role": "user", "content": f"Call {i}. {text}"},),
        )  # fmt: skip
        for i in range(n)
    ]


async def _run(spec: JudgeSpec, n: int) -> int:
    async with JudgeClient(spec, None) as client:
        results = await asyncio.gather(*(client.send(c) for c in _calls(spec, n)))
    return sum(r.reply is not None for r in results)


@pytest.mark.slow
def test_a_paced_judge_meets_no_429_where_an_unpaced_one_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JUDGELINE_TOKEN_BUDGETS", str(tmp_path / "budgets"))
    # Each call counts ~190 tokens on arrival (its max_tokens), ~130 once answered: 16 in
    # flight (the judge thinks 100 ms) and what 95 calls use overrun the bucket by a few
    # seconds of refill.
    tpm, n = 12_000, 95
    for paced in (True, False):
        persona = Persona(name="strong", latency_ms=100)
        with SimJudgeServer([persona], tokens_per_minute=tpm) as server:
            spec = JudgeSpec(
                name="j", base_url=server.base_url, model="strong", max_tokens=100, seed=None,
                prompt_cache="off", max_retries=8, tokens_per_minute=tpm if paced else None,
            )  # fmt: skip
            stored = asyncio.run(_run(spec, n))
            log = server.request_log()
            limited = [e for e in log if e["status"] == 429]
            assert stored == n
            if paced:
                assert len(limited) <= 0.01 * len(log), len(limited)
            else:
                assert limited and {e["fault"] for e in limited} == {"token_limit"}
            ok = httpx.post(f"{server.base_url}/chat/completions",
                            json={"model": "strong", "messages": [{"role": "user",
                                                                  "content": "hi"}]})  # fmt: skip
            assert int(ok.headers["x-ratelimit-limit-tokens"]) == tpm
            assert 0 <= int(ok.headers["x-ratelimit-remaining-tokens"]) < tpm
            claude = httpx.post(
                server.base_url.removesuffix("/v1") + "/v1/messages",
                json={"model": "strong", "max_tokens": 50,
                      "messages": [{"role": "user", "content": "hi"}]},
                headers={"anthropic-version": "2023-06-01"},
            )  # fmt: skip
            assert int(claude.headers["anthropic-ratelimit-tokens-remaining"]) < tpm


def _spec() -> JudgeSpec:
    return JudgeSpec(name="a", base_url="https://x/v1", model="m", tokens_per_minute=600)


def test_a_link_planted_at_a_bucket_is_never_followed(tmp_path: Path) -> None:
    """A bucket's name is predictable; a link planted there once made the owner's run
    replace the file it pointed to with `{"level": ...}`."""
    dotfile = tmp_path / ".bashrc"
    dotfile.write_text("export PATH=$PATH:~/bin\n")
    budget = budget_for(_spec(), tmp_path / "tokens")
    assert budget is not None
    budget.path.unlink()  # another process of the user's, or an attacker, removed it
    budget.path.symlink_to(dotfile)
    with pytest.raises(InputError, match="link") as caught:
        asyncio.run(budget.reserve(10))
    assert str(budget.path) in str(caught.value)
    assert dotfile.read_text() == "export PATH=$PATH:~/bin\n"


def test_a_budget_folder_others_can_write_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "tokens"
    folder.mkdir()
    folder.chmod(0o777)
    with pytest.raises(InputError, match="others can write") as caught:
        budget_for(_spec(), folder)
    assert str(folder) in str(caught.value) and "\n" not in str(caught.value)


def test_a_budget_folder_of_another_user_is_refused() -> None:
    """A shared XDG_CACHE_HOME or JUDGELINE_TOKEN_BUDGETS: another user (uid 65534 where the
    tests run as root) made the budget folder and planted links in it to a file of the
    owner's; the owner's budget refuses the folder and the file is untouched."""
    spec = _spec()
    with shared_folder() as shared:
        mine = shared / "mine"
        mine.write_text("the owner's\n")
        name = budget_for(spec, shared / "probe")
        assert name is not None
        plant = (
            "import os\n"
            f"os.makedirs({str(shared / 'tokens')!r})\n"
            f"os.chmod({str(shared / 'tokens')!r}, 0o755)\n"
            f"os.symlink({str(mine)!r}, {str(shared / 'tokens' / name.path.name)!r})\n"
        )
        as_other_user(plant)
        folder = shared / "tokens"
        if not AS_OTHER_UID:  # the "other user" was us: its folder is ours
            folder.chmod(0o777)
        with pytest.raises(InputError, match="another user" if AS_OTHER_UID else "others"):
            budget_for(spec, folder)
        assert mine.read_text() == "the owner's\n"


@pytest.mark.parametrize(
    ("state", "level"),
    [('{"level": -1e300, "at": %(now)s}', -6000.0), ('{"level": -Infinity, "at": 0}', 600.0)],
    ids=["huge debt", "infinite"],
)
def test_what_a_bucket_file_holds_is_bounded(tmp_path: Path, state: str, level: float) -> None:
    """A damaged bucket does not stall requests for ever: a debt is at most ten minutes of
    refill, and a value that is not a number is no value."""
    budget = budget_for(_spec(), tmp_path / "tokens")
    assert budget is not None
    budget.path.write_text(state % {"now": time.time()})
    assert budget._update(0.0) == pytest.approx(level, abs=1.0)
