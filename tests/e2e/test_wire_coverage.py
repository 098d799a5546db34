"""The closing coverage check (tests/e2e/coverage.py) on made-up records: it passes a session
that checked every operation and fails one that never checked an operation.

The check itself runs where the session ends (tests/conftest.py), on the records every process
of the run handed over (`closing_problems`), whatever order or process the tests ran in.
"""

from __future__ import annotations

from dataclasses import astuple
from typing import Any

from tests.e2e.coverage import (
    CARD_PATH,
    E2E_MODULES,
    Observed,
    Seen,
    closing_problems,
    coverage_problems,
    operation,
)
from tests.fuzz.tally import Tally

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


def _records(observed: Observed, processes: int) -> list[dict[str, Any]]:
    """`observed` as `processes` processes would hand it over, each with its share of the
    records and of the e2e tests (every process collects them all)."""
    collected = [f"tests/e2e/{module}::test_one" for module in sorted(E2E_MODULES)]

    def share(values: Any, n: int) -> list[Any]:
        return [astuple(v) if isinstance(v, Seen) else v for v in values][n::processes]

    return [
        {
            "collected": collected,
            "ran": collected[n::processes],
            "deselected": False,
            "seen": share(observed.seen, n),
            "check_failures": share(observed.check_failures, n),
            "checked": share(observed.checked, n),
            "sse_checked": share(observed.sse_checked, n),
            "rpc_checked": share(observed.rpc_checked, n),
            "rpc_sse_checked": share(observed.rpc_sse_checked, n),
        }
        for n in range(processes)
    ]


def test_the_closing_check_judges_every_processs_records_together() -> None:
    assert closing_problems(_records(complete_session(), 3)) == []
    left_out = complete_session(leave_out="/tasks/t1:cancel")
    problems = closing_problems(_records(left_out, 3))
    assert problems and any("CancelTask" in problem for problem in problems), problems
    failed = complete_session()
    failed.check_failures = ["raw GET /tasks/t1 -> 200: AssertionError()"]
    assert closing_problems(_records(failed, 2))


def test_the_closing_check_says_nothing_of_part_of_the_suite() -> None:
    records = _records(complete_session(leave_out="/tasks/t1:cancel"), 2)
    assert closing_problems(records[:1]) is None  # a test collected did not run
    for record in records:
        record["collected"] = record["collected"][1:]  # a module not collected
        record["ran"] = [nodeid for nodeid in record["ran"] if nodeid in record["collected"]]
    assert closing_problems(records) is None
    deselected = _records(complete_session(), 2)
    deselected[1]["deselected"] = True
    assert closing_problems(deselected) is None
    assert closing_problems([]) is None


def test_the_fuzz_tally_adds_up_every_processs_counts() -> None:
    first, second = Tally(), Tally()
    first.cases, first.hangs, first.slowest_seconds = 3, 1, 0.5
    first.by_binding.update({"rest": 3})
    first.problem("hang: one")
    second.cases, second.slowest_seconds = 4, 1.5
    second.by_binding.update({"rest": 1, "jsonrpc-1.0": 3})
    merged = Tally.merged([first.as_record(), second.as_record()])
    assert (merged.cases, merged.hangs, merged.slowest_seconds) == (7, 1, 1.5)
    assert merged.by_binding == {"rest": 4, "jsonrpc-1.0": 3}
    assert merged.first_problems == ["hang: one"] and merged.bad
    assert not Tally.merged([second.as_record()]).bad
