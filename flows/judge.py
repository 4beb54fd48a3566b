"""The judge-call stages: judge a plan's calls, or resend a run's calls with no stored reply.

Inside another flow (a nightly run, its rerun) a stage runs as that flow's task runs, one a
batch; alone (`judgeline judge`, `flows.stageflows.judge_flow`), each is a flow of its own. A
subflow run per stage cost a nightly run about 0.2 s of API calls and bought nothing: its
batches' sender (Dask, provider batches) is the stage's own, not a flow's task runner.

The stage itself (planning, batches, the cache, counts) is `tasks.judging.stage`; here each
batch becomes a Prefect task (`judge-batch`, or `judge-batch-remote` on Dask: flows/dask.py),
and each provider batch of a `batch: true` judge a `provider-batch` task that polls it with
backoff (an async sleep between polls, up to 5 minutes apart: waiting hours for a batch
holds no worker thread and sends a few requests an hour).
"""

from __future__ import annotations

from typing import Any

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from flows.dask import dask_sender
from schemas.judge import JudgeSpec
from tasks.judging.batch_api import await_batch, batch_sender
from tasks.judging.batches import judge_batch
from tasks.judging.request import JudgeRequest, RemoteSender, StageHooks
from tasks.judging.stage import run_judge_stage, unstored_call_keys
from tasks.prompts.templates import DEFAULT_TEMPLATE
from tasks.runs.folder import RunFolder
from tasks.store.workdir import WorkDir

judge_batch_task = task(
    name="judge-batch", cache_policy=NO_CACHE, task_run_name="judge-{batch.judge}-{batch.index}"
)(judge_batch)
"""One batch of calls in the flow's event loop; failed calls are recorded, not retried here
(the client retries each call; `rerun-failed` sends what still failed)."""

provider_batch_task = task(
    name="provider-batch", cache_policy=NO_CACHE, task_run_name="provider-batch-{job.judge}"
)(await_batch)
"""One provider batch (OpenAI Batch, Anthropic Message Batch): polled until it ends, its
results stored."""


def remote_sender(request: JudgeRequest) -> RemoteSender | None:
    """Provider batches for `batch: true` judges; the other calls on Dask when asked, else
    in the flow's loop."""
    fallback = dask_sender(request)
    return batch_sender(
        request, fallback=fallback, run_batch=judge_batch_task, wait=provider_batch_task
    )


HOOKS = StageHooks(run_batch=judge_batch_task, sender=remote_sender)
"""How a flow's judge stage runs its batches: Prefect tasks, provider batches for judges
that ask, on Dask when asked."""


async def judge_stage(
    run_id: str,
    plan_id: str,
    judges: list[JudgeSpec],
    template_id: str = DEFAULT_TEMPLATE,
    batch_size: int = 500,
    work_dir: str | None = None,
    show_progress: bool = False,
    dask_address: str | None = None,
) -> dict[str, Any]:
    """Judge every planned call of a plan with every judge config; skip cached calls.

    `dask_address` (a Dask scheduler, e.g. `tcp://10.0.0.5:8786`) runs the batches there.
    """
    request = JudgeRequest(
        work=WorkDir.at(work_dir),
        run_id=run_id,
        plan_id=plan_id,
        judges=tuple(judges),
        template_id=template_id,
        batch_size=batch_size,
        dask_address=dask_address,
    )
    counts = await run_judge_stage(request, show_progress=show_progress, hooks=HOOKS)
    get_run_logger().info("run %s: %s", run_id, counts)
    return counts


async def rerun_failed_stage(
    run_id: str,
    work_dir: str | None = None,
    show_progress: bool = False,
    dask_address: str | None = None,
) -> dict[str, Any]:
    """Send again exactly the planned calls of a run that have no stored reply."""
    work = WorkDir.at(work_dir)
    info = RunFolder(work, run_id).read_info()
    request = JudgeRequest(
        work=work,
        run_id=run_id,
        plan_id=info.plan_id,
        judges=tuple(JudgeSpec.model_validate(j) for j in info.judges),
        template_id=info.template_id or DEFAULT_TEMPLATE,
        only_keys=unstored_call_keys(work, run_id),
        dask_address=dask_address,
    )
    counts = await run_judge_stage(request, show_progress=show_progress, hooks=HOOKS)
    get_run_logger().info("rerun of %s: %s", run_id, counts)
    return counts
