"""Closing check: the suite strictly parsed responses of every operation, from both clients.

Runs last (see conftest.pytest_collection_modifyitems); skipped when only part of the suite
was selected, since the counts then say nothing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import wire
from tests.e2e.conftest import CHECK_FAILURES, COVERAGE_TEST, SEEN, operation

pytestmark = pytest.mark.e2e

CORE_OPERATIONS = {"GetAgentCard", "SendMessage", "GetTask", "ListTasks", "CancelTask"}
STREAM_OPERATIONS = {"SendStreamingMessage", "SubscribeToTask"}
UNSUPPORTED_OPERATIONS = {"PushNotificationConfig"}


def test_every_operation_was_strictly_checked(request: pytest.FixtureRequest) -> None:
    here = Path(__file__).parent
    modules = {p.name for p in here.glob("test_*.py")}
    selected = {Path(str(item.fspath)).name for item in request.session.items}
    ran = len([i for i in request.session.items if i.name != COVERAGE_TEST])
    if not modules <= selected or ran < 50:
        pytest.skip("only part of the e2e suite was selected")

    assert not CHECK_FAILURES, "\n".join(CHECK_FAILURES)
    assert len(SEEN) > 100, len(SEEN)
    assert len(wire.CHECKED) + len(wire.SSE_CHECKED) >= len(SEEN)

    def ops(source: str, ok_only: bool) -> set[str]:
        return {
            operation(s.method, s.path)
            for s in SEEN
            if s.source == source and (not ok_only or 200 <= s.status < 300)
        }

    # The a2a-sdk client's own requests went through the strict check, for every operation.
    assert ops("sdk", ok_only=True) >= CORE_OPERATIONS | STREAM_OPERATIONS, ops("sdk", True)
    assert {"PushNotificationConfig", "SendMessage"} <= ops("sdk", ok_only=False)
    # And the raw requests covered every route, successes and errors alike.
    assert ops("raw", ok_only=True) >= CORE_OPERATIONS | STREAM_OPERATIONS, ops("raw", True)
    assert ops("raw", ok_only=False) >= CORE_OPERATIONS | STREAM_OPERATIONS | UNSUPPORTED_OPERATIONS
    # Stream operations failed before any stream bytes too (errors are Status JSON, not SSE).
    assert {operation(s.method, s.path) for s in SEEN if s.status >= 400} >= STREAM_OPERATIONS
    # Every SSE body was checked frame by frame, from both clients, and most were read to the
    # end (so their closing rules were checked too).
    sse_ops = {operation(method, path) for method, path, _, _, _ in wire.SSE_CHECKED}
    assert sse_ops == STREAM_OPERATIONS, sse_ops
    assert sum(1 for *_, complete in wire.SSE_CHECKED if complete) >= 10, wire.SSE_CHECKED
    assert any(comments for _, _, _, comments, _ in wire.SSE_CHECKED), "no heartbeat was seen"
    streamed = sum(
        1
        for s in SEEN
        if 200 <= s.status < 300
        and s.method == "POST"
        and operation(s.method, s.path) in STREAM_OPERATIONS
    )
    assert len(wire.SSE_CHECKED) == streamed, (len(wire.SSE_CHECKED), streamed)
    statuses = {s.status for s in SEEN}
    assert {200, 304, 400, 404, 413, 415} <= statuses, statuses
