"""The closing coverage check (tests/e2e/coverage.py) on made-up records: it passes a session
that checked every operation and fails one that never checked an operation.

The check itself runs at the end of the session (tests/e2e/conftest.py), on the real records,
whatever order the tests ran in.
"""

from __future__ import annotations

from tests.e2e.coverage import CARD_PATH, Observed, Seen, coverage_problems, operation

STREAMS = ("/message:stream", "/tasks/t1:subscribe")
SUCCESSES = [
    ("GET", CARD_PATH),
    ("POST", "/message:send"),
    ("GET", "/tasks/t1"),
    ("GET", "/tasks"),
    ("POST", "/tasks/t1:cancel"),
    ("POST", "/tasks/t1/pushNotificationConfigs"),
    ("GET", "/tasks/t1/pushNotificationConfigs"),
    ("GET", "/tasks/t1/pushNotificationConfigs/c1"),
    ("DELETE", "/tasks/t1/pushNotificationConfigs/c1"),
]
ERRORS = [
    ("POST", "/tasks/t1/pushNotificationConfigs", 400),
    ("GET", "/tasks/t1/pushNotificationConfigs/c2", 404),
    ("POST", "/message:stream", 400),
    ("POST", "/tasks/t2:subscribe", 404),
    ("GET", "/tasks/t1", 304),
    ("POST", "/message:send", 413),
    ("POST", "/message:send", 415),
]


def complete_session(leave_out: str = "") -> Observed:
    """Records of a session that checked everything (but requests to paths `leave_out`)."""
    seen = [Seen(source, m, p, 200) for source in ("sdk", "raw") for m, p in SUCCESSES]
    seen += [Seen("raw", m, p, status) for m, p, status in ERRORS]
    seen += [Seen("raw", "GET", f"/tasks/x{i}", 200) for i in range(100)]
    streams = [Seen(source, "POST", p, 200) for source in ("sdk", "raw") for p in STREAMS] * 3
    seen = [s for s in seen + streams if not (leave_out and s.path == leave_out)]
    streamed = [s for s in seen if s.path in STREAMS and s.status == 200]
    # (method, path, data frames, comment frames, read to the end); one heartbeat in all.
    sse = [("POST", s.path, 3, int(i == 0), True) for i, s in enumerate(streamed)]
    rest = [(s.method, s.path, s.status) for s in seen if s not in streamed]
    return Observed(seen, checked=rest, sse_checked=sse)


def test_a_session_that_checked_every_operation_passes() -> None:
    assert coverage_problems(complete_session()) == []


def test_an_operation_never_checked_fails_the_session() -> None:
    problems = coverage_problems(complete_session(leave_out="/tasks/t1:cancel"))
    assert any("CancelTask" in problem for problem in problems), problems


def test_a_stream_never_checked_fails_the_session() -> None:
    observed = complete_session()
    observed.sse_checked = observed.sse_checked[1:]  # one SSE body went unchecked
    assert any("SSE bodies checked" in p for p in coverage_problems(observed))


def test_a_failed_strict_check_fails_the_session() -> None:
    observed = complete_session()
    observed.check_failures = ["raw GET /tasks/t1 -> 200: AssertionError()"]
    assert coverage_problems(observed)


def test_get_subscriptions_count_as_subscribe_to_task() -> None:
    """`GET /tasks/{id}:subscribe` (the proto's rule) is SubscribeToTask, not GetTask: its
    SSE body is counted among the streams answered, and must be checked like the POST's."""
    assert operation("GET", "/tasks/t1:subscribe") == "SubscribeToTask"
    assert operation("GET", "/acme/tasks/t1:subscribe") == "SubscribeToTask"
    assert operation("GET", "/tasks/t1") == "GetTask"
    by_get = Seen("raw", "GET", "/tasks/t1:subscribe", 200)
    unchecked = complete_session()
    unchecked.seen = [*unchecked.seen, by_get]
    assert any("streams answered" in p for p in coverage_problems(unchecked))
    checked = complete_session()
    checked.seen = [*checked.seen, by_get]
    checked.sse_checked = [*checked.sse_checked, ("GET", by_get.path, 2, 0, True)]
    assert coverage_problems(checked) == []


def test_an_empty_session_fails() -> None:
    assert len(coverage_problems(Observed([]))) > 5
