"""The only expectations a data-quality gate builds (`Expect`), checked before anything is
built: whatever a gate request names, it can only gate, never make great-expectations evaluate
an argument (a `row_condition` with the pandas parser runs method calls)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any


class GateRequestError(ValueError):
    """An expectation that is not one judgeline's gates use (`ALLOWED`)."""


def _column(value: Any) -> bool:
    return isinstance(value, str) and 0 < len(value) <= 200


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


ALLOWED: dict[str, dict[str, Callable[[Any], bool]]] = {
    "ExpectColumnValuesToNotBeNull": {"column": _column},
    "ExpectColumnValuesToBeUnique": {"column": _column},
    "ExpectColumnValuesToBeInSet": {
        "column": _column,
        "value_set": lambda v: isinstance(v, list) and all(_scalar(x) for x in v),
    },
    "ExpectColumnValuesToBeBetween": {
        "column": _column, "min_value": _number, "max_value": _number,
    },
    "ExpectCompoundColumnsToBeUnique": {
        "column_list": lambda v: isinstance(v, list) and 0 < len(v) <= 50
        and all(_column(x) for x in v),
    },
}  # fmt: skip
"""The only expectations a gate builds, each with the only arguments it may have (and every
one of them): no row condition, no parser, nothing that great-expectations evaluates."""


def check_expectation(kind: Any, kwargs: dict[str, Any]) -> None:
    """Refuse (GateRequestError) an expectation that is not in ALLOWED with exactly its
    arguments, each of the expected type."""
    rules = ALLOWED.get(kind) if isinstance(kind, str) else None
    if rules is None:
        raise GateRequestError(f"{kind!r} is not an expectation judgeline's gates use")
    if set(kwargs) != set(rules):
        raise GateRequestError(
            f"{kind} takes exactly {sorted(rules)}, not {sorted(map(str, kwargs))}"
        )
    for name, valid in rules.items():
        if not valid(kwargs[name]):
            raise GateRequestError(f"{kind}: argument {name} is not valid here")


def read_head(line: bytes) -> tuple[str, list[tuple[str, dict[str, Any]]], set[str]]:
    """A gate request's first line, checked: a stage name, allowed expectations (kind and
    arguments), the names of the object columns; a GateRequestError for anything else."""
    try:
        head = json.loads(line)
    except ValueError:
        raise GateRequestError("a gate request starts with one JSON line") from None
    if not isinstance(head, dict) or set(head) != {"stage", "expectations", "objects"}:
        raise GateRequestError("a gate request names stage, expectations and objects only")
    stage, wanted, objects = head["stage"], head["expectations"], head["objects"]
    if not (isinstance(stage, str) and 0 < len(stage) <= 200 and stage.isprintable()):
        raise GateRequestError("a gate's stage is a name of at most 200 printable characters")
    if not isinstance(objects, list) or not all(_column(name) for name in objects):
        raise GateRequestError("a gate's object columns are a list of names")
    if not isinstance(wanted, list) or not 0 < len(wanted) <= 100:
        raise GateRequestError("a gate has 1 to 100 expectations")
    distinct = []
    for item in wanted:
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[1], dict)):
            raise GateRequestError("an expectation is [kind, arguments]")
        check_expectation(item[0], item[1])
        distinct.append((item[0], item[1]))
    return stage, distinct, set(objects)


class Expect:
    """A great-expectations expectation named by its class and arguments, built only when a
    gate runs (`import great_expectations` costs seconds; a gate whose table already passed
    never pays it). Only the kinds and arguments in `ALLOWED` can be made, checked here,
    before anything is built, wherever the request came from."""

    def __init__(self, kind: str, **kwargs: Any) -> None:
        check_expectation(kind, kwargs)
        self.kind = kind
        self.kwargs = kwargs

    @property
    def key(self) -> str:
        """Its identity: two expectations with the same key are one (a suite holds it once)."""
        return json.dumps([self.kind, self.kwargs], sort_keys=True, default=str)

    def build(self) -> Any:
        import great_expectations as gx

        return getattr(gx.expectations, self.kind)(**self.kwargs)
