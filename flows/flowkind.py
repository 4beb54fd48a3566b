"""judgeline's Prefect flows: `flow` is Prefect's decorator for a flow whose parameters are
recorded with pydantic's JSON encoding and whose task runs carry no tags.

Prefect records a flow run's parameters with FastAPI's `jsonable_encoder`, importing FastAPI
for it on the first run of a command (0.2 s of a 4 s command). judgeline's parameters are
strings, numbers, lists, dicts and pydantic models, which pydantic encodes to the same JSON
values; anything else is recorded as Prefect records what it cannot encode, a placeholder
naming its type.

A flow run is tagged with its work dir (`flows.runtime.tag_runs`); its task runs are not.
Prefect asks the server for concurrency slots for every tag a task run carries, and the
first ask of a command cost it 80 ms of waiting (a service thread, an API client and a
request) for limits judgeline never sets.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from prefect.context import TagsContext
from prefect.flows import Flow
from prefect.futures import PrefectFuture
from prefect.states import State
from pydantic_core import to_jsonable_python

P = ParamSpec("P")
R = TypeVar("R")


_ORIGINAL = "__judgeline_flow_fn__"


def _untagged(fn: Callable[P, R]) -> Callable[P, R]:
    """`fn`, run with no tags in its context: the task runs it makes carry none. Its
    signature is `fn`'s with the annotations evaluated, so that Prefect, which validates a
    flow run's parameters against it, needs no module namespace to read them (the wrapper's
    module is not `fn`'s)."""
    run: Any
    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def run(*args: Any, **kwargs: Any) -> Any:
            with TagsContext(current_tags=set()):
                return await fn(*args, **kwargs)
    else:

        @functools.wraps(fn)
        def run(*args: Any, **kwargs: Any) -> Any:
            with TagsContext(current_tags=set()):
                return fn(*args, **kwargs)

    run.__signature__ = inspect.signature(fn, eval_str=True)
    setattr(run, _ORIGINAL, fn)
    return run  # type: ignore[no-any-return]


class JudgelineFlow(Flow[P, R]):
    def __init__(self, fn: Callable[P, R], **options: Any) -> None:
        fn = getattr(fn, _ORIGINAL, fn)  # `with_options` passes the flow's own
        super().__init__(fn=fn, **options)
        # After Prefect read the function's signature, source file (its version) and name.
        self.fn = _untagged(fn)

    def serialize_parameters(self, parameters: dict[str, Any]) -> dict[str, Any]:
        serialized: dict[str, Any] = {}
        for key, value in parameters.items():
            if isinstance(value, PrefectFuture | State):
                serialized[key] = f"<{type(value).__name__}>"
                continue
            try:
                serialized[key] = to_jsonable_python(value)
            except Exception:  # what pydantic cannot encode, as Prefect records it
                serialized[key] = f"<{type(value).__name__}>"
        return serialized


def flow(**options: Any) -> Callable[[Callable[P, R]], JudgelineFlow[P, R]]:
    """Prefect's `@flow(...)` with these options, as a `JudgelineFlow`.

    A flow's return value is kept in memory, never written as a Prefect result: what a run
    makes is in its work dir. Its result storage is named (Prefect's local results folder,
    never written to), so that a flow run does not ask the server for a default storage
    block, and again for a default persistence, on every run (two requests and an API
    client a command)."""
    from prefect.settings import get_current_settings

    options.setdefault("persist_result", False)
    options.setdefault("result_storage", Path(get_current_settings().results.local_storage_path))

    def decorate(fn: Callable[P, R]) -> JudgelineFlow[P, R]:
        return JudgelineFlow(fn=fn, **options)

    return decorate
