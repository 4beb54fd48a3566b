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


def test_timeouts_are_one_line_whatever_their_milliseconds() -> None:
    """21 timeouts were 12 lines, one per millisecond they took (`6 x ReadTimeout after 3007
    ms`, `2 x ... 3009 ms`): one line per category and cause, the range of times in it."""
    group = FailureGroup("j", "c", "failed", "timeout")
    times = [3007] * 6 + [3009] * 2 + list(range(3001, 3014))
    for ms in times:
        group.add_message(f"ReadTimeout after {ms} ms")
    group.add_message("ConnectTimeout after 10002 ms")
    assert dict(group.messages) == {
        "ReadTimeout after 3001 to 3013 ms": 21,
        "ConnectTimeout after 10002 ms": 1,
    }
    # Times of different units are ordered by what they last; ids are still counted.
    other = FailureGroup("j", "c", "failed", "timeout")
    for rid, took in (("req_0001abcdef", "900 ms"), ("req_0002abcdef", "2 s")):
        other.add_message(f"HTTP 504: gave up after {took} (request {rid})")
    ((shown, count),) = other.messages.most_common()
    assert count == 2
    assert shown == (
        "HTTP 504: gave up after 900 ms to 2 s (request …) (2 different ids, the first "
        "req_0001abcdef)"
    ), shown
