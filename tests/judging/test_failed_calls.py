"""How `judgeline failures` groups failed calls' messages: one line per failure, whatever
request ids tell its calls apart, never one call's request id shown for many calls."""

from __future__ import annotations

from tasks.judging.failed_calls import FailureGroup

AUTH = "HTTP 401: Incorrect API key provided (request {})"


def test_one_failure_of_many_requests_names_no_single_request_id() -> None:
    """`failures` listed 8 auth failures under one request id: the first call's."""
    group = FailureGroup("j", "c", "failed", "auth")
    ids = [f"req_{i:04d}abcdef" for i in range(8)]
    for rid in ids:
        group.add_message(AUTH.format(rid))
    ((shown, count),) = group.messages.most_common()
    assert count == 8
    assert not any(rid in shown for rid in ids[1:])
    assert shown.startswith("HTTP 401: Incorrect API key provided (request …)"), shown
    assert f"8 different ids, the first {ids[0]}" in shown, shown


def test_a_message_of_one_request_is_shown_whole() -> None:
    group = FailureGroup("j", "c", "failed", "auth")
    group.add_message(AUTH.format("req_0001abcdef"))
    group.add_message(AUTH.format("req_0001abcdef"))  # the same call, tried twice
    group.add_message("HTTP 500: boom")
    assert dict(group.messages) == {AUTH.format("req_0001abcdef"): 2, "HTTP 500: boom": 1}
