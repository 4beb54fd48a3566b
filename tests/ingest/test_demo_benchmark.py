"""The demo benchmark: size, determinism, key balance, and that its keys are really right."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from schemas import Pair
from tasks.ingest.demo_benchmark import demo_pairs


@pytest.fixture(scope="module")
def pairs() -> list[Pair]:
    return demo_pairs()


def keyed(pair: Pair) -> tuple[str, str]:
    """(the key's answer, the other answer)."""
    return (pair.answer_a, pair.answer_b) if pair.key == "A" else (pair.answer_b, pair.answer_a)


def test_size_ids_and_dataset(pairs: list[Pair]) -> None:
    assert len(pairs) == 150
    assert len({p.pair_id for p in pairs}) == 150
    assert {p.dataset for p in pairs} == {"demo"}
    assert Counter(json.loads(p.metadata)["kind"] for p in pairs) == {"arithmetic": 90, "code": 60}
    assert all(p.answer_a and p.answer_b and p.answer_a != p.answer_b for p in pairs)


def test_deterministic_across_calls(pairs: list[Pair]) -> None:
    again = demo_pairs()
    assert again == pairs
    assert [p.model_dump_json() for p in again] == [p.model_dump_json() for p in pairs]


def test_keys_are_half_a_half_b_and_mixed_within_kinds(pairs: list[Pair]) -> None:
    assert Counter(p.key for p in pairs) == {"A": 75, "B": 75}
    for kind in ("arithmetic", "code"):
        keys = Counter(p.key for p in pairs if json.loads(p.metadata)["kind"] == kind)
        assert min(keys["A"], keys["B"]) >= 0.35 * sum(keys.values())


_QUESTION = re.compile(r"^What is (\d+) ([-+×]) (\d+)\?$")
_OPERATORS: dict[str, Callable[[int, int], int]] = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "×": lambda a, b: a * b,
}


def final_number(answer: str) -> int:
    return int(re.findall(r"-?\d+", answer)[-1])


def test_arithmetic_key_is_the_correct_answer(pairs: list[Pair]) -> None:
    arithmetic = [p for p in pairs if p.source == "demo/arithmetic"]
    assert len(arithmetic) == 90
    for pair in arithmetic:
        match = _QUESTION.match(pair.question)
        assert match, pair.question
        expected = _OPERATORS[match[2]](int(match[1]), int(match[3]))
        right, wrong = keyed(pair)
        assert final_number(right) == expected, pair.pair_id
        assert final_number(wrong) != expected, pair.pair_id


# Independent reference implementations, one per task, and inputs that tell them apart.
def _oracles(p: int, q: int) -> dict[str, tuple[Callable[..., Any], list[Any]]]:
    lists = [[], [p], [p + 1, p], [p, p - 1, q, q + 1, 0], list(range(-3, q + 40)), [q] * 3]
    return {
        "total": (lambda n: sum(i for i in range(p, n + 1)), list(range(-2, q + 5))),
        "count_above": (lambda xs: len([x for x in xs if x > p]), lists),
        "first_above": (
            lambda xs: next((i for i, x in enumerate(xs) if x > p), -1),
            lists,
        ),
        "last_k": (lambda xs: xs[-p:] if len(xs) > p else list(xs), lists),
        "clamp": (lambda x: p if x < p else q if x > q else x, list(range(p - 3, q + 4))),
        "count_between": (lambda xs: len([x for x in xs if p <= x and x < q]), lists),
    }


def run_answer(answer: str, name: str) -> Callable[..., Any]:
    match = re.search(r"```python\r?\n(.*?)```", answer, re.DOTALL)
    assert match, answer
    namespace: dict[str, Any] = {}
    exec(compile(match[1], "<demo answer>", "exec"), namespace)
    return namespace[name]


def test_code_key_is_the_correct_function(pairs: list[Pair]) -> None:
    code = [p for p in pairs if p.source == "demo/code"]
    assert len(code) == 60
    for pair in code:
        tags = json.loads(pair.metadata)
        oracle, inputs = _oracles(**tags["params"])[tags["task"]]
        right, wrong = (run_answer(a, tags["task"]) for a in keyed(pair))
        assert [right(list(x) if isinstance(x, list) else x) for x in inputs] == [
            oracle(x) for x in inputs
        ], pair.pair_id
        assert any(wrong(x) != oracle(x) for x in inputs), pair.pair_id


def test_answers_exercise_exact_bytes(pairs: list[Pair]) -> None:
    answers = [a for p in pairs for a in (p.answer_a, p.answer_b)]
    assert sum("\r\n" in a for a in answers) >= 20
    assert sum(not a.isascii() for a in answers) >= 20
    assert sum(bool(re.search(r" +(\r?\n|$)", a)) for a in answers) >= 20
    assert sum(a != a.rstrip("\n") and "\r" not in a for a in answers) >= 10
