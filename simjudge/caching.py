"""The simulated judge's prompt cache: OpenAI's and Anthropic's, as their documentation says.

Tokens are the judge's usual count, characters / 4 of the prompt text; a prefix's tokens are
those of the text up to it. Each model profile (a persona: `Persona.cache_min_tokens`,
`Persona.cache_lifetime_s`) has a minimum cacheable length and a lifetime; without them the
API's documented defaults below apply.

- OpenAI (chat completions, Azure): automatic. A request goes to a machine chosen by its
  route (model, `prompt_cache_key` and the prompt's first 256 tokens): up to 15 requests a
  minute of one route go to the same machine, more overflow to others. A prompt of
  `OPENAI.min_tokens` or more reads the longest prefix stored on its machine, in whole steps
  of 128 tokens past the first 1,024 (`usage.prompt_tokens_details.cached_tokens`), and
  stores its own prefixes there. Writes cost nothing and are not reported. So prompts that
  begin alike (one template's instructions) share a route and overflow at any real rate
  unless each carries its own `prompt_cache_key`.
- Anthropic: only marked prefixes. Each `cache_control` breakpoint (on a block, or the
  top-level one, which marks the last block; at most 4, checked as the API checks them:
  `cache_control_problem`) reads the longest stored prefix ending at it or at one of the 19
  blocks before it, and writes its own prefix past what was read if it is at least
  `min_tokens` long (`cache_read_input_tokens`, `cache_creation_input_tokens` with their
  5-minute and 1-hour parts; `input_tokens` is the rest).

A request looks entries up when it arrives and stores its own once its answer is ready, so
requests sent together all miss (the vendors: a cache entry is available once the first
response begins). An entry lives its lifetime after the start of the last request that wrote
or read it. `clock` (seconds) can be replaced to test lifetimes.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from simjudge.rules import Problem

__all__ = [
    "ANTHROPIC",
    "LOOKBACK_BLOCKS",
    "MAX_BREAKPOINTS",
    "OPENAI",
    "CacheProfile",
    "CacheUse",
    "PromptCache",
    "cache_control_problem",
]

MAX_BREAKPOINTS = 4
"""The Messages API's most `cache_control` breakpoints per request."""
LOOKBACK_BLOCKS = 20
"""Positions a breakpoint's read looks at: itself and the 19 blocks before it."""
ROUTE_TOKENS = 256
"""OpenAI routes a request by a hash of its prompt's first 256 tokens and its
`prompt_cache_key` (prompt caching guide)."""
OVERFLOW_PER_MINUTE = 15
"""Requests a minute of one route past which OpenAI sends the rest to other machines, each
with its own cache ("approximately 15 requests per minute")."""
_TTL_S = {"5m": 300.0, "1h": 3600.0}
_CHARS_PER_TOKEN = 4


@dataclass(frozen=True)
class CacheProfile:
    """A prompt cache's documented behaviour: the shortest cacheable prefix in tokens, the
    step its hits grow by past that (1: any length), and how long an unused entry lives."""

    min_tokens: int
    step: int
    lifetime_s: float


OPENAI = CacheProfile(min_tokens=1024, step=128, lifetime_s=600.0)
"""OpenAI: 1,024 tokens, hits in steps of 128, in memory for 5 to 10 minutes of inactivity
(the longer end here)."""
ANTHROPIC = CacheProfile(min_tokens=1024, step=1, lifetime_s=_TTL_S["5m"])
"""Anthropic: 1,024 tokens for most models (512 to 4,096 by model: set the persona's
`cache_min_tokens`), the marked prefix exactly, 5 minutes (1 hour with `ttl: "1h"`)."""


@dataclass
class CacheUse:
    """What one request read from and wrote to the cache, in tokens."""

    read: int = 0
    write_5m: int = 0
    write_1h: int = 0
    writes: list[tuple[tuple[str, str], float]] = field(default_factory=list)
    """(entry, lifetime) to store once the answer is ready."""
    prefix: int = 0
    """OpenAI: the longest prefix the request can be cached at, in tokens."""

    @property
    def openai_write(self) -> int:
        """OpenAI: prompt tokens written to the cache (its longest prefix, less the read)."""
        return max(0, self.prefix - self.read)

    @property
    def write(self) -> int:
        return self.write_5m + self.write_1h


def _blocks(body: Mapping[str, Any], anthropic: bool) -> list[tuple[str, str, Any, str]]:
    """The prompt as blocks: (role, text, cache_control or None, path for errors)."""
    out: list[tuple[str, str, Any, str]] = []

    def add(role: str, content: Any, where: str) -> None:
        if isinstance(content, str):
            out.append((role, content, None, where))
            return
        for j, part in enumerate(content if isinstance(content, list) else []):
            if isinstance(part, Mapping):
                text = part.get("text")
                mark = part.get("cache_control") if anthropic else None
                out.append((role, text if isinstance(text, str) else "", mark, f"{where}.{j}"))

    if anthropic and body.get("system") is not None:
        add("system", body["system"], "system")
    for i, message in enumerate(body.get("messages") or []):
        if isinstance(message, Mapping):
            add(str(message.get("role")), message.get("content"), f"messages.{i}.content")
    return out


def cache_control_problem(body: Mapping[str, Any]) -> Problem | None:
    """What a Messages request's `cache_control` breaks, in the API's words, if anything."""
    marks = [(mark, f"{where}.cache_control") for *_, mark, where in _blocks(body, True) if mark]
    top = body.get("cache_control")
    if top is not None:
        # Automatic caching marks the last block: a no-op if it carries the same mark.
        last = _blocks(body, True)[-1:]
        if last and last[0][2] is not None and last[0][2] != top:
            return Problem(
                400, "invalid_request",
                "cache_control: the last block already has a cache_control with another ttl",
            )  # fmt: skip
        if not (last and last[0][2] == top):
            marks.append((top, "cache_control"))
    if len(marks) > MAX_BREAKPOINTS:
        return Problem(
            400, "invalid_request",
            f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. "
            f"Found {len(marks)}.",
        )  # fmt: skip
    seen_5m = False
    for mark, where in marks:
        if not isinstance(mark, Mapping) or mark.get("type") != "ephemeral":
            return Problem(400, "invalid_request", f"{where}.type: Input should be 'ephemeral'")
        ttl = mark.get("ttl", "5m")
        if ttl not in _TTL_S:
            return Problem(400, "invalid_request", f"{where}.ttl: Input should be '5m' or '1h'")
        if ttl == "1h" and seen_5m:
            return Problem(
                400, "invalid_request",
                f"{where}.ttl: a ttl='1h' cache_control block must not come after a ttl='5m' "
                "cache_control block. Note that blocks are processed in the following order: "
                "`tools`, `system`, `messages`.",
            )  # fmt: skip
        seen_5m = seen_5m or ttl == "5m"
    return None


class PromptCache:
    """The cache of one simulated judge: entries by (model scope, prefix digest)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._expires: dict[tuple[str, str], float] = {}
        self._routes: dict[str, deque[float]] = {}
        self._stores = 0

    def clear(self) -> None:
        """Forget every entry and every route's recent requests."""
        self._expires.clear()
        self._routes.clear()

    def _live(self, key: tuple[str, str], now: float) -> bool:
        expires = self._expires.get(key)
        return expires is not None and expires > now

    def look_up(
        self,
        body: Mapping[str, Any],
        anthropic: bool,
        min_tokens: int | None = None,
        lifetime_s: float | None = None,
    ) -> CacheUse:
        """What a (checked) request reads now, and what it will write (`store`), under the
        API's profile with the model's own minimum and lifetime (None: the API's)."""
        base = ANTHROPIC if anthropic else OPENAI
        lifetime = lifetime_s or base.lifetime_s
        profile = CacheProfile(min_tokens or base.min_tokens, base.step, lifetime)
        blocks = _blocks(body, anthropic)
        now = self.clock()
        if anthropic:
            return self._anthropic(body, blocks, profile, now)
        return self._openai(body, blocks, profile, now)

    def store(self, use: CacheUse, started: float) -> None:
        """Store a request's entries once its answer is ready (`started`: when it arrived)."""
        for key, lifetime in use.writes:
            self._expires[key] = max(self._expires.get(key, 0.0), started + lifetime)
        self._stores += 1
        if self._stores % 10_000 == 0:
            now = self.clock()
            self._expires = {k: t for k, t in self._expires.items() if t > now}
            self._routes = {k: q for k, q in self._routes.items() if q and q[-1] > now - 60}

    def _machine(self, route: str, now: float) -> int:
        """The machine (0, 1, ...) an OpenAI request goes to: the n-th request of the last
        minute with its route (`ROUTE_TOKENS`, `OVERFLOW_PER_MINUTE`) goes to n // 15."""
        recent = self._routes.setdefault(route, deque())
        while recent and recent[0] <= now - 60:
            recent.popleft()
        recent.append(now)
        return (len(recent) - 1) // OVERFLOW_PER_MINUTE

    def _openai(
        self, body: Mapping[str, Any], blocks: Sequence[tuple[str, str, Any, str]],
        profile: CacheProfile, now: float,
    ) -> CacheUse:  # fmt: skip
        total = sum(len(text) for _, text, _, _ in blocks) // _CHARS_PER_TOKEN
        marks = range(profile.min_tokens, total + 1, profile.step)
        head, *digests = _prefix_digests(blocks, [min(ROUTE_TOKENS, total), *marks])
        route = _digest("openai", body.get("model"), body.get("prompt_cache_key"), head)
        scope = _digest(route, self._machine(route, now))
        use = CacheUse(prefix=marks[-1] if len(marks) else 0)
        for tokens, digest in zip(marks, digests, strict=True):
            key = (scope, digest)
            if self._live(key, now):
                use.read = tokens
                self._expires[key] = now + profile.lifetime_s  # a read refreshes it
            use.writes.append((key, profile.lifetime_s))
        return use

    def _anthropic(
        self, body: Mapping[str, Any], blocks: Sequence[tuple[str, str, Any, str]],
        profile: CacheProfile, now: float,
    ) -> CacheUse:  # fmt: skip
        scope = _digest("anthropic", body.get("model"), body.get("thinking"))
        ends = _block_ends(blocks)
        marks = {i: mark for i, (*_, mark, _) in enumerate(blocks) if mark}
        if body.get("cache_control") and blocks:
            marks.setdefault(len(blocks) - 1, body["cache_control"])
        digests = _block_digests(blocks)
        use = CacheUse()
        best = -1
        for b in marks:
            for i in range(b, max(-1, b - LOOKBACK_BLOCKS), -1):
                if i > best and self._live((scope, digests[i]), now):
                    best = i
        if best >= 0:
            use.read = ends[best]
            lifetime = _lifetime(marks.get(best), profile)
            self._expires[(scope, digests[best])] = now + lifetime
        done = use.read
        for b in sorted(marks):
            if b <= best or ends[b] < profile.min_tokens:
                continue
            ttl = str(marks[b].get("ttl", "5m"))
            lifetime = _lifetime(marks[b], profile)
            if ttl == "1h":
                use.write_1h += ends[b] - done
            else:
                use.write_5m += ends[b] - done
            done = ends[b]
            use.writes.append(((scope, digests[b]), lifetime))
        return use


def _lifetime(mark: Any, profile: CacheProfile) -> float:
    """An Anthropic entry's lifetime: the mark's ttl (a persona's own lifetime for 5m)."""
    if isinstance(mark, Mapping) and mark.get("ttl") == "1h":
        return _TTL_S["1h"]
    return profile.lifetime_s


def _digest(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()


def _block_ends(blocks: Sequence[tuple[str, str, Any, str]]) -> list[int]:
    """Tokens of the prompt up to the end of each block."""
    ends, chars = [], 0
    for _, text, _, _ in blocks:
        chars += len(text)
        ends.append(chars // _CHARS_PER_TOKEN)
    return ends


def _block_digests(blocks: Sequence[tuple[str, str, Any, str]]) -> list[str]:
    """The digest of the prompt up to the end of each block (roles and texts)."""
    hasher, out = hashlib.sha256(), []
    for role, text, _, _ in blocks:
        hasher.update(f"\x1e{role}\x1f".encode())
        hasher.update(text.encode("utf-8", "surrogatepass"))
        out.append(hasher.copy().hexdigest())
    return out


def _prefix_digests(blocks: Sequence[tuple[str, str, Any, str]], marks: Sequence[int]) -> list[str]:
    """The digest of the prompt up to each token count of `marks` (ascending; characters /
    4)."""
    cuts = iter(m * _CHARS_PER_TOKEN for m in marks)
    cut = next(cuts, None)
    hasher, out, chars = hashlib.sha256(), [], 0
    for role, text, _, _ in blocks:
        hasher.update(f"\x1e{role}\x1f".encode())
        start = 0
        while cut is not None and cut - chars <= len(text):
            hasher.update(text[start : cut - chars].encode("utf-8", "surrogatepass"))
            start = cut - chars
            out.append(hasher.copy().hexdigest())
            cut = next(cuts, None)
        hasher.update(text[start:].encode("utf-8", "surrogatepass"))
        chars += len(text)
    return out
