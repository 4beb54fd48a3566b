"""judgeline against inspect_ai: the same rendered judge calls, the same simulated judge,
whole commands, cold and warm.

Usage: .venv/bin/python bench/vs_inspect.py [--inspect-venv DIR] [--pairs 147] [--k 4]
       [--connections 64] [--repeat 1] [--only 1176|7056]

inspect_ai is not a judgeline dependency: it lives in a virtual environment of its own,
made by this script when DIR has no `inspect` (default ~/.cache/judgeline/inspect-venv), as

    python3 -m venv DIR && DIR/bin/pip install inspect_ai==0.3.285 openai

(`--inspect-version` picks another release). Never in CI, never in pyproject.toml.

The calls: the first `--pairs` pairs of the demo benchmark (a table dataset), the full grid
of K seeds x both display orders, rendered by judgeline itself (`plan_calls` and
`OpenAIProvider.body` over the plan of judgeline's own cold run). Two arrangements:

- 1,176 calls: 147 pairs x K 4 x 2 orders x 1 judge config (persona `strong`, `low`);
- 7,056 calls: the demo's arrangement, 3 personas x 2 reasoning configs, the same pairs.
  (The 7,172 once quoted for it is not a multiple of 8 calls per pair and judge config;
  the demo itself, 147 pairs x 48, is 7,056.)

Two of the demo's first 147 pairs repeat two others word for word (demo-code-009 is
demo-code-003, demo-code-037 is demo-code-013), so 16 of every 1,176 planned calls share a
call key with another: judgeline sends each key once (1,160 and 6,960 calls), and inspect is
given the same distinct calls.

inspect_ai gets one task per judge config, generated into a temporary folder: one Sample per
call with the call's exact messages, its seed and its prompt_cache_key (passed to `generate`,
the key as extra_body), the judge config's temperature, max_tokens and reasoning_effort in the
task's GenerateConfig, no scorer. Its model is `openai-api/simjudge/<persona>`, inspect's
OpenAI-compatible provider, with SIMJUDGE_BASE_URL at the simulated judge and a dummy key: it
sends bodies equal to judgeline's, field for field (checked below). `openai/<persona>` does
not: inspect takes a model name it does not know for an OpenAI frontier model and sends it to
the Responses API (`/v1/responses`, which the simulated judge does not serve), and with
`responses_api=false` sends the system prompt as a `developer` message with
`max_completion_tokens` and no temperature. The command is

    inspect eval tasks.py --max-connections 64 --max-tasks N --cache --display none --log-dir D

with an empty INSPECT_CACHE_DIR when cold, and the same command again when warm (served by
inspect's own model cache).

judgeline: `judgeline run CONFIG` with the same judges at `max_concurrency` 64, in a fresh
work dir (cold) and again in the same one (warm, every reply from judgeline's cache). Both
sides hold 64 connections per persona: judgeline runs its judges at once, each with its own
pool; inspect scopes `--max-connections` to each (key, model), and `--max-tasks` runs every
judge config's task at once.

Before timing, the work dirs' shared local Prefect server is started (`judgeline server
start`, one Prefect home for the bench) and both sides run 8 calls untimed, so
neither side pays for a cold disk cache or the session's first start-up. The simulated judge
(`judgeline serve-judge --latency-ms 0`, no faults) logs every request: each cold run must
send exactly the calls judgeline's cold run sent (same model, fields, seed and messages
digest, as a multiset) and each warm run none; inspect's logs must say `success`.

Prints, per arrangement, the cold and warm walls and judgeline's speed-up (inspect's wall /
judgeline's; targets >= 2x cold, >= 10x warm), with the load average at the start of each
timed command beside them; walls are medians of --repeat runs (cold ones in fresh folders).
"""

from __future__ import annotations

import argparse
import json
import keyword
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

sys.path.insert(0, str(Path(__file__).resolve().parent))

from commands import JUDGELINE, Bench, latest_stages, load  # noqa: E402

if TYPE_CHECKING:
    from schemas.judge import JudgeSpec

INSPECT_VERSION = "0.3.285"
PROVIDER = "simjudge"
"""inspect's name for the simulated judge (`openai-api/<PROVIDER>/<model>`, `<PROVIDER>_*`)."""

TASK_CONFIG = {"temperature", "max_tokens", "top_p", "reasoning_effort"}
"""Body fields that become the task's GenerateConfig (same names in inspect); the seed is
passed to `generate` per call, and any other field (`prompt_cache_key`) as its extra_body."""

TASKS_HEADER = '''"""judgeline's rendered judge calls as inspect_ai tasks, one per judge config."""

import json
from pathlib import Path

from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import (
    ChatMessageAssistant, ChatMessageSystem, ChatMessageUser, GenerateConfig,
)
from inspect_ai.solver import Generate, TaskState, solver

HERE = Path(__file__).parent
ROLES = {"system": ChatMessageSystem, "user": ChatMessageUser,
         "assistant": ChatMessageAssistant}


def calls(name):
    samples = []
    with (HERE / f"{name}.jsonl").open() as handle:
        for line in handle:
            call = json.loads(line)
            messages = [ROLES[m["role"]](content=m["content"]) for m in call["messages"]]
            metadata = {"seed": call["seed"], "extra": call["extra"]}
            samples.append(Sample(id=call["id"], input=messages, metadata=metadata))
    return MemoryDataset(samples, name=name)


@solver
def send():
    async def solve(state: TaskState, generate: Generate) -> TaskState:
        extra = state.metadata["extra"] or None
        return await generate(state, seed=state.metadata["seed"], extra_body=extra)

    return solve
'''

TASK = """

@task
def {name}():
    return Task(dataset=calls("{name}"), solver=send(), model="{model}",
                config=GenerateConfig(**{config!r}))
"""

CHECK_LOGS = """
import sys
from inspect_ai.log import read_eval_log
for path in sys.argv[1:]:
    log = read_eval_log(path, header_only=True)
    done = log.results.completed_samples if log.results else 0
    total = log.results.total_samples if log.results else 0
    if log.status != "success" or done != total:
        sys.exit(f"{path}: {log.status}, {done} of {total} samples; {log.error}")
"""


def ensure_inspect(venv: Path, version: str) -> str:
    """The inspect_ai venv at `venv` (made if missing); its inspect_ai version."""
    if not (venv / "bin" / "inspect").exists():
        print(f"installing inspect_ai=={version} into {venv} (not a judgeline dependency)")
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet",
                        f"inspect_ai=={version}", "openai"], check=True)  # fmt: skip
    probe = "import importlib.metadata as m; print(m.version('inspect_ai'))"
    return subprocess.run([str(venv / "bin" / "python"), "-c", probe], check=True,
                          capture_output=True, text=True).stdout.strip()  # fmt: skip


def judges(base_url: str, k: int, connections: int, *, demo: bool) -> list[JudgeSpec]:
    """The demo's judges at `connections` each; only `strong` under `low` unless `demo`."""
    from simjudge.demo import demo_config

    chosen = demo_config(base_url, k=k).judges
    if not demo:
        chosen = [chosen[0].model_copy(update={"configs": chosen[0].configs[:1]})]
    return [j.model_copy(update={"max_concurrency": connections}) for j in chosen]


def write_pairs(path: Path, pairs: int) -> None:
    from tasks.ingest.demo_benchmark import demo_pairs

    with path.open("w") as handle:
        for p in demo_pairs()[:pairs]:
            handle.write(json.dumps({"pair_id": p.pair_id, "question": p.question,
                                     "answer_a": p.answer_a, "answer_b": p.answer_b,
                                     "key": p.key}) + "\n")  # fmt: skip


def write_config(path: Path, work: Path, table: Path, chosen: list[JudgeSpec], k: int) -> None:
    import yaml

    from simjudge.demo import demo_config

    config = demo_config(chosen[0].base_url, k=k).model_dump(mode="json", exclude_none=True)
    config["work_dir"] = str(work)
    config["datasets"] = [{"kind": "table", "path": str(table), "dataset": "demo",
                           "mapping": "pair_id=pair_id,question=question,answer_a=answer_a,"
                                      "answer_b=answer_b,key=key"}]  # fmt: skip
    config["judges"] = [j.model_dump(mode="json", exclude_none=True) for j in chosen]
    path.write_text(yaml.safe_dump(config))


def write_tasks(work: Path, chosen: list[JudgeSpec], out: Path) -> tuple[int, int, int]:
    """judgeline's planned calls of `work`'s plan, rendered as judgeline sends them, written
    as one inspect task (and its JSONL of calls) per judge config into `out`/tasks.py;
    returns (planned calls, distinct calls, tasks).

    A call whose key another planned call already has (two pairs rendering the same prompt)
    is left out: judgeline sends it once."""
    import asyncio

    import httpx

    from tasks.ingest.manifest import read_manifest
    from tasks.judging.planned import plan_calls
    from tasks.judging.providers import OpenAIProvider
    from tasks.plan import read_plan
    from tasks.prompts.templates import DEFAULT_TEMPLATE
    from tasks.store.workdir import WorkDir

    wd = WorkDir(work)
    plan_dir = next(p for p in wd.plans.iterdir() if p.is_dir())
    info, presentations = read_plan(wd, plan_dir.name, gate=False)
    _, manifest = read_manifest(wd, info.manifest_hash, gate=False)
    groups: dict[str, tuple[str, dict, list[dict]]] = {}
    seen: set[str] = set()
    planned = 0

    async def render() -> None:
        nonlocal planned
        async with httpx.AsyncClient() as http:
            for judge in chosen:
                provider = OpenAIProvider(judge, http, None)
                for call in plan_calls(manifest, presentations, [judge], DEFAULT_TEMPLATE,
                                       "bench"):  # fmt: skip
                    planned += 1
                    if call.call_key in seen:
                        continue
                    seen.add(call.call_key)
                    body = provider.body(call.request())
                    extra = {k: v for k, v in body.items()
                             if k not in TASK_CONFIG | {"model", "messages", "seed"}}  # fmt: skip
                    name = f"{judge.name}_{call.config.name}".replace("-", "_")
                    assert name.isidentifier() and not keyword.iskeyword(name), name
                    model = f"openai-api/{PROVIDER}/{body['model']}"
                    config = {k: v for k, v in body.items() if k in TASK_CONFIG}
                    group = groups.setdefault(name, (model, config, []))
                    assert (group[0], group[1]) == (model, config), (name, model, config)
                    group[2].append({"id": call.call_key, "seed": body["seed"], "extra": extra,
                                     "messages": body["messages"]})  # fmt: skip

    asyncio.run(render())
    out.mkdir(parents=True, exist_ok=True)
    source = TASKS_HEADER
    for name, (model, config, rows) in groups.items():
        (out / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        source += TASK.format(name=name, model=model, config=config)
    (out / "tasks.py").write_text(source)
    return planned, len(seen), len(groups)


class Judge:
    """The simulated judge's request log: what each command sent."""

    def __init__(self, base_url: str) -> None:
        self.log_url = base_url.rsplit("/v1", 1)[0] + "/_judgeline/log"

    def sent(self) -> Counter[str]:
        """The judge calls answered since the last call, as a multiset of (fields, messages
        digest); the log is cleared."""
        with urllib.request.urlopen(self.log_url) as response:
            entries = json.load(response)
        urllib.request.urlopen(urllib.request.Request(self.log_url, method="DELETE")).close()
        calls = Counter(
            json.dumps([e["fields"], e["messages_sha256"]], sort_keys=True)
            for e in entries
            if e["path"].endswith("/chat/completions")
        )
        failed = [e for e in entries if e["status"] != 200]
        if failed:
            raise SystemExit(f"{len(failed)} requests not answered 200, e.g. {failed[0]}")
        return calls


class Inspect:
    """`inspect eval` of one folder of generated tasks, as a user runs it there (inspect
    reads a task file's path as a pattern relative to the working directory)."""

    def __init__(self, venv: Path, folder: Path, base_url: str, tasks: int, connections: int):
        self.venv, self.folder = venv, folder
        drop = ("INSPECT_", "OPENAI_", f"{PROVIDER.upper()}_")
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
        self.env[f"{PROVIDER.upper()}_BASE_URL"] = base_url
        self.env[f"{PROVIDER.upper()}_API_KEY"] = "dummy"
        self.env["XDG_DATA_HOME"] = str(folder / "data")  # its traces stay in the bench
        self.args = ["--max-connections", str(connections), "--max-tasks", str(tasks),
                     "--cache", "--display", "none"]  # fmt: skip

    def eval(self, cache: Path, logs: Path) -> float:
        """One timed `inspect eval`, its model cache at `cache`; its logs must say success."""
        env = {**self.env, "INSPECT_CACHE_DIR": str(cache)}
        command = [str(self.venv / "bin" / "inspect"), "eval", "tasks.py", *self.args,
                   "--log-dir", str(logs)]  # fmt: skip
        before = set(logs.glob("*.eval"))
        started = time.perf_counter()
        result = subprocess.run(command, env=env, cwd=self.folder, capture_output=True, text=True)
        wall = time.perf_counter() - started
        new = sorted(set(logs.glob("*.eval")) - before)
        if result.returncode != 0 or not new:
            raise SystemExit(f"{' '.join(command)} exited {result.returncode}, {len(new)} "
                             f"logs:\n{result.stderr[-3000:]}")  # fmt: skip
        subprocess.run([str(self.venv / "bin" / "python"), "-c", CHECK_LOGS, *map(str, new)],
                       check=True, env=env)  # fmt: skip
        return wall


def compare(args: argparse.Namespace, bench: Bench, judge: Judge, base_url: str,
            venv: Path, demo: bool) -> list[tuple[str, str]]:  # fmt: skip
    """Cold and warm walls of both sides for one arrangement; the table's rows."""
    chosen = judges(base_url, args.k, args.connections, demo=demo)
    size = "demo" if demo else "one"
    walls: dict[str, list[float]] = {"jl cold": [], "jl warm": [], "in cold": [], "in warm": []}
    overheads: dict[str, list[float]] = {"cold": [], "warm": []}
    loads: dict[str, list[str]] = {"cold": [], "warm": []}
    planned = calls = 0
    for i in range(args.repeat):
        root = bench.root / f"{size}-{i}"
        root.mkdir()
        table = root / "pairs.jsonl"
        write_pairs(table, args.pairs)
        work, config = root / "work", root / "run.yaml"
        write_config(config, work, table, chosen, args.k)
        judge.sent()
        loads["cold"].append(load())
        walls["jl cold"].append(bench.judgeline(work, "run", str(config)))
        overheads["cold"].append(walls["jl cold"][-1] - latest_stages(work))
        expected = judge.sent()
        planned, calls, tasks = write_tasks(work, chosen, root / "inspect")
        if sum(expected.values()) != calls:
            raise SystemExit(f"judgeline sent {sum(expected.values())} calls of {calls} distinct")
        inspect = Inspect(venv, root / "inspect", base_url, tasks, args.connections)
        cache, logs = root / "inspect" / "cache", root / "inspect" / "logs"
        loads["cold"].append(load())
        walls["in cold"].append(inspect.eval(cache, logs))
        if judge.sent() != expected:
            raise SystemExit("inspect_ai's cold run did not send judgeline's calls")
        loads["warm"].append(load())
        walls["in warm"].append(inspect.eval(cache, logs))
        if judge.sent():
            raise SystemExit("inspect_ai's warm run sent calls: its cache missed")
        loads["warm"].append(load())
        walls["jl warm"].append(bench.judgeline(work, "run", str(config)))
        overheads["warm"].append(walls["jl warm"][-1] - latest_stages(work))
        if judge.sent():
            raise SystemExit("judgeline's warm run sent calls: its cache missed")
    wall = {k: statistics.median(v) for k, v in walls.items()}
    rows = []
    for when, target in (("cold", 2), ("warm", 10)):
        jl, ins = wall[f"jl {when}"], wall[f"in {when}"]
        line = (f"judgeline {jl:6.1f} s vs inspect_ai {ins:6.1f} s: speed-up {ins / jl:5.2f}x "
                f"(target >= {target}x); judgeline's overhead outside its stages "
                f"{statistics.median(overheads[when]):4.1f} s")  # fmt: skip
        name = f"{when}, {planned:,} calls ({calls:,} distinct)"
        rows.append((name, f"{line}   (load {', '.join(loads[when])} at each start)"))
        print(f"{name:<30} {rows[-1][1]}", flush=True)
    return rows


def warm_up(bench: Bench, judge: Judge, base_url: str, args: argparse.Namespace, root: Path,
            venv: Path) -> None:  # fmt: skip
    """One untimed judgeline run and inspect eval of 8 calls: both sides' files in the disk
    cache, Prefect's database in use."""
    root.mkdir()
    chosen = judges(base_url, 2, args.connections, demo=False)
    table, work, config = root / "pairs.jsonl", root / "work", root / "run.yaml"
    write_pairs(table, 2)
    write_config(config, work, table, chosen, 2)
    bench.judgeline(work, "run", str(config))
    _, _, tasks = write_tasks(work, chosen, root / "inspect")
    inspect = Inspect(venv, root / "inspect", base_url, tasks, args.connections)
    inspect.eval(root / "inspect" / "cache", root / "inspect" / "logs")
    judge.sent()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inspect-venv", type=Path,
                        default=Path.home() / ".cache" / "judgeline" / "inspect-venv")  # fmt: skip
    parser.add_argument("--inspect-version", default=INSPECT_VERSION)
    parser.add_argument("--pairs", type=int, default=147)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--only", choices=["1176", "7056"], help="one arrangement only")
    args = parser.parse_args()
    version = ensure_inspect(args.inspect_venv, args.inspect_version)
    from simjudge.server import simjudge_subprocess

    root = Path(tempfile.mkdtemp(prefix="judgeline-bench-inspect-"))
    bench = Bench(root)
    rows: list[tuple[str, str]] = []
    print(f"inspect_ai {version}, {args.pairs} pairs, K={args.k}, "
          f"{args.connections} connections per persona")  # fmt: skip
    try:
        with simjudge_subprocess("--latency-ms", "0") as base_url:
            judge = Judge(base_url)
            bench.judgeline(root / "start", "server", "start")
            print(f"local Prefect server started before timing (load {load()})", flush=True)
            warm_up(bench, judge, base_url, args, root / "warm-up", args.inspect_venv)
            for demo in (False, True):
                if args.only in (None, "7056" if demo else "1176"):
                    rows += compare(args, bench, judge, base_url, args.inspect_venv, demo)
    finally:
        subprocess.run([JUDGELINE, "--work-dir", str(root / "start"), "server", "stop"],
                       env=bench.env, capture_output=True)  # fmt: skip
        shutil.rmtree(root, ignore_errors=True)
    print(f"\ninspect_ai {version}; judgeline {git_head()}")
    for name, line in rows:
        print(f"| {name} | {line} |")


def git_head() -> str:
    result = subprocess.run(["git", "-C", str(Path(__file__).parent), "rev-parse", "--short",
                             "HEAD"], capture_output=True, text=True)  # fmt: skip
    return result.stdout.strip() or "?"


if __name__ == "__main__":
    main()
