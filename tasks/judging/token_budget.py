"""Pacing by token budget: requests wait for a judge's tokens-per-minute before they go.

A provider's tokens-per-minute limit is met long before its request limit on a judge run
(each call carries a long prompt), and a client that learns it from 429s wastes a round trip
and a backoff on each. A judge with `tokens_per_minute` holds each request until the budget
has room for it: a token bucket of that capacity, refilled at that rate per minute, in which
a request reserves its prompt (estimated, `input_tokens`) plus its reply limit
(`max_tokens`), as the vendors count a request against the limit on arrival. When the
reply comes, the reservation is settled to the tokens its usage reports. A reservation
that does not fit puts the bucket in debt and waits until the debt is paid, by the refill or
by what answered requests give back.

The bucket is a small JSON file per judge (its endpoint, model and key name) in the user's
cache folder (`tasks.store.usercache`; `$JUDGELINE_TOKEN_BUDGETS` if set; files 0600, folder 0700),
updated under an exclusive `flock`: every run
on this machine that sends to the same judge shares one budget. When the provider announces
what is left (`x-ratelimit-remaining-tokens`, `anthropic-ratelimit-tokens-remaining`) and
the budget thinks more is left, it believes the provider (other machines, other tools).

A budget is the user's own: its folder must belong to the user and be writable by nobody
else, and a bucket is opened without following a link (its name is predictable, and a
shared cache folder could hold a link to any of the user's files). A folder meant to be
shared between users is refused, not trusted: whoever can write a bucket decides how long
the user's requests wait. What a bucket holds is bounded all the same (`MAX_DEBT_MINUTES`).
"""

from __future__ import annotations

import asyncio
import errno
import fcntl
import hashlib
import json
import math
import os
import stat
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from schemas.judge import JudgeSpec
from tasks.errors import InputError
from tasks.store.usercache import user_cache_dir

__all__ = ["TokenBudget", "budget_for", "input_tokens", "remaining_tokens"]


def input_tokens(messages: Sequence[Mapping[str, str]]) -> int:
    """Estimated prompt tokens of one call: four characters a token (the estimate's
    `INPUT_TOKEN_RULE`, and what a request reserves here)."""
    return sum(len(m.get("content") or "") for m in messages) // 4


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def remaining_tokens(headers: Mapping[str, str]) -> int | None:
    """The tokens a provider says are left this minute, if it says so (OpenAI, Azure:
    `x-ratelimit-remaining-tokens`; Anthropic: `anthropic-ratelimit-tokens-remaining`, or
    the smaller of its input and output token counts)."""
    openai = _int(headers.get("x-ratelimit-remaining-tokens"))
    if openai is not None:
        return openai
    total = _int(headers.get("anthropic-ratelimit-tokens-remaining"))
    parts = [
        v
        for v in (
            total,
            _int(headers.get("anthropic-ratelimit-input-tokens-remaining")),
            _int(headers.get("anthropic-ratelimit-output-tokens-remaining")),
        )
        if v is not None
    ]
    return min(parts) if parts else None


RECHECK_S = 0.2
"""Longest sleep of a request waiting for budget before it looks again."""
MAX_DEBT_MINUTES = 10.0
"""The deepest debt a bucket holds, in minutes of refill: what a damaged bucket can make a
request wait at most. Reservations in flight rarely owe more than a minute or two (each
takes at most the whole capacity); beyond this the debt is forgiven and the provider's 429s,
which the client handles, pace what is left."""


def _refusal(st: os.stat_result) -> str | None:
    """Why a folder (its `st`) cannot hold the user's budgets, or None."""
    if not stat.S_ISDIR(st.st_mode):
        return "is not a folder (a link, or a file)"
    if st.st_uid != os.getuid():
        return f"belongs to another user (uid {st.st_uid})"
    if st.st_mode & 0o022:
        return f"others can write in it (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def _open_bucket(path: Path) -> int:
    """The bucket file's descriptor (created 0600 if missing), opened through its folder's
    own descriptor: never through a link, never in a folder the user does not own alone,
    never a file of someone else's or one with another name (a hard link)."""
    folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        problem = _refusal(os.fstat(folder))
        if problem is not None:
            raise InputError(
                f"the token budget folder {problem}; a budget others can write decides how long "
                "your requests wait. Set JUDGELINE_TOKEN_BUDGETS to a folder of your own that "
                "only you can write (chmod 700)",
                file=str(path.parent),
            )
        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open(path.name, flags, 0o600, dir_fd=folder)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise InputError(
                    "a token budget file is a link; it is not followed (remove it)",
                    file=str(path),
                ) from None
            raise
    finally:
        os.close(folder)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or st.st_nlink != 1:
        os.close(fd)
        raise InputError(
            "a token budget file that is not a plain file of yours (another user's, or a "
            "link to another file); it is not used (remove it)",
            file=str(path),
        )
    return fd


class TokenBudget:
    """One judge's token bucket, shared through `path` by every process on the machine."""

    def __init__(self, path: Path, tokens_per_minute: float) -> None:
        self.path = path
        self.capacity = float(tokens_per_minute)
        self.rate = tokens_per_minute / 60.0
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.close(_open_bucket(path))  # refuses a folder or file that is not the user's alone

    def _update(self, change: float, floor: float | None = None) -> float:
        """Refill the bucket to now, add `change` (negative: a reservation), cap it at
        `floor` if given; returns the level after (negative: in debt)."""
        fd = _open_bucket(self.path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            raw = os.read(fd, 4096)
            now = time.time()
            try:
                state: dict[str, Any] = json.loads(raw) if raw else {}
                level, at = float(state["level"]), float(state["at"])
                if not (math.isfinite(level) and math.isfinite(at)):
                    raise ValueError("not a number")
            except (ValueError, KeyError, TypeError):
                level, at = self.capacity, now
            level = min(self.capacity, level + max(0.0, now - at) * self.rate)
            level += change
            if floor is not None:
                level = min(level, floor)
            level = max(level, -MAX_DEBT_MINUTES * self.capacity)
            data = json.dumps({"level": level, "at": now}).encode()
            os.lseek(fd, 0, os.SEEK_SET)
            os.ftruncate(fd, 0)
            os.write(fd, data)
            return level
        finally:
            os.close(fd)  # closing releases the lock

    async def reserve(self, tokens: int) -> None:
        """Take `tokens` from the budget, waiting until it is out of debt: paid by the refill
        or by what answered requests gave back (looked at again at least every
        `RECHECK_S`)."""
        need = min(float(tokens), self.capacity)
        level = await asyncio.to_thread(self._update, -need)
        while level < 0:
            await asyncio.sleep(min(-level / self.rate, RECHECK_S))
            level = await asyncio.to_thread(self._update, 0.0)

    def settle(self, reserved: int, used: int) -> None:
        """Give back what a request reserved and did not use (`used` may exceed it)."""
        if reserved != used:
            self._update(float(min(reserved, self.capacity) - used))

    def observe_left(self, left: int) -> None:
        """Believe the provider when it says fewer tokens are left than the budget thinks
        (`remaining_tokens` of a reply's headers)."""
        self._update(0.0, floor=float(left))


def budget_for(spec: JudgeSpec, folder: Path | None = None) -> TokenBudget | None:
    """The judge's shared budget (None: no `tokens_per_minute`). One file per (base URL,
    model, key name): judges sharing an account's limit share the file."""
    if spec.tokens_per_minute is None:
        return None
    ident = json.dumps([spec.base_url, spec.model, spec.api_key_env or spec.api_key_secret])
    name = hashlib.sha256(ident.encode()).hexdigest()[:24]
    root = folder or Path(os.environ.get("JUDGELINE_TOKEN_BUDGETS") or user_cache_dir() / "tokens")
    try:
        return TokenBudget(root / f"{name}.json", spec.tokens_per_minute)
    except OSError as exc:
        raise InputError(
            f"judge {spec.name!r}: tokens_per_minute keeps its budget in {root}, which cannot "
            f"be created ({exc.strerror}); set JUDGELINE_TOKEN_BUDGETS to a writable folder"
        ) from None
    except InputError as exc:
        raise InputError(
            f"judge {spec.name!r}: tokens_per_minute: {exc.problem}", file=exc.file
        ) from None
