"""Subcommands serve-judge: the simulated judge on loopback."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from flows.cli.app import app, console, state
from tasks.errors import InputError


def _load_personas(path: Path) -> list[Any]:
    """Persona dicts from a YAML or JSON file: a list, or a mapping with `personas`."""
    from pydantic import ValidationError

    from simjudge.persona import Persona
    from tasks.runs.config import read_yaml

    if path.suffix.lower() in (".yaml", ".yml"):
        data = read_yaml(path, "personas file")
    else:
        try:
            data = json.loads(path.read_text("utf-8"))
        except OSError as exc:
            raise InputError(f"cannot read personas file: {exc.strerror}", file=str(path)) from None
        except (ValueError, RecursionError) as exc:
            raise InputError(f"not valid JSON: {exc}", file=str(path)) from None
    if isinstance(data, dict) and "personas" in data:
        data = data["personas"]
    if not isinstance(data, list) or not data:
        raise InputError("expected a non-empty list of personas", file=str(path))
    personas = []
    for number, item in enumerate(data, start=1):
        try:
            personas.append(Persona.model_validate(item))
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'persona'}: {e['msg']}"
                for e in exc.errors()
            )
            raise InputError(f"bad persona: {problems}", file=str(path), row=number) from None
    return personas


def _rate(option: str, what: str) -> Any:
    """A fault-rate option, checked by typer: out of [0, 1] names the option."""
    return typer.Option(option, min=0.0, max=1.0, help=f"Rate of {what} (0 to 1).")


FLAGS = {
    "rate_429": "--fault-429",
    "rate_5xx": "--fault-5xx",
    "rate_529": "--fault-529",
    "rate_quota": "--fault-quota",
    "rate_stall": "--fault-stall",
    "stall_s": "--stall-s",
    "rate_malformed": "--fault-malformed",
    "rate_truncated": "--fault-truncated",
    "max_faults_per_request": "--max-faults-per-request",
    "latency_ms": "--latency-ms",
    "cache_min_tokens": "--cache-min-tokens",
}
"""The serve-judge flag of each persona and fault field it sets (named in range errors)."""


PERSONAS_HELP = """
A request's `model` picks a persona: `strong` (prefers the better answer 90% of the time),
`left-biased` (picks the answer shown first 60% of the time, whatever it says) and `noisy`
(65% skill, many ties, abstentions and invalid replies); a `reasoning_effort` of low or
high moves skill and bias a little. Which answer is better comes from a manifest's keys:
give `--manifest HASH` (from `judgeline freeze`) of the pairs you judge. Without it every
persona follows a stable preference derived from the two answers, unrelated to your keys,
so even `strong` scores about 0.5 against them. A vendor's model name (o4-mini,
claude-sonnet-4-5, ...) is answered as `strong` under that name, unless --persona is given.
"""


@app.command(
    "serve-judge",
    help="Serve the simulated judge (OpenAI and Anthropic style) until interrupted.\n\n"
    + " ".join(PERSONAS_HELP.split()),
)
def serve_judge(
    port: Annotated[
        int, typer.Option(min=0, max=65535, help="Port on 127.0.0.1 (0: a free port).")
    ] = 0,
    persona: Annotated[
        list[str] | None,
        typer.Option("--persona", help="Serve only these personas (repeatable)."),
    ] = None,
    personas: Annotated[
        Path | None, typer.Option("--personas", help="YAML or JSON file of personas.")
    ] = None,
    manifest: Annotated[
        str | None,
        typer.Option(
            "--manifest",
            help="Manifest hash (or prefix) in the work dir: its keys tell the personas which "
            "answer is better.",
        ),
    ] = None,
    latency_ms: Annotated[
        float | None, typer.Option("--latency-ms", min=0, help="Think time per reply (ms).")
    ] = None,
    cache_min_tokens: Annotated[
        int | None,
        typer.Option(
            "--cache-min-tokens",
            min=1,
            help="Shortest prompt the personas' prompt caches keep (tokens; default: the "
            "API's 1,024).",
        ),
    ] = None,
    fault_529: Annotated[
        float | None, _rate("--fault-529", "overloaded replies (Anthropic 529, OpenAI 503)")
    ] = None,
    fault_quota: Annotated[
        float | None, _rate("--fault-quota", "quota used up (OpenAI 429 insufficient_quota)")
    ] = None,
    fault_429: Annotated[float | None, _rate("--fault-429", "429s")] = None,
    fault_5xx: Annotated[float | None, _rate("--fault-5xx", "5xx")] = None,
    fault_stall: Annotated[float | None, _rate("--fault-stall", "stalls")] = None,
    stall_s: Annotated[
        float | None, typer.Option("--stall-s", min=0, help="How long a stall sleeps (s).")
    ] = None,
    fault_malformed: Annotated[float | None, _rate("--fault-malformed", "non-JSON bodies")] = None,
    fault_truncated: Annotated[float | None, _rate("--fault-truncated", "cut-short bodies")] = None,
    max_faults: Annotated[
        int | None,
        typer.Option(
            "--max-faults-per-request", min=0, help="Faults at most this often per request."
        ),
    ] = None,
    require_anthropic_version: Annotated[
        bool,
        typer.Option(
            "--require-anthropic-version",
            help="Refuse Messages requests without an anthropic-version header (400).",
        ),
    ] = False,
    api_key_env: Annotated[
        str | None,
        typer.Option("--api-key-env", help="Require the key held in this environment variable."),
    ] = None,
    batch_delay_s: Annotated[
        float,
        typer.Option("--batch-delay-s", min=0, help="Seconds until a provider batch ends."),
    ] = 0.0,
    tokens_per_minute: Annotated[
        float | None,
        typer.Option(
            "--tokens-per-minute",
            min=1,
            help="Enforce a tokens-per-minute limit (429 past it; token headers say what is left).",
        ),
    ] = None,
    batch_expire_after: Annotated[
        int | None,
        typer.Option(
            "--batch-expire-after",
            min=0,
            help="Answer only this many requests of each batch; the rest expire.",
        ),
    ] = None,
) -> None:
    """Serve the simulated judge (OpenAI and Anthropic style) until interrupted."""
    from pydantic import ValidationError

    from simjudge.persona import PRESETS, STAND_IN
    from simjudge.server import SimJudge, bind_loopback, die_with_parent, make_server

    die_with_parent()
    chosen = _load_personas(personas) if personas is not None else list(PRESETS)
    if persona:
        known = {p.name: p for p in chosen}
        unknown = [n for n in persona if n not in known]
        if unknown:
            raise InputError(f"unknown persona(s) {unknown}; known: {sorted(known)}")
        chosen = [known[n] for n in persona]
    given = {
        "rate_429": fault_429,
        "rate_5xx": fault_5xx,
        "rate_529": fault_529,
        "rate_quota": fault_quota,
        "rate_stall": fault_stall,
        "stall_s": stall_s,
        "rate_malformed": fault_malformed,
        "rate_truncated": fault_truncated,
        "max_faults_per_request": max_faults,
    }
    overrides = {k: v for k, v in given.items() if v is not None}
    # A vendor's model name no persona has is answered as `strong` under that name, unless
    # --persona names the only ones to serve.
    served = [*chosen, *([] if persona else [STAND_IN])]
    try:
        served = [
            p.model_copy(
                update={
                    "faults": p.faults.model_validate({**p.faults.model_dump(), **overrides}),
                    **({"latency_ms": latency_ms} if latency_ms is not None else {}),
                    **({"cache_min_tokens": cache_min_tokens} if cache_min_tokens else {}),
                }
            )
            for p in served
        ]
        for p in served:
            type(p).model_validate(p.model_dump())
    except ValidationError as exc:
        error = exc.errors()[0]
        named = [FLAGS[str(f)] for f in error["loc"] if f in FLAGS]
        # A check over several fields (rates summing past 1) names every flag given.
        flags = named or [FLAGS[k] for k in overrides if k.startswith("rate_")]
        raise InputError(f"serve-judge {', '.join(flags)}: {error['msg']}") from None

    api_key = None
    if api_key_env is not None:
        api_key = os.environ.get(api_key_env)
        if not api_key:
            raise InputError(f"--api-key-env {api_key_env}: the variable is unset or empty")

    table = None
    if manifest is not None:
        from tasks.ingest.manifest import read_manifest, resolve_manifest_hash

        _, table = read_manifest(state.work, resolve_manifest_hash(state.work, manifest))

    try:
        sock = bind_loopback(port)
    except OSError as exc:
        raise InputError(f"cannot listen on 127.0.0.1:{port}: {exc.strerror}") from None
    judge = SimJudge(
        served[: len(chosen)],
        stand_in=None if persona else served[-1],
        manifest=table,
        api_key=api_key,
        require_anthropic_version=require_anthropic_version,
        tokens_per_minute=tokens_per_minute,
    )
    judge.batches.settings.delay_s = batch_delay_s
    judge.batches.settings.expire_after = batch_expire_after
    bound = sock.getsockname()[1]
    console.print(f"judge: http://127.0.0.1:{bound}/v1", highlight=False, soft_wrap=True)
    sys.stdout.flush()
    # uvicorn in the main thread handles SIGINT and SIGTERM with a graceful stop.
    make_server(judge).run(sockets=[sock])
