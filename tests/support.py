"""Shared test code: a demo plan staged in a work dir, and copies of stored plans.

Importable from every test module (`pythonpath` in pyproject.toml puts tests/ on the path);
fixtures stay in conftest.py.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from schemas.run import CodeVersion, RunRecord
from tasks.store.workdir import WorkDir

if TYPE_CHECKING:
    from collections.abc import Sequence

    import numpy as np
    import pandas as pd
    import pyarrow as pa

    from schemas import Pair
    from simjudge.persona import Persona

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
NO_FAULTS = {"rate_429": 0, "rate_5xx": 0, "rate_stall": 0, "rate_malformed": 0,
             "rate_truncated": 0}  # fmt: skip
"""The simulated judge's fault rates for a test whose judge must answer every call
(`server.set_faults(**NO_FAULTS)`)."""


@dataclass(frozen=True)
class StagedPlan:
    """A frozen manifest and its stored plan in one work dir."""

    work: WorkDir
    plan_id: str
    manifest: pa.Table
    presentations: pa.Table

    def copy_to(self, work: WorkDir) -> StagedPlan:
        """The same manifest and plan in `work`, whose cache starts empty."""
        copy_stored_plans(self.work, work)
        return replace(self, work=work)


def copy_stored_plans(source: WorkDir, target: WorkDir) -> None:
    """Copy the manifests and plans of `source` (not its cache or runs) into `target`."""
    for folder in ("manifests", "plans"):
        shutil.copytree(source.root / folder, target.root / folder)


def stage_demo_plan(work: WorkDir, *, pairs: int, k: int) -> StagedPlan:
    """Freeze the first `pairs` demo pairs in `work` and store their full grid with K = `k`."""
    # Imported here: most test modules never stage a plan and need not load these.
    from tasks.ingest.demo_benchmark import demo_pairs

    return stage_plan(work, "demo", demo_pairs()[:pairs], k=k)


def stage_plan(work: WorkDir, source: str, pairs: Sequence[Pair], *, k: int) -> StagedPlan:
    """Freeze `pairs` in `work` and store their full grid with K = `k`."""
    from tasks.ingest.manifest import freeze_manifest, read_manifest
    from tasks.plan import make_plan, read_plan, write_plan

    frozen = freeze_manifest([(source, list(pairs))], work)
    _, manifest = read_manifest(work, frozen.info.manifest_hash)
    info, table = make_plan(manifest, k, "full", None)
    write_plan(work, info, table)
    _, presentations = read_plan(work, info.plan_id)
    return StagedPlan(work, info.plan_id, manifest, presentations)


def persona_laws(persona: Persona, effort: str | None) -> tuple[np.ndarray, np.ndarray]:
    """The class laws (`A`, `B`, other) of one call of a persona in order `AB` and in `BA`, for
    a pair keyed `A`, under the law `persona_grids` draws from."""
    import numpy as np

    skill, left_bias = persona.shifted(effort)
    other = persona.invalid_rate + persona.abstain_rate + persona.tie_rate
    decisive = 1.0 - other
    key, wrong, left = (
        decisive * (1 - left_bias) * skill,
        decisive * (1 - left_bias) * (1 - skill),
        decisive * left_bias,
    )
    return np.array([key + left, wrong, other]), np.array([key, wrong + left, other])


def persona_grids(
    personas: list[tuple[Persona, str | None]], *, pairs: int, k: int, seed: int
) -> pa.Table:
    """Full replay-input grids (K seeds x both orders) of simulated judges, drawn directly
    from each (persona, reasoning effort) with the simulated judge's documented law: invalid,
    abstention, tie, else the left slot with `left_bias`, else the keyed answer with `skill`.
    Each persona judges the same `pairs` pairs, whose keys are fair coins."""
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng(seed)
    keys = np.where(rng.random(pairs) < 0.5, "A", "B")
    shape = (pairs, k, 2)
    left = np.broadcast_to(np.array(["A", "B"]), shape)  # AB shows A on the left, BA shows B
    keyed = np.broadcast_to(keys[:, None, None], shape)
    other = np.where(keyed == "A", "B", "A")
    seeds = np.broadcast_to(np.arange(k)[None, :, None], shape).ravel()
    orders = np.broadcast_to(np.array(["AB", "BA"]), shape).ravel()
    pair_ids = np.broadcast_to(np.array([f"p{p}" for p in range(pairs)])[:, None, None], shape)
    tables = []
    for persona, effort in personas:
        skill, left_bias = persona.shifted(effort)
        draw = rng.random(shape)
        invalid, abstain = persona.invalid_rate, persona.invalid_rate + persona.abstain_rate
        tie = abstain + persona.tie_rate
        decisive = np.where(
            rng.random(shape) < left_bias,
            left,
            np.where(rng.random(shape) < skill, keyed, other),
        )
        outcome = np.select(
            [draw < invalid, draw < abstain, draw < tie], ["I", "X", "T"], default=decisive
        )
        size = outcome.size
        tables.append(
            pa.table(
                {
                    "judge": pa.array([persona.name] * size),
                    "config": pa.array([effort or "default"] * size),
                    "dataset": pa.array(["sim"] * size),
                    "pair_id": pa.array(pair_ids.ravel()),
                    "seed": pa.array(seeds, pa.int64()),
                    "order": pa.array(orders),
                    "outcome": pa.array(outcome.ravel()),
                    "key": pa.array(keyed.ravel()),
                }
            )
        )
    return pa.concat_tables(tables)


def knife_edge(change: np.ndarray, target: float) -> np.ndarray | None:
    """Indices of a subpopulation whose mean of `change` is `target` or just above: every pair
    that changes decisions and as many that do not as keep the mean there (None when there
    are too few of either)."""
    import numpy as np

    moving = np.flatnonzero(change > 0)
    still = np.flatnonzero(change <= 0)
    if moving.size == 0 or change[moving].sum() / moving.size < target:
        return None
    zeros = int(change[moving].sum() / target) - moving.size
    if zeros > still.size:
        return None
    return np.concatenate([moving, still[:zeros]])


def advice_coverage(
    *,
    population: int,
    resamples: int,
    ns: tuple[int, ...],
    budgets: tuple[float, ...],
    k: int = 4,
    knife: float | None = None,
) -> pd.DataFrame:
    """How often advice exceeds its budget, on resamples of a simulated population.

    The population is `population` pairs judged by the six preset (persona, reasoning effort)
    configurations of the simulated judge; a policy's true change rate and savings are its
    means over the whole population. With `knife`, each configuration also gives per budget a
    knife-edge population: the subpopulation (`knife_edge`) on which `paired_strict`'s true
    change is `knife` times the budget (its law just over it), where one exists. For each
    population, n and budget, `resamples` sets of n pairs are drawn (without replacement, or
    with it where n exceeds a knife-edge population's pairs) and advised three ways: by the
    certifying advisor, by the point-estimate rule it replaces (the cheapest policy whose mean
    change on a random half is within the budget) and by an oracle that knows every policy's
    true change rate (the cheapest policy truly within the budget). One row per (population,
    budget, n, advisor): the share of advice whose true change rate exceeds the budget, that
    share among decision-changing advice, how often decision-changing advice is given, and
    the mean true savings of the advice.
    """
    import numpy as np
    import pandas as pd

    from schemas.vocabulary import POLICIES
    from simjudge.persona import PRESETS
    from tasks.replay.advisor import ConfigValues, advise_config, per_pair
    from tasks.replay.certify import change_range

    configs = [(p, effort) for p in PRESETS for effort in ("low", "high")]
    table = persona_grids(configs, pairs=population, k=k, seed=11)
    rng = np.random.default_rng(5)
    changing = np.array([change_range(p, k) > 0 for p in POLICIES])
    strict = POLICIES.index("paired_strict")
    rows = []
    for values in per_pair(table, "simulated population").values():
        for budget in budgets:
            kinds: list[tuple[str, np.ndarray]] = [("preset", np.arange(population))]
            edge = None if knife is None else knife_edge(values.change[:, strict], knife * budget)
            if edge is not None and edge.size >= min(ns):
                kinds.append(("knife-edge", edge))
            for kind, members in kinds:
                true_change = values.change[members].mean(0)
                true_savings = values.savings[members].mean(0)
                fine = [i for i in range(len(POLICIES)) if true_change[i] <= budget]
                oracle = max(fine, key=lambda i: true_savings[i])
                for n in ns:
                    for _ in range(resamples):
                        # i.i.d. draws from the population: without replacement from the
                        # preset's 2,000 pairs, with it from a smaller knife-edge population
                        fewer = n > members.size
                        pick = members[rng.choice(members.size, n, replace=fewer)]
                        sample = ConfigValues(
                            values.savings[pick],
                            values.change[pick],
                            values.reversal[pick],
                            values.ks,
                        )
                        rows_ = advise_config(sample, max_change=budget, bounds=False)
                        honest = next(i for i, r in enumerate(rows_) if r["rank"] == "advised")
                        half = rng.permutation(n) < (n + 1) // 2
                        means = sample.change[half].mean(0), sample.savings[half].mean(0)
                        within = [i for i in range(len(POLICIES)) if means[0][i] <= budget]
                        point = max(within, key=lambda i: means[1][i])
                        for name, i in (
                            ("certified", honest),
                            ("point estimate", point),
                            ("oracle", oracle),
                        ):
                            rows.append(
                                (
                                    kind,
                                    budget,
                                    n,
                                    name,
                                    true_change[i] > budget,
                                    changing[i],
                                    true_savings[i],
                                )
                            )
    keys = ["population", "budget", "n", "advisor"]
    frame = pd.DataFrame(rows, columns=[*keys, "over", "changing", "savings"])
    grouped = frame.groupby(keys)
    out = grouped.agg(
        advice=("over", "size"),
        over=("over", "mean"),
        changing=("changing", "mean"),
        savings=("savings", "mean"),
    )
    changing_over = frame[frame["changing"]].groupby(keys)["over"]
    out["over_when_changing"] = changing_over.mean()
    out["changing_advice"] = changing_over.size()
    return out.reset_index().fillna({"over_when_changing": 0.0, "changing_advice": 0})


@contextmanager
def read_only(folder: Path) -> Iterator[Path]:
    """`folder` as a read-only path, for as long as the block runs.

    A non-root user gets the folder's tree with its write bits removed (and back after);
    root, which ignores them, a read-only bind mount of it (in /tmp, unmounted after). The
    test is skipped where neither is possible (root without the right to mount).
    """
    if os.geteuid() != 0:
        modes = {p: p.stat().st_mode for p in [folder, *folder.rglob("*")]}
        for path, mode in modes.items():
            path.chmod(mode & ~0o222)
        try:
            yield folder
        finally:
            for path, mode in modes.items():
                path.chmod(mode)
        return
    target = Path(tempfile.mkdtemp(prefix="judgeline-ro-"))
    mounted = subprocess.run(
        ["sh", "-c", f'mount --bind "{folder}" "{target}" && mount -o remount,bind,ro "{target}"'],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        subprocess.run(["umount", str(target)], capture_output=True)
        target.rmdir()
        pytest.skip(f"cannot make a read-only view as root here: {mounted.stderr.strip()}")
    try:
        yield target
    finally:
        subprocess.run(["umount", str(target)], check=True)
        target.rmdir()


def bare_record(
    run_id: str,
    *,
    name: str = "n",
    status: str = "completed",
    started_at: dt.datetime = dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
) -> RunRecord:
    """A run record with nothing but what every record holds (for tests of listing and
    locking that need a record, not a run)."""
    return RunRecord(
        run_id=run_id,
        name=name,
        status=status,  # type: ignore[arg-type]
        config_hash="h",
        config={},
        code=CodeVersion(commit=None, dirty=None, packages={}),
        started_at=started_at,
    )


class CountingListener:
    """A loopback listener of another process's making (a judge endpoint a hostile run
    names, or a port taken after a server died): counts the connections made to it and
    the bytes received. Port 0 binds a free one."""

    def __init__(self, port: int = 0) -> None:
        import socket
        import threading

        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", port))
        self.sock.listen(16)
        self.sock.settimeout(0.1)
        self.port = int(self.sock.getsockname()[1])
        self.connections = 0
        self.received = b""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            self.connections += 1
            conn.settimeout(1.0)
            try:
                while chunk := conn.recv(65536):
                    self.received += chunk
            except OSError:
                pass
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sock.close()


SYSTEM_PYTHON = next(
    (p for p in ("/usr/bin/python3", "/usr/local/bin/python3") if os.access(p, os.X_OK)), None
)
"""An interpreter another user can run (this venv's may lie under a folder only we enter)."""
OTHER_UID = 65534
"""The other local user (nobody) of tests run as root."""
AS_OTHER_UID = os.getuid() == 0 and SYSTEM_PYTHON is not None
"""Whether `as_other_user` runs as another uid here (else as a process of ours)."""


def as_other_user(code: str) -> subprocess.CompletedProcess[str]:
    """Run `code` (standard library only) as another local user (uid 65534 when this is
    root and a system Python exists), else as a process of ours; raises if it fails."""
    import sys

    def drop() -> None:
        os.setgroups([])
        os.setgid(OTHER_UID)
        os.setuid(OTHER_UID)

    done = subprocess.run(
        [str(SYSTEM_PYTHON) if AS_OTHER_UID else sys.executable, "-I", "-c", code],
        env={"PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"},
        cwd="/",
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=drop if AS_OTHER_UID else None,
    )
    assert done.returncode == 0, done.stderr
    return done


@contextmanager
def shared_folder() -> Iterator[Path]:
    """A folder every local user may write (1777, as /tmp), removed afterwards."""
    folder = Path(tempfile.mkdtemp(prefix="judgeline-shared-"))
    folder.chmod(0o1777)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
