"""Judges through a LiteLLM proxy: throughput, outcomes, request bodies and failures vs direct.

Usage: python bench/gateway.py [--litellm PATH] [--pairs 40] [--k 2] [--concurrency 8]
                               [--latency-ms 0] [--num-retries N] [--skip-failures]

Starts the simulated judge with a deterministic persona (`exact`: always the keyed-or-latent
preferred answer, never a tie, always `>>`) and a real LiteLLM proxy in front of it
(`litellm --config CFG`, from --litellm; exit 2 when it is missing), then runs the judge
stage of a demo plan for each route, once straight at the simulated judge and once through
the proxy:

  openai      profile openai_compatible -> proxy /v1/chat/completions -> openai/exact
  anthropic   provider anthropic        -> proxy /v1/messages         -> anthropic/exact
  translated  profile openai_compatible -> proxy /v1/chat/completions -> anthropic/exact

Per route it prints calls, failures (direct/gateway), the judge stage's wall time and the
throughput ratio gateway/direct, and the send phase's calls/s (direct / gateway = ratio),
whether the parsed outcomes agree call for call, how the requests the simulated judge
received differ (header names, body fields, the prompt's text) and how the stored replies
do (verbatim text, finish reasons, prompt tokens), with LiteLLM's CPU per call. Then
failures through the proxy (an unknown model, a wrong key, 429s, used-up quota, Anthropic's
529): the category judgeline gave them, judgeline's attempts against the requests the
simulated judge received, and what `judgeline failures RUN` says.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

DEFAULT_LITELLM = shutil.which("litellm") or "litellm"
"""The proxy on PATH; LiteLLM is not a dependency of the project (install it apart)."""
KEY_ENV = "JUDGELINE_BENCH_GATEWAY_KEY"
REPO = Path(__file__).resolve().parents[1]


def _litellm_or_exit(path: str) -> Path:
    found = Path(path)
    if not (found.is_file() and os.access(found, os.X_OK)):
        print(
            f"LiteLLM proxy not found at {path}. Install it in a venv of its own, e.g.\n"
            "  python3 -m venv ~/litellm-venv && ~/litellm-venv/bin/pip install 'litellm[proxy]'\n"
            "and pass its `litellm` executable with --litellm PATH.",
            file=sys.stderr,
        )
        sys.exit(2)
    return found


_HOME = Path(tempfile.mkdtemp(prefix="judgeline-bench-prefect-"))
os.environ.setdefault("PREFECT_HOME", str(_HOME))
os.environ.setdefault("PREFECT_RESULTS_LOCAL_STORAGE_PATH", str(_HOME / "results"))
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "ERROR")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
sys.path.insert(0, str(REPO))

import httpx  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
import yaml  # noqa: E402
from _common import warm_prefect  # noqa: E402

from schemas.judge import JudgeSpec  # noqa: E402
from simjudge.persona import Persona, persona_file_text  # noqa: E402
from simjudge.server import bind_loopback, simjudge_subprocess  # noqa: E402
from tasks.ingest.demo_benchmark import demo_pairs  # noqa: E402
from tasks.ingest.manifest import freeze_manifest, read_manifest  # noqa: E402
from tasks.judging.cache import read_attempts, read_replies  # noqa: E402
from tasks.plan import make_plan, write_plan  # noqa: E402
from tasks.prompts.parsing import parse_reply  # noqa: E402
from tasks.runs.folder import RunFolder  # noqa: E402
from tasks.store.workdir import WorkDir  # noqa: E402

EXACT = Persona(name="exact", skill=1.0, left_bias=0.0, tie_rate=0.0, strong_rate=1.0)
NO_FAULTS = {"rate_429": 0.0, "rate_quota": 0.0, "rate_529": 0.0, "rate_5xx": 0.0}


def tail(path: str) -> str:
    """The end of a log file."""
    return Path(path).read_text(errors="replace")[-3000:]


@contextmanager
def litellm_proxy(
    exe: Path, sim_root: str, folder: Path, num_retries: int | None
) -> Iterator[tuple[str, int]]:
    """A LiteLLM proxy on loopback routing `exact` (OpenAI dialect) and `claude-exact`
    (Anthropic dialect) to the simulated judge, retrying as `num_retries` says (None:
    LiteLLM's default); yields its root URL and process id."""
    key = "sk-" + secrets.token_hex(16)
    os.environ[KEY_ENV] = key
    upstream = {"api_key": "sk-simulated-judge-unused"}
    config = {
        "model_list": [
            {"model_name": "exact",
             "litellm_params": {"model": "openai/exact", "api_base": sim_root + "/v1", **upstream}},
            {"model_name": "claude-exact",
             "litellm_params": {"model": "anthropic/exact", "api_base": sim_root, **upstream}},
        ],
        "general_settings": {"master_key": key},
    }  # fmt: skip
    if num_retries is not None:
        config["litellm_settings"] = {"num_retries": num_retries}
    cfg = folder / "litellm.yaml"
    cfg.write_text(yaml.safe_dump(config))
    sock = bind_loopback(0)
    port = sock.getsockname()[1]
    sock.close()
    log = (folder / "litellm.log").open("w")
    proc = subprocess.Popen(
        [str(exe), "--config", str(cfg), "--host", "127.0.0.1", "--port", str(port)],
        stdout=log, stderr=subprocess.STDOUT, cwd=folder, start_new_session=True,
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},  # no fetch at start-up
    )  # fmt: skip
    root = f"http://127.0.0.1:{port}"
    started = time.perf_counter()
    try:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"litellm exited with {proc.returncode}:\n{tail(log.name)}")
            try:
                if httpx.get(root + "/health/liveliness", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.perf_counter() - started > 180:
                raise RuntimeError(f"litellm did not start in 180 s:\n{tail(log.name)}")
            time.sleep(0.5)
        print(f"litellm proxy up in {time.perf_counter() - started:.1f} s at {root}")
        yield root, proc.pid
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def cpu_seconds(pid: int) -> float:
    """CPU seconds (user + system) a process has used so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Bench:
    def __init__(
        self, args: argparse.Namespace, root: Path, sim_root: str, gw_root: str, gw_pid: int
    ) -> None:
        self.args, self.root, self.sim_root, self.gw_root = args, root, sim_root, gw_root
        self.gw_pid = gw_pid
        self.runs = 0

    def stage(self, name: str, pairs: int, k: int) -> tuple[WorkDir, str]:
        work = WorkDir(self.root / name)
        frozen = freeze_manifest([("demo", demo_pairs()[:pairs])], work)
        _, manifest = read_manifest(work, frozen.info.manifest_hash)
        info, table = make_plan(manifest, k, "full", None)
        write_plan(work, info, table)
        return work, info.plan_id

    def fresh(self, template: WorkDir, name: str) -> WorkDir:
        work = WorkDir(self.root / name)
        for folder in ("manifests", "plans"):
            shutil.copytree(template.root / folder, work.root / folder)
        return work

    def judge(self, name: str, via_gateway: bool, dialect: str, model: str, **kw: Any) -> JudgeSpec:
        root = self.gw_root if via_gateway else self.sim_root
        spec: dict[str, Any] = {
            "name": name, "model": model, "max_concurrency": self.args.concurrency,
            "api_key_env": KEY_ENV if via_gateway else None,
        }  # fmt: skip
        if dialect == "anthropic":
            spec.update(provider="anthropic", base_url=root)
        else:
            spec.update(profile="openai_compatible", base_url=root + "/v1", seed="plan")
        spec.update(kw)
        return JudgeSpec.model_validate(spec)

    def sim(self, method: str, path: str, body: Any = None) -> Any:
        return httpx.request(method, self.sim_root + path, json=body, timeout=10).json()

    def run(self, work: WorkDir, plan_id: str, spec: JudgeSpec) -> dict[str, Any]:
        """Judge the plan with one judge; counts, wall seconds and what the judge received."""
        from flows.stageflows import judge_flow

        self.runs += 1
        run_id = f"gw-{self.runs}-{spec.name}"
        self.sim("DELETE", "/_judgeline/log")
        cpu = cpu_seconds(self.gw_pid)
        started = time.perf_counter()
        counts = asyncio.run(
            judge_flow(run_id=run_id, plan_id=plan_id, judges=[spec], work_dir=str(work.root))
        )
        wall = time.perf_counter() - started
        cpu = cpu_seconds(self.gw_pid) - cpu
        return {
            "run_id": run_id, "counts": counts, "wall": wall, "gateway_cpu": cpu,
            "log": self.sim("GET", "/_judgeline/log"), "work": work,
        }  # fmt: skip


def stored(result: dict[str, Any]) -> dict[tuple[str, int], dict[str, Any]]:
    """(presentation, seed) -> the stored reply of every call of a run, with its parse."""
    work = result["work"]
    calls = pq.read_table(RunFolder(work, result["run_id"]).calls).to_pylist()
    replies = {r["call_key"]: r for r in read_replies(work).to_pylist()}
    found = {}
    for call in calls:
        reply = replies.get(call["call_key"])
        if reply is not None:
            parsed = parse_reply(call["template_id"], reply["raw_reply"], reply["finish_reason"])
            found[(call["presentation_id"], call["seed"])] = {
                **reply, "outcome": (parsed.label, parsed.strength)
            }  # fmt: skip
    return found


def reply_diff(direct: dict[Any, dict[str, Any]], gateway: dict[Any, dict[str, Any]]) -> str:
    """What judgeline stored from the proxy's replies, against direct: verbatim texts,
    finish reasons and prompt tokens."""
    same_text = sum(1 for k, r in direct.items() if k in gateway and
                    gateway[k]["raw_reply"] == r["raw_reply"])  # fmt: skip
    finish = {s: sorted({str(r["finish_reason"]) for r in d.values()})
              for s, d in (("direct", direct), ("gateway", gateway))}  # fmt: skip
    tokens = {s: sum(r["prompt_tokens"] or 0 for r in d.values())
              for s, d in (("direct", direct), ("gateway", gateway))}  # fmt: skip
    return (
        f"    replies verbatim identical {same_text}/{len(direct)}; finish reasons "
        f"{finish['direct']} -> {finish['gateway']}; prompt tokens {tokens['direct']} -> "
        f"{tokens['gateway']}"
    )


def body_diff(direct: list[dict[str, Any]], gateway: list[dict[str, Any]]) -> list[str]:
    """How the requests the simulated judge received through the proxy differ from direct."""
    lines = []
    for side, log in (("direct", direct), ("gateway", gateway)):
        paths = sorted({e["path"] for e in log})
        lines.append(f"    {side:8} {len(log)} requests to {', '.join(paths)}")
    if not direct or not gateway:
        return lines
    d_heads = set.intersection(*(set(e["headers"]) for e in direct))
    g_heads = set.intersection(*(set(e["headers"]) for e in gateway))
    lines.append(f"    headers added   {sorted(g_heads - d_heads) or '-'}")
    lines.append(f"    headers dropped {sorted(d_heads - g_heads) or '-'}")

    def values(log: list[dict[str, Any]]) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}
        for entry in log:
            for name, value in (entry["fields"] or {}).items():
                out.setdefault(name, set()).add(json.dumps(value, sort_keys=True))
        return out

    d_fields, g_fields = values(direct), values(gateway)
    added = {n: sorted(v) for n, v in g_fields.items() if n not in d_fields}
    dropped = {n: sorted(v) for n, v in d_fields.items() if n not in g_fields}
    changed = {
        n: (sorted(d_fields[n]), sorted(g_fields[n]))
        for n in d_fields.keys() & g_fields.keys()
        if d_fields[n] != g_fields[n]
    }
    lines.append(f"    fields added    {added or '-'}")
    lines.append(f"    fields dropped  {dropped or '-'}")
    lines.append(f"    fields changed  {changed or '-'} (direct -> gateway)")
    same = Counter(e["messages_sha256"] for e in direct) == Counter(
        e["messages_sha256"] for e in gateway
    )
    lines.append(f"    prompt text (system + messages, role by role) identical: {same}")
    return lines


ROUTES: dict[str, tuple[str, str, dict[str, Any]]] = {
    # route: (judge dialect, gateway model, judge fields); the direct judge is the same
    # judge with the simulated judge's own model name at its base URL.
    "openai": ("openai", "exact", {}),
    "anthropic": ("anthropic", "claude-exact", {}),
    # LiteLLM refuses a seed for an Anthropic model (400 UnsupportedParamsError) unless
    # `drop_params`: the openai_compatible profile's default, no seed.
    "translated": ("openai", "claude-exact", {"seed": None}),
}


def compare(bench: Bench) -> None:
    args = bench.args
    print(f"prefect warm-up flow: {warm_prefect():.1f} s (not counted)")
    template, plan_id = bench.stage("template", args.pairs, args.k)
    print(f"\n{args.pairs} pairs, K={args.k}, concurrency {args.concurrency}, "
          f"think time {args.latency_ms} ms")  # fmt: skip
    print(f"{'route':11} {'calls':>6} {'failed':>7} {'direct s':>9} {'gateway s':>10} "
          f"{'ratio':>6}  {'sending, calls/s':>24}  outcomes identical")  # fmt: skip
    details = []
    for route, (dialect, model, fields) in ROUTES.items():
        spec = bench.judge(f"direct-{route}", False, dialect, "exact", **fields)
        dr = bench.run(bench.fresh(template, f"direct-{route}"), plan_id, spec)
        spec = bench.judge(f"gateway-{route}", True, dialect, model, **fields)
        gw = bench.run(bench.fresh(template, f"gateway-{route}"), plan_id, spec)
        d_rep, g_rep = stored(dr), stored(gw)
        d_out = {k: r["outcome"] for k, r in d_rep.items()}
        g_out = {k: r["outcome"] for k, r in g_rep.items()}
        agree = sum(1 for key, value in d_out.items() if g_out.get(key) == value)
        calls = dr["counts"]["stored"] + dr["counts"]["failed"]
        failed = f"{dr['counts']['failed']}/{gw['counts']['failed']}"
        ratio = dr["wall"] / gw["wall"]
        d_rate, g_rate = (r["counts"]["sent"] / r["counts"]["send_seconds"] for r in (dr, gw))
        rates = f"{d_rate:,.0f} / {g_rate:,.0f} = {g_rate / d_rate:.2f}"
        print(f"{route:11} {calls:6} {failed:>7} {dr['wall']:9.2f} {gw['wall']:10.2f} "
              f"{ratio:6.2f}  {rates:>24}  {d_out == g_out} ({agree}/{len(d_out)})")  # fmt: skip
        per_call = 1000 * gw["gateway_cpu"] / max(1, len(gw["log"]))
        proxy_cpu = f"    LiteLLM's CPU {per_call:.1f} ms per call"
        details.append(
            (route, [*body_diff(dr["log"], gw["log"]), reply_diff(d_rep, g_rep), proxy_cpu])
        )
    print("\nWhat the simulated judge received through the proxy, against direct:")
    for route, lines in details:
        print(f"  {route}")
        print("\n".join(lines))


def failures_text(work: WorkDir, run_id: str) -> str:
    """What `judgeline failures RUN` prints, indented, blank lines and the rerun hint left out."""
    command = [sys.executable, "-c", "from flows.cli import main; main()",
               "--work-dir", str(work.root), "failures", run_id]  # fmt: skip
    paths = [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "COLUMNS": "110"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=REPO)
    lines = (done.stdout + done.stderr).splitlines()
    return "\n".join(
        "      " + line.rstrip() for line in lines if line.strip() and "rerun-failed" not in line
    )


WRONG_KEY_ENV = "JUDGELINE_BENCH_WRONG_KEY"
FAILURES: list[tuple[str, str, str, dict[str, Any], dict[str, Any]]] = [
    # (name, route dialect, gateway model, simulated judge faults, judge fields)
    ("unknown model", "openai", "no-such-model", {}, {}),
    ("wrong key (openai)", "openai", "exact", {}, {"api_key_env": WRONG_KEY_ENV}),
    ("wrong key (anthropic)", "anthropic", "claude-exact", {}, {"api_key_env": WRONG_KEY_ENV}),
    ("429 (openai)", "openai", "exact", {"rate_429": 1.0, "retry_after_s": 1}, {}),
    ("quota (openai)", "openai", "exact", {"rate_quota": 1.0}, {}),
    ("429 (anthropic)", "anthropic", "claude-exact", {"rate_429": 1.0, "retry_after_s": 1}, {}),
    ("credit (anthropic)", "anthropic", "claude-exact", {"rate_quota": 1.0}, {}),
    ("529 (anthropic)", "anthropic", "claude-exact", {"rate_529": 1.0}, {}),
]


def failures(bench: Bench) -> None:
    template, plan_id = bench.stage("small", 1, 2)
    print("\nFailures through the proxy (4 calls each, judge max_retries 1):")
    os.environ[WRONG_KEY_ENV] = "sk-not-this-proxys-key"
    for i, (name, dialect, model, faults, fields) in enumerate(FAILURES):
        bench.sim("POST", "/_judgeline/faults", {**NO_FAULTS, **faults})
        spec = bench.judge(f"gateway-{dialect}", True, dialect, model, max_retries=1, **fields)
        work = bench.fresh(template, f"fail-{i}")
        result = bench.run(work, plan_id, spec)
        bench.sim("POST", "/_judgeline/faults", NO_FAULTS)
        calls = pq.read_table(RunFolder(work, result["run_id"]).calls).to_pylist()
        categories = Counter(c["error_category"] or c["status"] for c in calls)
        attempts = read_attempts(work).num_rows
        upstream = len(result["log"])
        print(f"  {name:19} {dict(categories)}  judgeline attempts {attempts}, upstream requests "
              f"{upstream}, {result['wall']:.1f} s")  # fmt: skip
        print(failures_text(work, result["run_id"]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--litellm", default=DEFAULT_LITELLM, help="the `litellm` executable")
    parser.add_argument("--pairs", type=int, default=40)
    parser.add_argument("--k", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--latency-ms", type=float, default=0.0, help="simulated think time")
    parser.add_argument(
        "--num-retries", type=int, default=None,
        help="LiteLLM's own retries (litellm_settings.num_retries; default: LiteLLM's)",
    )  # fmt: skip
    parser.add_argument("--skip-failures", action="store_true")
    args = parser.parse_args()
    exe = _litellm_or_exit(args.litellm)
    with tempfile.TemporaryDirectory(prefix="judgeline-bench-gw-") as tmp:
        root = Path(tmp)
        personas = root / "personas.json"
        personas.write_text(persona_file_text((EXACT,)))
        sim_args = ("--personas", str(personas), "--latency-ms", str(args.latency_ms))
        with simjudge_subprocess(*sim_args) as base_url:
            sim_root = base_url.rsplit("/v1", 1)[0]
            with litellm_proxy(exe, sim_root, root, args.num_retries) as (gw_root, gw_pid):
                bench = Bench(args, root, sim_root, gw_root, gw_pid)
                compare(bench)
                if not args.skip_failures:
                    failures(bench)


if __name__ == "__main__":
    main()
