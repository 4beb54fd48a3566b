"""What a run would send and cost, per judge config, before anything is sent.

Nothing is sent and nothing is written: the manifest and plan are built in memory and the
cache is only read. Input tokens follow `INPUT_TOKEN_RULE` (the rule the simulated judge
bills by; a real tokenizer differs by some percent). Output tokens are the mean of the
judge config's stored replies; without any, `DEFAULT_OUTPUT_TOKENS` at the low end and the
config's `max_tokens` (the most a reply can bill) at the high end. Live paired unanimity
sends an expected fraction of the grid read from the newest replay of the same judge
config (`summary.parquet`); without one, between 2/K of the grid (every pair stops after
its first couple) and all of it. A run with a drift probe adds a line per judge config,
`<config> (probe)`: the probe's fresh calls of tonight (`tasks.history.probe`).

The provider's prompt cache (`CACHE_RULE`): of the calls to send of one prompt (a
presentation's K repeats, `PlannedCall.prompt`), the first pays in full (and, with Anthropic,
writes the prompt to the cache) and each other one reads what the vendor caches of a prompt
that long (`tasks.judging.prompt_cache.hit_tokens`: nothing under the model's minimum
cacheable length). A batch judge is estimated with no cache hit (the vendors give hits
inside a batch on a best-effort basis) and, when it marks its requests for Anthropic's
cache (`prompt_cache: 1h`), a cache write per call. The USD is given with and without
caching.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq

from schemas import Pair
from schemas.config import RunConfig
from schemas.cost import EstimateRow, Price
from schemas.judge import JudgeSpec
from tasks.ingest.manifest import build_manifest_table
from tasks.ingest.sources import load_source_dict, source_label
from tasks.ingest.validation import validate_sources
from tasks.judging.cache import read_replies, stored_keys
from tasks.judging.planned import PlannedCall, plan_calls
from tasks.judging.prices import price_of
from tasks.judging.prompt_cache import hit_tokens, write_tokens
from tasks.judging.token_budget import input_tokens
from tasks.plan.designs import make_plan
from tasks.runs.check import readable
from tasks.runs.folder import RunFolder, is_run_id
from tasks.store.workdir import WorkDir

__all__ = [
    "CACHE_RULE",
    "DEFAULT_OUTPUT_TOKENS",
    "ESTIMATE_NOTE",
    "INPUT_TOKEN_RULE",
    "estimate_calls",
    "estimate_config",
    "estimate_plan",
    "input_tokens",
    "planned_for_config",
    "planned_probe_calls",
]

INPUT_TOKEN_RULE = "characters of the rendered messages / 4, rounded down, per call"
"""How prompt tokens are estimated (no tokenizer is needed, or downloaded)."""

DEFAULT_OUTPUT_TOKENS = 300
"""Output tokens per call assumed at the low end when a judge config has no stored reply."""

CACHE_RULE = (
    "each prompt's first call to send pays in full (Anthropic: writes it), its repeats read "
    "what the provider caches of it (none under the model's minimum, none in a batch, where "
    "every call marked for Anthropic's cache writes it)"
)
"""How the provider's prompt cache is estimated."""

ESTIMATE_NOTE = (
    f"input tokens: {INPUT_TOKEN_RULE}; output tokens: mean of the config's stored replies, "
    f"else {DEFAULT_OUTPUT_TOKENS} (low) to max_tokens (high); prompt cache: {CACHE_RULE}; "
    "USD at the price of its date with and without the prompt cache, a batch judge's at its "
    "batch discount (price as of); pu: live paired unanimity. Nothing was sent or written."
)
"""The caption of a printed estimate: how its figures are made."""


def _config_pairs(cfg: RunConfig) -> list[Pair]:
    # Read as the run's freeze stage reads them (`flows.prepare`), every field of the source.
    sources = []
    for d in cfg.datasets:
        source = d.model_dump()
        loaded = load_source_dict(source)
        sources.append((source_label(source), loaded.pairs, loaded.rows))
    pairs, _ = validate_sources(sources)
    return list(pairs)


def _grid(
    pairs: Sequence[Pair], cfg: RunConfig, judges: Sequence[JudgeSpec], scope: str | None
) -> list[PlannedCall]:
    _, manifest = build_manifest_table(list(pairs))
    _, presentations = make_plan(manifest, cfg.k, "full", None)
    return plan_calls(manifest, presentations, judges, cfg.template, "estimate", scope)


def planned_for_config(cfg: RunConfig) -> list[PlannedCall]:
    """The full-grid calls a run of `cfg` would plan, built in memory (nothing written)."""
    return _grid(_config_pairs(cfg), cfg, cfg.judges, None)


def planned_probe_calls(cfg: RunConfig, pairs: Sequence[Pair]) -> list[PlannedCall]:
    """The drift probe's calls of a run of `cfg` tonight (none without a probe): its sample's
    full grid in tonight's cache scope (`tasks.history.probe`)."""
    from tasks.history.probe import probe_judges, probe_sample, probe_scope

    if cfg.probe is None:
        return []
    frame = pd.DataFrame(
        {"dataset": [p.dataset for p in pairs], "pair_id": [p.pair_id for p in pairs]}
    )
    chosen = set(probe_sample(frame, cfg.probe))
    sample = [p for p in pairs if p.pair_id in chosen]
    return _grid(sample, cfg, probe_judges(cfg), probe_scope())


@dataclass(frozen=True)
class _Group:
    """The planned calls of one judge config."""

    calls: list[PlannedCall]

    @property
    def keys(self) -> set[str]:
        return {c.call_key for c in self.calls}


def _pu_fraction(work: WorkDir, judge: str, config: str) -> float | None:
    """Live paired unanimity's expected share of the grid, from the newest replay of a run
    that can be read."""
    found = work.fresh("runs", pattern="*/summary.parquet").glob("*/summary.parquet")
    runs = sorted((p for p in found if is_run_id(p.parent.name)), key=lambda p: p.stat().st_mtime)
    for path in reversed(runs):
        if not readable(RunFolder(work, path.parent.name)):
            continue  # skipped with a warning
        table = pq.read_table(path).to_pylist()
        rows = [
            r for r in table
            if (r["judge"], r["config"], r["design"], r["policy"])
            == (judge, config, "balanced", "paired_unanimity")
        ]  # fmt: skip
        if rows:
            pairs = sum(r["pairs"] for r in rows)
            return sum((1 - r["savings"]) * r["pairs"] for r in rows) / pairs
    return None


@dataclass(frozen=True)
class _Prompts:
    """The prompt tokens of calls to send, and what the provider's cache does with them."""

    tokens: int = 0
    cached: int = 0
    written: int = 0
    written_1h: int = 0

    def usd(self, price: Price | None, out: float, batch: bool, cache: bool) -> float | None:
        """The calls' price with (`cache`) or without the prompt cache; a `batch: true`
        judge's at the batch discount."""
        if price is None:
            return None
        used = {"cached_tokens": self.cached, "cache_write_tokens": self.written,
                "cache_write_1h_tokens": self.written_1h} if cache else {}  # fmt: skip
        return price.usd(self.tokens, round(out), batch=batch, **used)


def _prompt_tokens(calls: Sequence[PlannedCall]) -> _Prompts:
    """Prompt tokens of calls of one judge config, and the cache's reads and writes
    (`CACHE_RULE`)."""
    by_prompt: dict[tuple[str, str, str], list[PlannedCall]] = {}
    for c in calls:
        by_prompt.setdefault(c.prompt, []).append(c)
    tokens = cached = written = 0
    for group in by_prompt.values():
        spec, n = group[0].judge, len(group)
        each = input_tokens(group[0].messages)
        tokens += n * each
        if spec.batch:  # run together: every call marked for the cache writes, none reads
            written += n * write_tokens(spec, each)
            continue
        cached += (n - 1) * hit_tokens(spec, each)
        written += write_tokens(spec, each)
    one_hour = bool(calls) and calls[0].judge.prompt_cache == "1h"
    return _Prompts(tokens, cached, written, written if one_hour else 0)


def estimate_calls(planned: Sequence[PlannedCall], work: WorkDir, k: int) -> list[EstimateRow]:
    """Per judge config: planned, cached and to-send calls, tokens and the money range."""
    groups: dict[tuple[str, str], _Group] = {}
    for c in planned:
        groups.setdefault((c.judge.name, c.config.name), _Group([])).calls.append(c)
    stored = stored_keys(work)
    replies = read_replies(work, {c.call_key for c in planned} & stored)
    completions = dict(
        zip(
            replies.column("call_key").to_pylist(),
            replies.column("completion_tokens").to_pylist(),
            strict=True,
        )
    )
    rows = []
    for (judge, config), group in groups.items():
        spec = group.calls[0].judge
        price = price_of(spec)
        keys = group.keys
        to_send = {c.call_key: c for c in group.calls if c.call_key not in stored}
        prompts = _prompt_tokens(list(to_send.values()))
        seen = [completions[key] for key in keys & stored if completions.get(key) is not None]
        if seen:
            low = high = sum(seen) / len(seen)
            source = f"cached replies ({len(seen)})"
        else:
            limit = spec.decoding(spec.config(config)).get("max_tokens")
            low, high = DEFAULT_OUTPUT_TOKENS, max(DEFAULT_OUTPUT_TOKENS, limit or 0)
            source = "default"
        n = len(to_send)
        usd_low = prompts.usd(price, n * low, spec.batch, cache=True)
        usd_high = prompts.usd(price, n * high, spec.batch, cache=True)
        fraction = _pu_fraction(work, judge, config)
        share = (fraction, fraction) if fraction is not None else (2 / k, 1.0)
        rows.append(
            EstimateRow(
                judge=judge,
                config=config,
                planned_calls=len(keys),
                cached_calls=len(keys) - n,
                calls_to_send=n,
                input_tokens=prompts.tokens,
                cached_share=prompts.cached / prompts.tokens if prompts.tokens else None,
                cache_write_tokens=prompts.written,
                output_tokens_per_call=low if seen else DEFAULT_OUTPUT_TOKENS,
                output_source=source,
                usd_low=usd_low,
                usd_high=usd_high,
                uncached_usd_low=prompts.usd(price, n * low, spec.batch, cache=False),
                uncached_usd_high=prompts.usd(price, n * high, spec.batch, cache=False),
                price_as_of=None if price is None else price.as_of,
                pu_expected_calls=None if fraction is None else fraction * len(keys),
                pu_usd_low=None if usd_low is None else share[0] * usd_low,
                pu_usd_high=None if usd_high is None else share[1] * usd_high,
            )
        )
    return rows


def estimate_config(path: str | Path, work: WorkDir) -> list[EstimateRow]:
    """The estimate of one run configuration file (`judgeline estimate`)."""
    from tasks.runs.config import load_run_config

    cfg = load_run_config(path)
    pairs = _config_pairs(cfg)
    rows = estimate_calls(_grid(pairs, cfg, cfg.judges, None), work, cfg.k)
    probe = estimate_calls(planned_probe_calls(cfg, pairs), work, cfg.k)
    # The probe sends its full grid afresh every night: a line of its own per judge config.
    none = {"pu_expected_calls": None, "pu_usd_low": None, "pu_usd_high": None}
    return rows + [r.model_copy(update={"config": f"{r.config} (probe)", **none}) for r in probe]


def estimate_plan(
    work: WorkDir, plan_id: str, judges: Sequence[JudgeSpec], template_id: str
) -> list[EstimateRow]:
    """The estimate of sending a stored plan's calls to `judges` (`judge --dry-run`)."""
    from tasks.ingest.manifest import read_manifest
    from tasks.plan.store import read_plan

    info, presentations = read_plan(work, plan_id)
    _, manifest = read_manifest(work, info.manifest_hash)
    planned = plan_calls(manifest, presentations, list(judges), template_id, "estimate")
    return estimate_calls(planned, work, info.k)
