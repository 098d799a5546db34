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
PUSH_OPERATIONS = {"PushNotificationConfig"}
# Every push config route (spec §11.3.3): create and list on the collection, get and delete on
# one config.
PUSH_ROUTES = {"POST configs", "GET configs", "GET config", "DELETE config"}


def push_route(method: str, path: str) -> str | None:
    """Which push config route a request addressed, e.g. "DELETE config"; None for others."""
    path = path.split("?")[0]
    if operation(method, path) != "PushNotificationConfig":
        return None
    return f"{method} {'configs' if path.endswith('/pushNotificationConfigs') else 'config'}"


def test_every_operation_was_strictly_checked(request: pytest.FixtureRequest) -> None:
    here = Path(__file__).parent
    modules = {p.name for p in here.glob("test_*.py")}
    selected = {Path(str(item.fspath)).name for item in request.session.items}
    ran = len([i for i in request.session.items if i.name != COVERAGE_TEST])
    if not modules <= selected or ran < 50:
        pytest.skip("only part of the e2e suite was selected")

    assert not CHECK_FAILURES, "\n".join(CHECK_FAILURES)
    assert len(SEEN) > 100, len(SEEN)
    # Every response was checked: HTTP+JSON ones as such, JSON-RPC answers of `POST /` by the
    # version and method of their request.
    rest_seen = [s for s in SEEN if s.rpc is None]
    rpc_seen = [s for s in SEEN if s.rpc is not None]
    assert len(wire.CHECKED) + len(wire.SSE_CHECKED) >= len(rest_seen)
    assert len(wire.RPC_CHECKED) + len(wire.RPC_SSE_CHECKED) >= len(rpc_seen), len(rpc_seen)

    def ops(source: str, ok_only: bool) -> set[str]:
        return {
            operation(s.method, s.path)
            for s in SEEN
            if s.source == source and (not ok_only or 200 <= s.status < 300)
        }

    every = CORE_OPERATIONS | STREAM_OPERATIONS | PUSH_OPERATIONS
    # The a2a-sdk client's own requests went through the strict check, for every operation.
    assert ops("sdk", ok_only=True) >= every, ops("sdk", True)
    # And the raw requests covered every route, successes and errors alike.
    assert ops("raw", ok_only=True) >= every, ops("raw", True)
    # Push configs: a strictly parsed success on each route, and their errors (400 invalid or
    # refused config or capability off, 404 unknown task or config) as google.rpc.Status.
    push = [(push_route(s.method, s.path), s.status) for s in SEEN if s.source == "raw"]
    ok_routes = {route for route, status in push if route and 200 <= status < 300}
    assert ok_routes >= PUSH_ROUTES, ok_routes
    push_errors = {status for route, status in push if route and status >= 400}
    assert push_errors >= {400, 404}, push_errors
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
